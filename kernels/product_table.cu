// The fast kernels' table (kernels/product_fast.h), in dispatch order: for a format, the first
// row whose m range holds m and whose contract accepts the call runs it.
#include <limits>

#include "kernels/product_fast.h"

namespace trit::kernels {

const std::vector<FastKernel>& fast_kernels() {
    static const std::vector<FastKernel> table = {
        // rows: {format, path, min_m, max_m, rejects, launch}
    };
    return table;
}

}  // namespace trit::kernels
