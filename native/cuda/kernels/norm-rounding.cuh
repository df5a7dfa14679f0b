/*
 * norm-rounding.cuh — an RMSNorm and the activation rounding of the matmuls that read it, in one
 * kernel (memra_cuda_norm_matmul_shared: attn_norm → Q/K/V, ffn_norm → gate/up).
 *
 * norm_round_kernel<MODE, CODES>: one block per row, as rms_norm_kernel / add_rms_norm_kernel
 * (norm_row, same block size, so the same sums), then, once the block's threads have written the
 * row (__syncthreads makes their global writes visible to the block), its warps round the row's
 * q8 blocks with round_block, the body of round_activations_kernel: bit for bit what the norm
 * kernel and the rounding kernel give one after the other, in one launch instead of two. With
 * REGISTERS, rows rounded to q8_0 codes of up to 16 values a thread stay in registers
 * (norm_round_row_q8_0).
 */
#pragma once

#include "elementwise.cuh"
#include "matmul.cuh"

namespace memra_cuda_kernels {

/* norm_row then round_block's q8_0 codes for a row of at most CH values a thread, held in registers
 * from one round of loads (hidden, delta and the weight issued together) to the rounding: the same
 * sums in the same order as norm_row's (thread t adds its values t, t + blockDim, ... in turn, then
 * block_sum), the same products, and each q8_0 block rounded by the warp whose 32 lanes hold it
 * (blockDim and width are multiples of 32). A decode step's norm is one row in one block: this
 * waits on memory once where norm_row and a rounding read back wait three or four times. */
template <int CH>
__device__ __forceinline__ void norm_round_row_q8_0(int64_t r, float * out, float * hidden, const float * delta, const float * __restrict__ weight, int64_t width,
                                                    float eps, double * partial, int8_t * __restrict__ codes, float * __restrict__ scales) {
    const int lane = threadIdx.x & 31;
    const int64_t step = blockDim.x;
    float * hr = hidden + r * width;
    const float * dr = delta ? delta + r * width : nullptr;
    float h[CH], d[CH], w[CH];
    bool present[CH];
#pragma unroll
    for (int k = 0; k < CH; k++) {
        const int64_t i = threadIdx.x + k * step;
        present[k] = i < width; /* the same for a warp's 32 lanes */
        h[k] = present[k] ? hr[i] : 0.0f;
        d[k] = dr && present[k] ? dr[i] : 0.0f;
        w[k] = present[k] ? weight[i] : 0.0f;
    }
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < CH; k++) {
        if (!present[k]) continue;
        if (dr) {
            h[k] = h[k] + d[k];
            hr[threadIdx.x + k * step] = h[k];
        }
        sum = add_square(sum, h[k]);
    }
    sum = block_sum(sum, partial);
    const float scale = rms_scale(sum, width, eps);
    float * o = out + r * width;
    float value[CH];
    int64_t b[CH];
#pragma unroll
    for (int k = 0; k < CH; k++) {
        const int64_t i = threadIdx.x + k * step;
        value[k] = __fmul_rn(__fmul_rn(h[k], scale), w[k]);
        if (present[k]) o[i] = value[k];
        b[k] = (r * width + (present[k] ? i : 0)) / 32;
    }
#pragma unroll
    for (int k = 0; k < CH; k += NORM_CHUNK) round_q8_0_codes_chunk<NORM_CHUNK>(b + k, present + k, lane, value + k, codes, scales);
}

/* REGISTERS (q8_0 codes; the launcher's choice for a few rows: decode): rows of up to 16 values a
 * thread in registers (norm_round_row_q8_0), in a kernel of its own, as those registers (138 on
 * sm_90 against 63) would cut the occupancy of the prefill's hundreds of rows. */
template <int MODE, bool CODES, bool REGISTERS = false>
__global__ void norm_round_kernel(float * out, float * hidden, const float * delta, const float * __restrict__ weight, int64_t rows, int64_t width, float eps,
                                  float * __restrict__ rounded, float * __restrict__ corrections, int8_t * __restrict__ codes, float * __restrict__ scales) {
    memra_grid_dependencies();
    static_assert(MODE == MEMRA_CUDA_ROUND_Q8_0 || MODE == MEMRA_CUDA_ROUND_Q8_1 || MODE == MEMRA_CUDA_ROUND_Q8_K, "q8 roundings only");
    __shared__ double partial[32];
    constexpr int BLOCK = MODE == MEMRA_CUDA_ROUND_Q8_K ? 256 : 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int64_t blocks_per_row = width / BLOCK;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        if constexpr (REGISTERS) {
            static_assert(MODE == MEMRA_CUDA_ROUND_Q8_0 && CODES, "q8_0 codes only");
            /* rows of up to 16 values a thread (4,096 with 256 threads: Qwen3-8B) in registers */
            if (width <= (int64_t)blockDim.x * NORM_CHUNK) {
                norm_round_row_q8_0<NORM_CHUNK>(r, out, hidden, delta, weight, width, eps, partial, codes, scales);
                continue;
            }
            if (width <= (int64_t)blockDim.x * 2 * NORM_CHUNK) {
                norm_round_row_q8_0<2 * NORM_CHUNK>(r, out, hidden, delta, weight, width, eps, partial, codes, scales);
                continue;
            }
        }
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
