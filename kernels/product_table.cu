// The fast kernels' table (kernels/product_fast.h), in dispatch order: for a format, the first
// row whose m range holds m and whose contract accepts the call runs it.
#include <limits>

#include "kernels/product_fast.h"
#include "kernels/tern2_gemv.h"

namespace trit::kernels {

const std::vector<FastKernel>& fast_kernels() {
    static const std::vector<FastKernel> table = {
        // rows: {format, path, min_m, max_m, rejects, launch}
        {Format::kTern2, ProductPath::kGemv, 1, kTern2GemvMaxM, tern2_gemv_rejects, tern2_gemv},
    };
    return table;
}

}  // namespace trit::kernels
