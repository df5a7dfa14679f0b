/*
 * rms-norm.cuh — the arithmetic every RMSNorm of the residual stream shares (norm_row in
 * elementwise.cuh, the matrix-vector kernel's norm tail in matmul.cuh), written once so that the
 * kernels that must agree bit for bit compile the same expressions (and the same contractions).
 */
#pragma once

#include "device.cuh"

namespace memra_cuda_kernels {

/* Values a thread loads at a time, in flight together, in the norms of one block a row (norm_row,
 * the matrix-vector kernel's norm tail): one L2 round trip for each of them, one after another,
 * would cost tens of µs at a width of 4,096. */
constexpr int NORM_CHUNK = 8;

/* A row's sum of squares plus value², in double (ggml's rms_norm sums in ggml_float). */
__device__ __forceinline__ double add_square(double sum, float value) { return sum + (double)value * (double)value; }

/* A warp's butterfly sum of `sum`: every lane gets the same total (each step adds the same two
 * values in either order, and addition commutes). */
__device__ __forceinline__ double warp_sum(double sum) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    return sum;
}

/* 1 / sqrt(mean + eps) of a row of `width` values whose squares sum to `sum`, as ggml's rms_norm. */
__device__ __forceinline__ float rms_scale(double sum, int64_t width, float eps) {
    const float mean = (float)(sum / (double)width);
    return 1.0f / sqrtf(mean + eps);
}

}  // namespace memra_cuda_kernels
