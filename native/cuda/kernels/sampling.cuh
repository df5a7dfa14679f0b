/*
 * sampling.cuh — picking tokens from logits on the device, so that a greedy decode step reads
 * back one int per sequence instead of the vocabulary's logits.
 *
 * argmax_rows_kernel: one block per row. The pick is the sampler's argmax (packages/sampler,
 * log-sum-exp.ts): best = 0, then every later value that is > the best so far replaces it. So a
 * NaN never wins, ties go to the lowest index, and a NaN at index 0 is the answer whatever
 * follows (nothing compares > NaN). Each thread scans indices tid, tid + blockDim.x, ... keeping
 * its first largest non-NaN value; warps and then the block combine (value, index) pairs
 * preferring the larger value, then the lower index.
 */
#pragma once

#include "device.cuh"

namespace memra_cuda_kernels {

/* Index -1: no non-NaN value seen. */
struct argmax_pair {
    float value;
    int32_t index;
};

__device__ __forceinline__ argmax_pair argmax_better(argmax_pair a, argmax_pair b) {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
    return a;
}

static __global__ void argmax_rows_kernel(int32_t * __restrict__ out, const float * __restrict__ logits, int64_t rows, int64_t columns) {
    memra_grid_dependencies();
    __shared__ argmax_pair partial[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float * x = logits + row * columns;
        argmax_pair best{0.0f, -1};
        for (int64_t i = threadIdx.x; i < columns; i += blockDim.x) {
            const float v = x[i];
            if (v == v && (best.index < 0 || v > best.value)) best = argmax_pair{v, (int32_t)i};
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const argmax_pair other{__shfl_xor_sync(0xffffffffu, best.value, offset), __shfl_xor_sync(0xffffffffu, best.index, offset)};
            best = argmax_better(best, other);
        }
        if (lane == 0) partial[warp] = best;
        __syncthreads();
        if (threadIdx.x == 0) {
            argmax_pair total = partial[0];
            for (int w = 1; w < warps; w++) total = argmax_better(total, partial[w]);
            const float first = x[0];
            out[row] = (first != first || total.index < 0) ? 0 : total.index;
        }
        __syncthreads();
    }
}

}  // namespace memra_cuda_kernels
