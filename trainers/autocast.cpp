// Autocast scope: see autocast.h.
#include "trainers/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "core/error.h"

// LibTorch 2.4 renamed the CUDA autocast calls (and deprecated the old names).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TRIT_AUTOCAST_DEVICE_API 1
#else
#define TRIT_AUTOCAST_DEVICE_API 0
#endif

namespace trit::trainers {
namespace {

bool cuda_autocast_enabled() {
#if TRIT_AUTOCAST_DEVICE_API
    return at::autocast::is_autocast_enabled(at::kCUDA);
#else
    return at::autocast::is_enabled();
#endif
}

c10::ScalarType cuda_autocast_dtype() {
#if TRIT_AUTOCAST_DEVICE_API
    return at::autocast::get_autocast_dtype(at::kCUDA);
#else
    return at::autocast::get_autocast_gpu_dtype();
#endif
}

void set_cuda_autocast(bool enabled, c10::ScalarType dtype) {
#if TRIT_AUTOCAST_DEVICE_API
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
    at::autocast::set_autocast_enabled(at::kCUDA, enabled);
#else
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
#endif
}

}  // namespace

Precision parse_precision(const std::string& name) {
    if (name == "fp32") return Precision::kFp32;
    if (name == "bf16") return Precision::kBf16;
    TRIT_FAIL("--precision '", name, "': expected fp32 or bf16");
}

const char* precision_name(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

void check_precision(Precision p, torch::Device device) {
    TRIT_CHECK(p == Precision::kFp32 || device.is_cuda(), "--precision ", precision_name(p),
               ": bf16 autocast needs --device cuda (on ", device.str(), " train in fp32)");
}

AutocastScope::AutocastScope(Precision p) {
    if (p != Precision::kBf16) return;
    active_ = true;
    was_enabled_ = cuda_autocast_enabled();
    was_dtype_ = cuda_autocast_dtype();
    set_cuda_autocast(true, at::kBFloat16);
}

AutocastScope::~AutocastScope() {
    if (!active_) return;
    set_cuda_autocast(was_enabled_, was_dtype_);
    at::autocast::clear_cache();
}

}  // namespace trit::trainers
