// The packed weight formats as one table (like ggml's type_traits): for each format, its packed
// arrays and row sizes, and dispatch to the bit-exact references in formats/ (pack, validate,
// unpack, products with integer accumulation). Container and runtime code go through this table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trit::exporters {

enum class WeightFormat { kFloat, kTern2, kTern24, kBin1, kBt };

struct FormatId {
    WeightFormat kind = WeightFormat::kFloat;
    int64_t depth = 0;  // bt: trits per weight (1..4)
    std::string name() const;  // "float", "tern2", "tern24", "bin1", "bt1".."bt4"
    bool packed() const { return kind != WeightFormat::kFloat; }
    bool operator==(const FormatId& o) const { return kind == o.kind && depth == o.depth; }
};

// Parses a format name; unknown names are an error listing the known ones.
FormatId parse_format(const std::string& name);
// The formats a weight can be exported to (for help texts).
const char* known_formats();

struct PackedArraySpec {
    std::string name;   // dataset name in the container
    int64_t row_bytes;  // bytes per output row
};

// One byte buffer per packed array, each (n, row_bytes) row-major.
using Arrays = std::vector<std::vector<uint8_t>>;

std::vector<PackedArraySpec> packed_arrays(FormatId f, int64_t k);
// Largest |code| the format stores: 1, or (3^d - 1) / 2 for bt<d>.
int64_t format_max_code(FormatId f);

Arrays pack_codes(FormatId f, const int8_t* codes, int64_t n, int64_t k);
// Throws trit::Error naming the row and byte/group of the first invalid code or padding.
void validate_codes(FormatId f, const Arrays& a, int64_t n, int64_t k);
void unpack_codes(FormatId f, const Arrays& a, int64_t n, int64_t k, int8_t* codes);
// acc (m, n, G): exact int32 sums of x * code per group of `group` inputs (G = ceil(k / group)).
void gemm_int8(FormatId f, const Arrays& a, int64_t n, int64_t k, const int8_t* x, int64_t m,
               int64_t group, int32_t* acc);
// The same with float activations, accumulated in float in increasing k order.
void gemm_f32(FormatId f, const Arrays& a, int64_t n, int64_t k, const float* x, int64_t m,
              int64_t group, float* acc);

}  // namespace trit::exporters
