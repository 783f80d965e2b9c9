// TRIT_CUDA_CHECK(stmt): runs a CUDA runtime call and throws trit::Error with the statement text,
// file, line and the CUDA error name/string when it does not return cudaSuccess.
// TRIT_CUDA_CHECK_LAST() after a kernel launch reports launch-configuration errors the same way.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

#define TRIT_CUDA_CHECK(stmt)                                                              \
    do {                                                                                   \
        const cudaError_t trit_cuda_status_ = (stmt);                                      \
        if (trit_cuda_status_ != cudaSuccess) {                                            \
            TRIT_FAIL("CUDA error: ", #stmt, " failed at ", __FILE__, ":", __LINE__, ": ", \
                      cudaGetErrorName(trit_cuda_status_), " (",                           \
                      cudaGetErrorString(trit_cuda_status_), ")");                         \
        }                                                                                  \
    } while (0)

// cudaGetLastError also clears a non-sticky launch error, so the next check starts clean.
#define TRIT_CUDA_CHECK_LAST() TRIT_CUDA_CHECK(cudaGetLastError())
