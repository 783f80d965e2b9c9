// The tern24 GEMVs' decode table (tern24_gemv.cu, gemv_stream.cu): a 4-column group's 6-bit
// index, bitmap | sign_pair << 4, to its 4 int8 codes in one word (column 4g + p in byte p).
// Host/device constexpr; each kernel file puts it in constant memory and copies it per lane into
// shared memory.
#pragma once

#include <cstdint>

#include "exporters/formats/tern24.h"

namespace trit::kernels::tern24dev {

namespace fmt = trit::formats;

constexpr int kChunkCols = 128;   // 16 mask bytes, 8 sign bytes
constexpr int kTableEntries = 64;  // bitmap | sign_pair << 4

// The 4 codes (int8, column 4g + p in byte p) of a group with table index bitmap | sign_pair << 4.
constexpr uint32_t code_word(int idx) {
    uint32_t w = 0;
    for (int p = 0; p < fmt::kTern24GroupSize; ++p) {
        const int code = fmt::tern24_decode(idx & 0xF, idx >> 4, p);
        w |= static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(code))) << (8 * p);
    }
    return w;
}
struct CodeTable {
    uint32_t w[kTableEntries];
};
constexpr CodeTable make_code_table() {
    CodeTable t{};
    for (int i = 0; i < kTableEntries; ++i) t.w[i] = code_word(i);
    return t;
}
// Bitmap 0b0110 (columns 1, 2), signs (-, +): codes [0, -1, +1, 0].
static_assert(code_word(0b0110 | 0b01 << 4) == 0x0001FF00u);

}  // namespace trit::kernels::tern24dev
