// The format table: names, packed arrays and dispatch to formats/ (see format_table.h).
#include "exporters/format_table.h"

#include "core/error.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/tern2.h"
#include "exporters/formats/tern24.h"

namespace trit::exporters {
namespace {

int depth_of(FormatId f) { return static_cast<int>(f.depth); }

void check_arrays(FormatId f, const Arrays& a, int64_t n, int64_t k) {
    const auto specs = packed_arrays(f, k);
    TRIT_CHECK(a.size() == specs.size(), f.name(), ": expected ", specs.size(), " packed arrays, got ",
               a.size());
    for (size_t i = 0; i < specs.size(); ++i)
        TRIT_CHECK(static_cast<int64_t>(a[i].size()) == n * specs[i].row_bytes, f.name(), ": array '",
                   specs[i].name, "' holds ", a[i].size(), " bytes, expected ", n * specs[i].row_bytes);
}

}  // namespace

std::string FormatId::name() const {
    switch (kind) {
        case WeightFormat::kFloat: return "float";
        case WeightFormat::kTern2: return "tern2";
        case WeightFormat::kTern24: return "tern24";
        case WeightFormat::kBin1: return "bin1";
        case WeightFormat::kBt: return "bt" + std::to_string(depth);
    }
    return "?";
}

const char* known_formats() { return "tern2, tern24, bin1, bt1, bt2, bt3, bt4"; }

FormatId parse_format(const std::string& name) {
    if (name == "float") return {WeightFormat::kFloat, 0};
    if (name == "tern2") return {WeightFormat::kTern2, 0};
    if (name == "tern24") return {WeightFormat::kTern24, 0};
    if (name == "bin1") return {WeightFormat::kBin1, 0};
    if (name.size() == 3 && name.compare(0, 2, "bt") == 0 && name[2] >= '1' && name[2] <= '4')
        return {WeightFormat::kBt, name[2] - '0'};
    TRIT_FAIL("unknown format '", name, "'; known: ", known_formats());
}

std::vector<PackedArraySpec> packed_arrays(FormatId f, int64_t k) {
    switch (f.kind) {
        case WeightFormat::kTern2: return {{"codes", formats::tern2_row_bytes(k)}};
        case WeightFormat::kTern24:
            return {{"mask", formats::tern24_mask_row_bytes(k)}, {"signs", formats::tern24_signs_row_bytes(k)}};
        case WeightFormat::kBin1: return {{"codes", formats::bin1_row_bytes(k)}};
        case WeightFormat::kBt: return {{"codes", formats::bt_row_bytes(k, depth_of(f))}};
        case WeightFormat::kFloat: break;
    }
    return {};
}

int64_t format_max_code(FormatId f) {
    return f.kind == WeightFormat::kBt ? formats::bt_levels(depth_of(f)) : 1;
}

Arrays pack_codes(FormatId f, const int8_t* codes, int64_t n, int64_t k) {
    Arrays a;
    for (const auto& s : packed_arrays(f, k)) a.emplace_back(static_cast<size_t>(n * s.row_bytes));
    switch (f.kind) {
        case WeightFormat::kTern2: formats::tern2_pack(codes, n, k, a[0].data()); break;
        case WeightFormat::kTern24: formats::tern24_pack(codes, n, k, a[0].data(), a[1].data()); break;
        case WeightFormat::kBin1: formats::bin1_pack(codes, n, k, a[0].data()); break;
        case WeightFormat::kBt: formats::bt_pack(codes, n, k, depth_of(f), a[0].data()); break;
        case WeightFormat::kFloat: TRIT_FAIL("pack_codes: float is not a packed format");
    }
    return a;
}

void validate_codes(FormatId f, const Arrays& a, int64_t n, int64_t k) {
    check_arrays(f, a, n, k);
    switch (f.kind) {
        case WeightFormat::kTern2: return formats::tern2_validate(a[0].data(), n, k);
        case WeightFormat::kTern24: return formats::tern24_validate(a[0].data(), a[1].data(), n, k);
        case WeightFormat::kBin1: return formats::bin1_validate(a[0].data(), n, k);
        case WeightFormat::kBt: return formats::bt_validate(a[0].data(), n, k, depth_of(f));
        case WeightFormat::kFloat: break;
    }
    TRIT_FAIL("validate_codes: float is not a packed format");
}

void unpack_codes(FormatId f, const Arrays& a, int64_t n, int64_t k, int8_t* codes) {
    check_arrays(f, a, n, k);
    switch (f.kind) {
        case WeightFormat::kTern2: return formats::tern2_unpack(a[0].data(), n, k, codes);
        case WeightFormat::kTern24: return formats::tern24_unpack(a[0].data(), a[1].data(), n, k, codes);
        case WeightFormat::kBin1: return formats::bin1_unpack(a[0].data(), n, k, codes);
        case WeightFormat::kBt: return formats::bt_unpack(a[0].data(), n, k, depth_of(f), codes);
        case WeightFormat::kFloat: break;
    }
    TRIT_FAIL("unpack_codes: float is not a packed format");
}

void gemm_int8(FormatId f, const Arrays& a, int64_t n, int64_t k, const int8_t* x, int64_t m,
               int64_t group, int32_t* acc) {
    check_arrays(f, a, n, k);
    switch (f.kind) {
        case WeightFormat::kTern2: return formats::tern2_gemm_ref(a[0].data(), n, k, x, m, group, acc);
        case WeightFormat::kTern24:
            return formats::tern24_gemm_ref(a[0].data(), a[1].data(), n, k, x, m, group, acc);
        case WeightFormat::kBin1: return formats::bin1_gemm_ref(a[0].data(), n, k, x, m, group, acc);
        case WeightFormat::kBt: return formats::bt_gemm_ref(a[0].data(), n, k, depth_of(f), x, m, group, acc);
        case WeightFormat::kFloat: break;
    }
    TRIT_FAIL("gemm_int8: float is not a packed format");
}

void gemm_f32(FormatId f, const Arrays& a, int64_t n, int64_t k, const float* x, int64_t m,
              int64_t group, float* acc) {
    check_arrays(f, a, n, k);
    switch (f.kind) {
        case WeightFormat::kTern2: return formats::tern2_gemm_f32_ref(a[0].data(), n, k, x, m, group, acc);
        case WeightFormat::kTern24:
            return formats::tern24_gemm_f32_ref(a[0].data(), a[1].data(), n, k, x, m, group, acc);
        case WeightFormat::kBin1: return formats::bin1_gemm_f32_ref(a[0].data(), n, k, x, m, group, acc);
        case WeightFormat::kBt:
            return formats::bt_gemm_f32_ref(a[0].data(), n, k, depth_of(f), x, m, group, acc);
        case WeightFormat::kFloat: break;
    }
    TRIT_FAIL("gemm_f32: float is not a packed format");
}

}  // namespace trit::exporters
