// tern2 x int8 one-token GEMV with every load in flight at once: see kernels/tern2_gemv_oneshot.h
// for the contract. The kernel is the one-shot GEMV of kernels/gemv_oneshot.cuh with tern2's codec
// (tern2_mma.cuh's decode, 9 integer instructions per 16 codes, against the permuted x).
#include "kernels/tern2_gemv_oneshot.h"

#include "core/error.h"
#include "exporters/formats/common.h"
#include "kernels/gemv_oneshot.cuh"

namespace trit::kernels {

static_assert(kTern2GemvOneshotMaxK == oneshot::kMaxK);

std::string tern2_gemv_oneshot_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group) {
    if (w.format != Format::kTern2) return "the weights must be tern2";
    if (m != 1) return "m must be 1";
    if (group < w.k) return "one scale group only (group >= k)";
    if (w.k % oneshot::kUnitCols != 0) return "k must be a multiple of 64";
    if (w.k > kTern2GemvOneshotMaxK) return "k must be <= 16384";
    if (!oneshot::aligned16(w.a) || !oneshot::aligned16(x)) return "the codes and x must be 16-byte aligned";
    // A block covers at least kWarps rows (one per warp, at 32 lanes per row).
    if (formats::ceil_div(w.n, int64_t{oneshot::kWarps}) > 2147483647) return "n must be <= 4 * (2^31 - 1)";
    return "";
}

// oneshot::lanes: the most lanes per row (32, 16, 8, 4) that keep the grid at <= 16384 threads.
// On the H100 (session 25, m = 1, us): 768 x 768 1.70 with 16 lanes (12288 threads) against
// 1.82 / 1.98 / 2.09 with 32 / 8 / 4; 1024 x 1024 1.91 with 16 against 1.95 / 2.10 / 2.50;
// 3072 x 768 2.27 with 4 (12288) against 2.22 / 2.56 / 2.60 with 8 / 16 / 32; 768 x 3072 2.40
// with 16 against 2.31 / 3.22 with 32 / 8. A larger grid leaves no room on the SMs for the next
// PDL-launched call's blocks, whose early weight reads then no longer overlap this call.
int tern2_gemv_oneshot_lanes(int64_t n, int64_t k) {
    return oneshot::lanes(n, k);
}

bool tern2_gemv_oneshot_launches_late(int64_t n, int64_t k, bool float_x, int sms) {
    return oneshot::late_launch(true, float_x, n, k, oneshot::lanes(n, k), 1, sms);
}

void tern2_gemv_oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out, cudaStream_t stream, int lanes) {
    check_product("tern2_gemv_oneshot", w, x, m, group, out);
    const std::string no = tern2_gemv_oneshot_rejects(w, x, m, group);
    TRIT_CHECK(no.empty(), "tern2_gemv_oneshot (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
               "): ", no);
    oneshot::launch<oneshot::Tern2Codec, oneshot::Groups::kOne, false>(
        "tern2_gemv_oneshot", w.a, w.n, w.k, x, nullptr, group, w.pdl, out, stream, lanes, 1);
}

void tern2_gemv_oneshot_from_float(const PackedWeights& w, const float* x, int64_t group, const ProductOut& out,
                                   cudaStream_t stream, int lanes) {
    const char* who = "tern2_gemv_oneshot_from_float";
    oneshot::check_from_float(who, w, x, group, out, tern2_gemv_oneshot_rejects);
    oneshot::launch<oneshot::Tern2Codec, oneshot::Groups::kOne, true>(
        who, w.a, w.n, w.k, nullptr, x, group, w.pdl, out, stream, lanes, 1);
}

}  // namespace trit::kernels
