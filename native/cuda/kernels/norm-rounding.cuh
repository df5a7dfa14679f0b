/*
 * norm-rounding.cuh — an RMSNorm and the activation rounding of the matmuls that read it, in one
 * kernel (memra_cuda_norm_matmul_shared: attn_norm → Q/K/V, ffn_norm → gate/up).
 *
 * norm_round_kernel<MODE, CODES>: one block per row, as rms_norm_kernel / add_rms_norm_kernel
 * (norm_row, same block size, so the same sums), then, once the block's threads have written the
 * row (__syncthreads makes their global writes visible to the block), its warps round the row's
 * q8 blocks with round_block, the body of round_activations_kernel: bit for bit what the norm
 * kernel and the rounding kernel give one after the other, in one launch instead of two.
 */
#pragma once

#include "elementwise.cuh"
#include "matmul.cuh"

namespace memra_cuda_kernels {

template <int MODE, bool CODES>
__global__ void norm_round_kernel(float * out, float * hidden, const float * delta, const float * __restrict__ weight, int64_t rows, int64_t width, float eps,
                                  float * __restrict__ rounded, float * __restrict__ corrections, int8_t * __restrict__ codes, float * __restrict__ scales) {
    memra_grid_dependencies();
    static_assert(MODE == MEMRA_CUDA_ROUND_Q8_0 || MODE == MEMRA_CUDA_ROUND_Q8_1 || MODE == MEMRA_CUDA_ROUND_Q8_K, "q8 roundings only");
    __shared__ double partial[32];
    constexpr int BLOCK = MODE == MEMRA_CUDA_ROUND_Q8_K ? 256 : 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int64_t blocks_per_row = width / BLOCK;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        norm_row(r, out, hidden, delta, weight, width, eps, partial);
        __syncthreads();
        /* The trip count depends on the warp only: every lane takes part in each shuffle. */
        if constexpr (MODE == MEMRA_CUDA_ROUND_Q8_0 && CODES) {
            /* NORM_CHUNK blocks a warp at a time, their loads in flight together (round_block's
             * codes, from the values read back here: written by other threads before the barrier) */
            constexpr int CH = NORM_CHUNK;
            for (int64_t first = warp; first < blocks_per_row; first += (int64_t)CH * warps) {
                float value[CH];
                int64_t b[CH];
                bool present[CH];
#pragma unroll
                for (int k = 0; k < CH; k++) {
                    const int64_t block = first + (int64_t)k * warps;
                    present[k] = block < blocks_per_row;
                    b[k] = r * blocks_per_row + (present[k] ? block : 0);
                    value[k] = present[k] ? out[b[k] * 32 + lane] : 0.0f;
                }
                round_q8_0_codes_chunk<CH>(b, present, lane, value, codes, scales);
            }
        } else {
            for (int64_t b = warp; b < blocks_per_row; b += warps) round_block<MODE, CODES>(r * blocks_per_row + b, lane, rounded, corrections, out, codes, scales, nullptr);
        }
    }
}

}  // namespace memra_cuda_kernels
