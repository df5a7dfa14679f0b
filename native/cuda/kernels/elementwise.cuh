/*
 * elementwise.cuh — row and elementwise kernels: embedding, dequantize, RMSNorm, NEOX RoPE,
 * SwiGLU, add, gather and scatter-add of rows. Grid-stride loops: any grid the plan chooses covers
 * the whole problem.
 */
#pragma once

#include "quant.cuh"
#include "rms-norm.cuh"

namespace memra_cuda_kernels {

/* out[r, :] = dequantized table row ids[r]. One thread per 8-value group. */
template <int TYPE>
__global__ void embedding_kernel(float * __restrict__ out, const uint8_t * __restrict__ table, int64_t row_bytes, int64_t width,
                                 const int32_t * __restrict__ ids, int64_t id_count) {
    memra_grid_dependencies();
    const int64_t groups_per_row = width / 8;
    const int64_t total = id_count * groups_per_row;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / groups_per_row, g = i % groups_per_row;
        float v[8];
        dequantize_group<TYPE>(table + (int64_t)ids[r] * row_bytes, g, v);
        float * o = out + r * width + g * 8;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = v[k];
    }
}

/* The block's total of every thread's `sum`: a warp's shuffles, then the warps' partials (in
 * `partial`, shared) added in warp order; every thread gets it. */
__device__ __forceinline__ double block_sum(double sum, double * partial) {
    sum = warp_sum(sum);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (warps > 1) {
        if (lane == 0) partial[warp] = sum;
        __syncthreads();
        sum = 0.0;
        for (int w = 0; w < warps; w++) sum += partial[w];
        __syncthreads();
    }
    return sum;
}

/* Row r's RMSNorm, as ggml's rms_norm + mul (the sum of squares in double): out = x / sqrt(mean(x²)
 * + eps) · weight; with `delta`, hidden += delta first (as add_kernel) and x is the sum. Every
 * thread of the block takes part (block_sum). A thread's values are loaded NORM_CHUNK at a time
 * and summed in the same order. */
__device__ __forceinline__ void norm_row(int64_t r, float * out, float * hidden, const float * delta, const float * __restrict__ weight, int64_t width, float eps,
                                         double * partial) {
    constexpr int CH = NORM_CHUNK;
    float * hr = hidden + r * width;
    const int64_t step = blockDim.x;
    double sum = 0.0;
    const float * dr = delta ? delta + r * width : nullptr;
    for (int64_t base = threadIdx.x; base < width; base += CH * step) {
        float h[CH], d[CH];
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int64_t i = base + k * step;
            h[k] = i < width ? hr[i] : 0.0f;
            d[k] = dr && i < width ? dr[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int64_t i = base + k * step;
            if (i < width) {
                if (dr) {
                    h[k] = h[k] + d[k];
                    hr[i] = h[k];
                }
                sum = add_square(sum, h[k]);
            }
        }
    }
    sum = block_sum(sum, partial);
    const float scale = rms_scale(sum, width, eps);
    float * o = out + r * width;
    for (int64_t base = threadIdx.x; base < width; base += CH * step) {
        float h[CH], w[CH];
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int64_t i = base + k * step;
            h[k] = i < width ? hr[i] : 0.0f;
            w[k] = i < width ? weight[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int64_t i = base + k * step;
            if (i < width) o[i] = __fmul_rn(__fmul_rn(h[k], scale), w[k]);
        }
    }
}

/* Rows of `width` values: as ggml's rms_norm + mul, the sum of squares in double (out may be x). */
static __global__ void rms_norm_kernel(float * out, const float * x, const float * __restrict__ weight, int64_t rows, int64_t width, float eps) {
    memra_grid_dependencies();
    __shared__ double partial[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) norm_row(r, out, const_cast<float *>(x), nullptr, weight, width, eps, partial);
}

/* The residual add and the next RMSNorm in one pass: hidden += delta, then out = RMSNorm(hidden) ·
 * weight, each value as add_kernel and rms_norm_kernel (same block size) compute it. */
static __global__ void add_rms_norm_kernel(float * out, float * hidden, const float * __restrict__ delta, const float * __restrict__ weight, int64_t rows,
                                    int64_t width, float eps) {
    memra_grid_dependencies();
    __shared__ double partial[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) norm_row(r, out, hidden, delta, weight, width, eps, partial);
}

/* RoPE scaling as ggml's rope_yarn (linear: ext_factor 0; YaRN: 1); { 1, 0, 1, 0, 0 } rotates
 * exactly as plain RoPE. magnitude: YaRN's 1 + 0.1 ln(1 / freq_scale), computed on the host. */
typedef struct {
    float freq_scale, ext_factor, magnitude, corr_low, corr_high;
} rope_scaling;

/* Pair `pair`'s scaled angle from its plain one, and the factor of its cos and sin (rope_yarn). */
static __device__ __forceinline__ float scaled_rope_angle(rope_scaling scaling, int64_t pair, float theta) {
    const float interpolated = __fmul_rn(scaling.freq_scale, theta);
    if (scaling.ext_factor == 0.0f) return interpolated;
    const float y = __fdiv_rn(__fsub_rn((float)pair, scaling.corr_low), fmaxf(0.001f, __fsub_rn(scaling.corr_high, scaling.corr_low)));
    const float mix = __fmul_rn(__fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y))), scaling.ext_factor);
    return __fadd_rn(__fmul_rn(interpolated, __fsub_rn(1.0f, mix)), __fmul_rn(theta, mix));
}

