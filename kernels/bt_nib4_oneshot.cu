// bt nibbles x int8, one token, every load in flight at once: see kernels/bt_nib4.h for the
// contract. The kernel is the one-shot GEMV of kernels/gemv_oneshot.cuh with the nibble codec
// (two masks and two dp4a per 8 columns, 8 * the sum of x subtracted per piece): one int32 sum a
// row for one scale group; for several, the units' terms (groups of 64 columns) or int32 sums
// (groups of 64 e columns) added in column order by one thread per row from shared memory, or, in
// the staged kernels with groups of 64 columns, by each warp for its rows (kChain).
#include "kernels/bt_nib4.h"

#include "core/error.h"
#include "exporters/formats/common.h"
#include "kernels/gemv_oneshot.cuh"

namespace trit::kernels {

static_assert(kBtNib4OneshotMaxK == oneshot::kMaxK);

std::string bt_nib4_oneshot_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kBt || w.depth < 1 || w.depth > kBtNib4MaxDepth)
        return "bt_nib4_oneshot takes bt weights of depth 1 or 2 only";
    if (w.dense == nullptr) return "needs the weights' nibbles (PackedWeights::dense, bt_to_nib4)";
    if (m != 1) return "m must be 1";
    if (w.k % oneshot::kUnitCols != 0) return "k must be a multiple of 64";
    if (w.k > kBtNib4OneshotMaxK) return "k must be <= 16384";
    if (group < w.k && group % oneshot::kUnitCols != 0) return "group must be >= k (one group) or a multiple of 64";
    if (!oneshot::aligned16(w.dense) || !oneshot::aligned16(x)) return "the nibbles and x must be 16-byte aligned";
    if (formats::ceil_div(w.n, int64_t{oneshot::kWarps}) > 2147483647) return "n must be <= 4 * (2^31 - 1)";
    return "";
}

int bt_nib4_oneshot_lanes(int64_t k) {
    return oneshot::nib4_lanes(k);
}

int bt_nib4_oneshot_rows(int64_t n, int64_t k, bool float_x, int sms, int64_t two_row_resident,
                         int64_t four_row_resident) {
    return oneshot::nib4_rows(n, k, oneshot::nib4_lanes(k), float_x, sms, two_row_resident,
                              four_row_resident);
}

bool bt_nib4_oneshot_two_warps(int64_t n, int64_t k, int64_t group, bool float_x, int sms,
                               int64_t resident, int64_t pair_resident) {
    return oneshot::nib4_two_warps(n, k, float_x, group < k, sms, resident, pair_resident);
}

bool bt_nib4_oneshot_launches_late(int64_t n, int64_t k, bool float_x, int sms, int64_t group) {
    if (bt_nib4_oneshot_two_warps(n, k, group, float_x, sms))
        return oneshot::late_launch(false, float_x, n, k, oneshot::kPairLanes, 2, sms);
    const int lanes = oneshot::nib4_lanes(k);
    return oneshot::late_launch(false, float_x, n, k, lanes, oneshot::nib4_rows(n, k, lanes, float_x, sms), sms);
}

namespace {

// Both launchers after their checks: x is int8 codes, or (kFloatX) float quantized in the kernel.
template <bool kFloatX>
void launch_nib4(const char* who, const PackedWeights& w, const int8_t* x, const float* xf, int64_t group,
                 const ProductOut& out, cudaStream_t stream, int lanes, int rows, int ahead) {
    using oneshot::Groups;
    using oneshot::Nib4Codec;
    const auto run = [&](auto launch) {
        launch(who, w.dense, w.n, w.k, x, xf, group, w.pdl, out, stream, lanes, rows, ahead);
    };
    if (group >= w.k) return run(oneshot::launch<Nib4Codec, Groups::kOne, kFloatX>);
    if (group == oneshot::kUnitCols) return run(oneshot::launch<Nib4Codec, Groups::kUnit, kFloatX>);
    run(oneshot::launch<Nib4Codec, Groups::kUnits, kFloatX>);
}

}  // namespace

void bt_nib4_oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
                     cudaStream_t stream, int lanes, int rows, int ahead) {
    check_product("bt_nib4_oneshot", w, x, m, group, out);
    const std::string no = bt_nib4_oneshot_rejects(w, x, m, group);
    TRIT_CHECK(no.empty(), "bt_nib4_oneshot (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group, "): ", no);
    launch_nib4<false>("bt_nib4_oneshot", w, x, nullptr, group, out, stream, lanes, rows, ahead);
}

void bt_nib4_oneshot_from_float(const PackedWeights& w, const float* x, int64_t group, const ProductOut& out,
                                cudaStream_t stream, int lanes, int rows) {
    const char* who = "bt_nib4_oneshot_from_float";
    oneshot::check_from_float(who, w, x, group, out, bt_nib4_oneshot_rejects);
    launch_nib4<true>(who, w, nullptr, x, group, out, stream, lanes, rows, -1);
}

}  // namespace trit::kernels
