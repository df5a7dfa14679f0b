/*
 * moe.cuh — Qwen3-MoE routing: one warp per row; softmax over the row's logits (probabilities in
 * shared memory), k rounds of a warp arg-max (ties to the lower expert id), the chosen weights
 * renormalised to sum to one (summed in order, as llama.cpp's ggml_sum_rows over k values).
 */
#pragma once

#include "device.cuh"

namespace memra_cuda_kernels {

__global__ void moe_route_kernel(int32_t * __restrict__ ids, float * __restrict__ weights, const float * __restrict__ logits, int64_t rows, int experts, int k) {
    MEMRA_DYNAMIC_SHARED(float, probabilities);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + warp;
    if (row >= rows) return;
    float * p = probabilities + warp * experts;
    const float * l = logits + row * experts;
    float max = -INFINITY;
    for (int e = lane; e < experts; e += 32) max = fmaxf(max, l[e]);
    for (int offset = 16; offset > 0; offset >>= 1) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
    float sum = 0.0f;
    for (int e = lane; e < experts; e += 32) {
        p[e] = expf(l[e] - max);
        sum += p[e];
    }
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float inverse = 1.0f / sum;
    for (int e = lane; e < experts; e += 32) p[e] *= inverse;
    __syncwarp();
    float chosen_sum = 0.0f;
    for (int j = 0; j < k; j++) {
        float best = -INFINITY;
        int best_id = experts;
        for (int e = lane; e < experts; e += 32) {
            if (p[e] > best) { best = p[e]; best_id = e; } /* ascending e: ties keep the lower id */
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_xor_sync(0xffffffffu, best, offset);
            const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
            if (other > best || (other == best && other_id < best_id)) { best = other; best_id = other_id; }
        }
        if (lane == 0) {
            ids[row * k + j] = best_id;
            weights[row * k + j] = best;
            chosen_sum += best;
            p[best_id] = -INFINITY;
        }
        __syncwarp();
    }
    if (lane == 0) {
        for (int j = 0; j < k; j++) weights[row * k + j] /= chosen_sum;
    }
}

}  // namespace memra_cuda_kernels