/* Pair `pair` of a head `v` (values pair and pair + half) rotated to `position`: theta as ggml, the
 * position times theta_scale pair by pair in f32, then scaled (rope_scaling); cos and sin in f32. */
static __device__ __forceinline__ void rope_pair(float * v, int64_t pair, int64_t half, int32_t position, float theta_scale, rope_scaling scaling) {
    float theta = (float)position;
    for (int64_t n = 0; n < pair; n++) theta = __fmul_rn(theta, theta_scale);
    theta = scaled_rope_angle(scaling, pair, theta);
    const float c = __fmul_rn(cosf(theta), scaling.magnitude), s = __fmul_rn(sinf(theta), scaling.magnitude);
    const float x0 = v[pair], x1 = v[pair + half];
    v[pair] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[pair + half] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

/* NEOX RoPE in place; one thread per (row, head, pair). theta as ggml: the position times
 * theta_scale, pair by pair, in f32; then scaled (rope_scaling). */
static __global__ void rope_neox_kernel(float * x, const int32_t * __restrict__ positions, int64_t rows, int64_t heads, int64_t head_dim, float theta_scale,
                                        rope_scaling scaling) {
    memra_grid_dependencies();
    const int64_t half = head_dim / 2;
    const int64_t total = rows * heads * half;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pair = i % half;
        const int64_t head_row = i / half; /* row * heads + head */
        const int64_t row = head_row / heads;
        rope_pair(x + head_row * head_dim, pair, half, positions[row], theta_scale, scaling);
    }
}

/* One head of Qwen3's QK-norm and RoPE in place, by one warp: the head's RMSNorm exactly as
 * rms_norm_kernel computes it with one warp (width head_dim < 256), then NEOX RoPE exactly as
 * rope_neox_kernel on the normed values (with `scaling`; the plain one { 1, 0, 1, 0, 0 } changes no
 * bit). Ends with __syncwarp: the head's values are then visible to the whole warp. */
__device__ __forceinline__ void norm_rope_head(float * v, const float * __restrict__ w, int32_t position, int lane, int head_dim, float eps,
                                               float theta_scale, rope_scaling scaling) {
    double sum = 0.0;
    for (int i = lane; i < head_dim; i += 32) sum += (double)v[i] * (double)v[i];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float mean = (float)(sum / (double)head_dim);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = lane; i < head_dim; i += 32) v[i] = __fmul_rn(__fmul_rn(v[i], scale), w[i]);
    __syncwarp();
    const int half = head_dim / 2;
    for (int pair = lane; pair < half; pair += 32) rope_pair(v, pair, half, position, theta_scale, scaling);
    __syncwarp();
}

/* Qwen3's QK-norm and RoPE in one pass, in place: one warp per (row, head) of q (heads) and of k
 * (kv_heads), norm_rope_head each. */
static __global__ void qk_norm_rope_kernel(float * q, float * k, const float * __restrict__ q_weight, const float * __restrict__ k_weight,
                                    const int32_t * __restrict__ positions, int64_t rows, int heads, int kv_heads, int head_dim, float eps,
                                    float theta_scale, rope_scaling scaling) {
    memra_grid_dependencies();
    const int lane = threadIdx.x & 31;
    const int warps = blockDim.x / 32;
    const int64_t head_rows = rows * (heads + kv_heads);
    for (int64_t hr = blockIdx.x * (int64_t)warps + threadIdx.x / 32; hr < head_rows; hr += (int64_t)gridDim.x * warps) {
        const int64_t row = hr / (heads + kv_heads);
        const int h = (int)(hr % (heads + kv_heads));
        const bool query = h < heads;
        float * v = query ? q + (row * heads + h) * head_dim : k + (row * kv_heads + (h - heads)) * head_dim;
        norm_rope_head(v, query ? q_weight : k_weight, positions[row], lane, head_dim, eps, theta_scale, scaling);
    }
}

static __global__ void swiglu_kernel(float * out, const float * gate, const float * up, int64_t length) {
    memra_grid_dependencies();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < length; i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i];
        out[i] = __fmul_rn(g / (1.0f + expf(-g)), up[i]);
    }
}

static __global__ void add_kernel(float * out, const float * a, const float * b, int64_t length) {
    memra_grid_dependencies();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < length; i += (int64_t)gridDim.x * blockDim.x) out[i] = a[i] + b[i];
}

static __global__ void gather_rows_kernel(float * __restrict__ out, const float * __restrict__ x, const int32_t * __restrict__ row_ids, int64_t count, int64_t width) {
    memra_grid_dependencies();
    const int64_t total = count * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        out[i] = x[(int64_t)row_ids[i / width] * width + i % width];
    }
}

/* One thread per column: the rows are added in order of i, as the CPU does (deterministic even
 * when a row id repeats). */
static __global__ void scatter_add_rows_kernel(float * out, const float * __restrict__ x, const int32_t * __restrict__ row_ids, const float * __restrict__ scales,
                                        int64_t count, int64_t width) {
    memra_grid_dependencies();
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < width; c += (int64_t)gridDim.x * blockDim.x) {
        for (int64_t i = 0; i < count; i++) {
            float * o = out + (int64_t)row_ids[i] * width + c;
            *o = __fadd_rn(*o, __fmul_rn(scales[i], x[i * width + c]));
        }
    }
}

}  // namespace memra_cuda_kernels
