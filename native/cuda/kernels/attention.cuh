/*
 * attention.cuh — KV cache rows and paged attention.
 *
 * kv_write_kernel<KV>: one warp per 32 values of a source row; q8_0 as ggml's quantize_row_q8_0
 * reference (d = amax / 127 stored as f16, q = roundf(x / d)), f16 round-to-nearest-even.
 *
 * paged_attention_kernel<KV, CHUNKS>: one warp per (query row, head); lane l holds dims
 * l + 32c (c < CHUNKS = ceil(head_dim / 32)) of q and of the output. The row's sequence is found in the
 * sequence list; keys and values are read slot by slot through its block table, with an online
 * softmax (running max and sum, f32). Serves decode (one row per sequence) and prefill (many
 * rows) alike; a tensor-core flash-attention kernel for long prefills is still to come.
 */
#pragma once

#include "quant.cuh"

namespace memra_cuda_kernels {

template <int KV>
__device__ __forceinline__ float kv_value(const uint8_t * row, int64_t d) {
    if constexpr (KV == MEMRA_CUDA_TYPE_F32) {
        return reinterpret_cast<const float *>(row)[d];
    } else if constexpr (KV == MEMRA_CUDA_TYPE_F16) {
        return __half2float(reinterpret_cast<const __half *>(row)[d]);
    } else {
        const uint8_t * block = row + (d >> 5) * 34;
        return half_at(block) * (float)(int8_t)block[2 + (d & 31)];
    }
}

template <int KV>
__global__ void kv_write_kernel(uint8_t * storage, int64_t row_bytes, int64_t width, const int32_t * __restrict__ slots, int64_t count,
                                const float * __restrict__ source) {
    const int lane = threadIdx.x & 31;
    const int64_t chunk = blockIdx.x * (int64_t)(blockDim.x / 32) + (threadIdx.x >> 5);
    const int64_t d = chunk * 32 + lane;
    if (chunk * 32 >= width) return;
    for (int64_t i = blockIdx.y; i < count; i += gridDim.y) {
        uint8_t * row = storage + (int64_t)slots[i] * row_bytes;
        const float value = d < width ? source[i * width + d] : 0.0f;
        if constexpr (KV == MEMRA_CUDA_TYPE_F32) {
            if (d < width) reinterpret_cast<float *>(row)[d] = value;
        } else if constexpr (KV == MEMRA_CUDA_TYPE_F16) {
            if (d < width) reinterpret_cast<__half *>(row)[d] = __float2half_rn(value);
        } else {
            float amax = fabsf(value);
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
            const float scale = amax / 127.0f;
            const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
            uint8_t * block = row + chunk * 34;
            block[2 + lane] = (uint8_t)(int8_t)roundf(__fmul_rn(value, inverse));
            if (lane == 0) *reinterpret_cast<__half *>(block) = __float2half_rn(scale);
        }
    }
}

template <int KV, int CHUNKS>
__global__ void __launch_bounds__(32) paged_attention_kernel(float * __restrict__ out, const float * __restrict__ q, const uint8_t * __restrict__ keys,
                                                             const uint8_t * __restrict__ values, int64_t row_bytes, int block_tokens,
                                                             const int32_t * __restrict__ block_tables, const int32_t * __restrict__ sequences,
                                                             int sequence_count, int heads, int kv_heads, int head_dim, float scale) {
    const int64_t row = blockIdx.x;
    const int head = blockIdx.y;
    const int lane = threadIdx.x;
    int s = 0;
    while (s + 1 < sequence_count && row >= sequences[(s + 1) * 4]) s++;
    const int32_t * sequence = sequences + s * 4;
    const int64_t last = (int64_t)sequence[2] + (row - sequence[0]); /* attends to positions [0, last] */
    const int32_t * table = block_tables + sequence[3];
    const int kv_head = head / (heads / kv_heads);
    const int64_t kv_offset = (int64_t)kv_head * head_dim;
    const float * qr = q + (row * heads + head) * (int64_t)head_dim;
    /* Lanes past head_dim (head_dim not a multiple of 32) hold zeros and never load. */
    float qv[CHUNKS], acc[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        qv[c] = c * 32 + lane < head_dim ? qr[c * 32 + lane] : 0.0f;
        acc[c] = 0.0f;
    }
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int64_t p = 0; p <= last; p++) {
        const int64_t slot = (int64_t)table[p / block_tokens] * block_tokens + p % block_tokens;
        const uint8_t * k = keys + slot * row_bytes;
        float dot = 0.0f;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            if (c * 32 + lane < head_dim) dot += qv[c] * kv_value<KV>(k, kv_offset + c * 32 + lane);
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        const float score = dot * scale;
        const float next_max = fmaxf(running_max, score);
        const float correction = expf(running_max - next_max);
        const float weight = expf(score - next_max);
        running_sum = running_sum * correction + weight;
        const uint8_t * v = values + slot * row_bytes;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            if (c * 32 + lane < head_dim) acc[c] = acc[c] * correction + weight * kv_value<KV>(v, kv_offset + c * 32 + lane);
        }
        running_max = next_max;
    }
    float * o = out + (row * heads + head) * (int64_t)head_dim;
    const float inverse = 1.0f / running_sum;
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        if (c * 32 + lane < head_dim) o[c * 32 + lane] = acc[c] * inverse;
    }
}

}  // namespace memra_cuda_kernels
