/*
 * rounding-launch.cuh — what the launchers of matmul.cu and moe.cu share: the activation rounding
 * launched for a runtime rounding mode, and workspace from the caching allocator for one call.
 */
#pragma once

#include "cuda-internal.cuh"
#include "kernels/matmul.cuh"

namespace memra_cuda_kernels {

/* round_activations_kernel for a runtime rounding mode: the rounded values (CODES false) or the
 * q8 codes and block scales (CODES true, q8 modes only); of silu(x) · up where `up` is given. */
template <bool CODES>
static inline void launch_rounding(int rounding, const memra_cuda_launch & launch, cudaStream_t stream, float * rounded, float * corrections, const float * x,
                                   int64_t count, int8_t * codes, float * scales, const float * up = nullptr) {
    const dim3 grid = memra_grid(launch);
    switch (rounding) {
        case MEMRA_CUDA_ROUND_Q8_0:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_Q8_0, CODES>)(rounded, corrections, x, count, codes, scales, up);
            break;
        case MEMRA_CUDA_ROUND_Q8_1:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_Q8_1, CODES>)(rounded, corrections, x, count, codes, scales, up);
            break;
        case MEMRA_CUDA_ROUND_Q8_K:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_Q8_K, CODES>)(rounded, corrections, x, count, codes, scales, up);
            break;
        case MEMRA_CUDA_ROUND_F16:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_F16, false>)(rounded, corrections, x, count, codes, scales, up);
            break;
        default:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_BF16, false>)(rounded, corrections, x, count, codes, scales, up);
            break;
    }
}

/* Weight types matrix_vector_codes_kernel and expert_matrix_vector_codes_kernel take besides q8_0
 * (on the codes of their rounding: q8_0 or q8_K), where the context's codes_mmv is on. */
static inline bool codes_matrix_vector_type(int type) {
    return type == MEMRA_CUDA_TYPE_Q4_0 || type == MEMRA_CUDA_TYPE_Q4_0_X8 || type == MEMRA_CUDA_TYPE_Q5_0 || type == MEMRA_CUDA_TYPE_Q2_K || type == MEMRA_CUDA_TYPE_Q3_K ||
           type == MEMRA_CUDA_TYPE_Q4_K || type == MEMRA_CUDA_TYPE_Q5_K || type == MEMRA_CUDA_TYPE_Q6_K || type == MEMRA_CUDA_TYPE_Q6_K_X8 ||
           type == MEMRA_CUDA_TYPE_IQ4_NL || type == MEMRA_CUDA_TYPE_IQ4_XS || type == MEMRA_CUDA_TYPE_IQ2_XXS || type == MEMRA_CUDA_TYPE_IQ2_XS ||
           type == MEMRA_CUDA_TYPE_IQ2_S || type == MEMRA_CUDA_TYPE_IQ3_XXS || type == MEMRA_CUDA_TYPE_IQ3_S || type == MEMRA_CUDA_TYPE_IQ1_S ||
           type == MEMRA_CUDA_TYPE_IQ1_M;
}

/* Device memory for the duration of one call: from the caching allocator, back to it on return. */
struct workspace {
    memra_cuda * cuda;
    void * pointer = nullptr;
    explicit workspace(memra_cuda * context) : cuda(context) {}
    workspace(const workspace &) = delete;
    workspace & operator=(const workspace &) = delete;
    int allocate(int64_t bytes) {
        pointer = memra_cuda_alloc(cuda, bytes);
        return pointer ? MEMRA_CUDA_OK : memra_cuda_last_status();
    }
    ~workspace() {
        if (pointer) memra_cuda_free(cuda, pointer);
    }
};

}  // namespace memra_cuda_kernels
