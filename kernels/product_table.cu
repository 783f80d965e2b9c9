// The fast kernels' table (kernels/product_fast.h), in dispatch order: for a format, the first
// row whose m range holds m and whose contract accepts the call runs it.
#include <limits>

#include "kernels/bt_gemm.h"
#include "kernels/bt_gemv.h"
#include "kernels/product_fast.h"
#include "kernels/tern24_dense.h"
#include "kernels/tern24_gemv.h"
#include "kernels/tern2_gemm.h"
#include "kernels/tern2_gemv.h"

namespace trit::kernels {

const std::vector<FastKernel>& fast_kernels() {
    static const std::vector<FastKernel> table = {
        // rows: {format, path, min_m, max_m, rejects, launch}
        {Format::kTern2, ProductPath::kGemv, 1, kTern2GemvMaxM, tern2_gemv_rejects, tern2_gemv},
        // m <= 8 calls the GEMV declines (m * k over its shared-memory stage) run here too.
        {Format::kTern2, ProductPath::kGemm, 1, std::numeric_limits<int64_t>::max(),
         tern2_gemm_rejects, tern2_gemm},
        // The dense path first where it measured faster (tern24_dense_first_rejects), then the
        // GEMVs.
        {Format::kTern24, ProductPath::kGemm, 1, std::numeric_limits<int64_t>::max(),
         tern24_dense_first_rejects, tern24_dense_product},
        {Format::kTern24, ProductPath::kGemv, 1, 8, tern24_gemv_rejects, tern24_gemv},
        // The dense path for what the GEMVs decline (m > 8, or the rules above).
        {Format::kTern24, ProductPath::kGemm, 1, std::numeric_limits<int64_t>::max(),
         tern24_dense_rejects, tern24_dense_product},
        {Format::kBt, ProductPath::kGemv, 1, 1, bt_gemv_rejects, bt_gemv},
        // From 2 tokens the GEMM on the trit planes, where the weights have them (but at m = 2 with
        // several scale groups on long k: bt_gemm_dispatch_rejects).
        {Format::kBt, ProductPath::kGemm, 2, std::numeric_limits<int64_t>::max(),
         bt_gemm_dispatch_rejects, bt_gemm},
        {Format::kBt, ProductPath::kGemv, 2, 8, bt_gemv_rejects, bt_gemv},
        // Else, above 8 tokens, the GEMV over chunks of 8.
        {Format::kBt, ProductPath::kGemv, 9, std::numeric_limits<int64_t>::max(),
         bt_gemv_chunks_rejects, bt_gemv_chunks},
    };
    return table;
}

}  // namespace trit::kernels
