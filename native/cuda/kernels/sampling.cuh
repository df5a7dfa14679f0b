/*
 * sampling.cuh — picking tokens from logits on the device, so that a greedy decode step reads
 * back one int per sequence instead of the vocabulary's logits.
 *
 * argmax_rows_kernel: the pick is the sampler's argmax (packages/sampler, log-sum-exp.ts): best =
 * 0, then every later value that is > the best so far replaces it. So a NaN never wins, ties go to
 * the lowest index, and a NaN at index 0 is the answer whatever follows (nothing compares > NaN).
 * That is the largest top-k key (below) of the row, or the largest possible key where the row
 * starts with a NaN: so each row is split into chunks of MEMRA_CUDA_ARGMAX_CHUNK values, one block
 * per chunk, each thread's values loaded at once (independent loads: a chunk is one round trip to
 * memory, not a thread's strided walk), the block's largest key atomicMax'ed into the row's key
 * (zeroed before the launch); the launcher turns keys back into indices on the host.
 *
 * top_k_sort_kernel: a pass of memra_cuda_top_k_rows (plan in launch-plan.h). A value and its
 * index become one 64-bit key whose unsigned order is the sampler's top-k order (top-k.ts,
 * candidates.ts): the high half is the value's bits mapped to unsigned order (-0 as +0, NaN below
 * -Infinity), the low half 0xFFFFFFFF - index, so that of equal values the lower index is the
 * larger key. Keys are distinct and nonzero; 0 pads. A block loads its inputs (a chunk of a row's
 * values in pass 0, a group of lists of k keys later) into shared memory, bitonic-sorts them
 * descending and writes the first k: as a list of keys, or, in the last pass, as indices and the
 * values read again from the logits (their exact bits, -0 and NaN payloads included).
 *
 * log_softmax_partial_kernel, log_softmax_combine_kernel: out[r] = (logits[r, targets[r]] − m) −
 * log Σ exp(x − m), m the row's largest value, in f32. The first takes the argmax's chunks (all of
 * a chunk's loads in flight at once) and writes each chunk's largest value m_c and s_c = Σ exp(x −
 * m_c) (0 for a chunk of −Infinity only); the second, one warp per row, merges them: m = max m_c,
 * Σ exp(x − m) = Σ s_c · exp(m_c − m).
 */
#pragma once

#include "../launch-plan.h"
#include "device.cuh"

namespace memra_cuda_kernels {

/* The sort key of `value` at `index` (see the file comment). */
__device__ __forceinline__ unsigned long long top_k_key(float value, uint32_t index) {
    uint32_t bits = __float_as_uint(value);
    uint32_t ordered = 0;  // NaN
    if (value == value) {
        if (bits == 0x80000000u) bits = 0;
        ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    }
    return ((unsigned long long)ordered << 32) | (unsigned long long)(0xFFFFFFFFu - index);
}

/* The index of a key (on the host too: memra_cuda_argmax_rows turns the rows' keys into tokens). */
__host__ __device__ __forceinline__ uint32_t top_k_index(uint64_t key) { return 0xFFFFFFFFu - (uint32_t)(key & 0xFFFFFFFFu); }

/*
 * Block (x, y): chunk x of row y (rows strided by gridDim.y); keys[row] holds the row's largest
 * key so far (0 before the first block: every key is nonzero).
 */
static __global__ void argmax_rows_kernel(unsigned long long * __restrict__ keys, const float * __restrict__ logits, int64_t rows, int64_t columns) {
    memra_grid_dependencies();
    __shared__ unsigned long long partial[MEMRA_CUDA_ARGMAX_THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t first = (int64_t)blockIdx.x * MEMRA_CUDA_ARGMAX_CHUNK;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float * x = logits + row * columns;
        float value[MEMRA_CUDA_ARGMAX_VALUES];
#pragma unroll
        for (int j = 0; j < MEMRA_CUDA_ARGMAX_VALUES; j++) {
            const int64_t i = first + j * MEMRA_CUDA_ARGMAX_THREADS + threadIdx.x;
            if (i < columns) value[j] = x[i];
        }
        unsigned long long best = 0;
#pragma unroll
        for (int j = 0; j < MEMRA_CUDA_ARGMAX_VALUES; j++) {
            const int64_t i = first + j * MEMRA_CUDA_ARGMAX_THREADS + threadIdx.x;
            const unsigned long long key = i < columns ? top_k_key(value[j], (uint32_t)i) : 0ull;
            if (key > best) best = key;
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, offset);
            if (other > best) best = other;
        }
        if (lane == 0) partial[warp] = best;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < MEMRA_CUDA_ARGMAX_THREADS / 32; w++) best = partial[w] > best ? partial[w] : best;
            if (first == 0 && x[0] != x[0]) best = ~0ull;  // index 0, above every value's key
            atomicMax(keys + row, best);
        }
        __syncthreads();
    }
}

/* Block-wide reduction of one value per thread with op (all threads get the result); `partial`: 32 floats of shared memory. */
template <typename Op>
__device__ __forceinline__ float block_reduce(float value, float * partial, Op op) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
    if (lane == 0) partial[warp] = value;
    __syncthreads();
    float total = partial[0];
    for (int w = 1; w < warps; w++) total = op(total, partial[w]);
    __syncthreads();
    return total;
}

/* Block (x, y): chunk x of row y (rows strided by gridDim.y); partials [rows, gridDim.x] (m_c, s_c). */
static __global__ void log_softmax_partial_kernel(float2 * __restrict__ partials, const float * __restrict__ logits, int64_t rows, int64_t columns) {
    memra_grid_dependencies();
    __shared__ float partial[32];
    const int64_t first = (int64_t)blockIdx.x * MEMRA_CUDA_ARGMAX_CHUNK;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float * x = logits + row * columns;
        float value[MEMRA_CUDA_ARGMAX_VALUES];
        float m = -INFINITY;
#pragma unroll
        for (int j = 0; j < MEMRA_CUDA_ARGMAX_VALUES; j++) {
            const int64_t i = first + j * MEMRA_CUDA_ARGMAX_THREADS + threadIdx.x;
            value[j] = i < columns ? x[i] : -INFINITY;
        }
#pragma unroll
        for (int j = 0; j < MEMRA_CUDA_ARGMAX_VALUES; j++) m = fmaxf(m, value[j]);
        m = block_reduce(m, partial, [](float a, float b) { return fmaxf(a, b); });
        float sum = 0.0f;
        if (m != -INFINITY) {
#pragma unroll
            for (int j = 0; j < MEMRA_CUDA_ARGMAX_VALUES; j++) sum += expf(value[j] - m);
        }
        sum = block_reduce(sum, partial, [](float a, float b) { return a + b; });
        if (threadIdx.x == 0) partials[row * gridDim.x + blockIdx.x] = make_float2(m, sum);
    }
}

/* One warp per row (rows strided by the grid): out[row] from the row's `chunks` partials. */
static __global__ void log_softmax_combine_kernel(float * __restrict__ out, const float2 * __restrict__ partials, int64_t chunks,
                                                  const float * __restrict__ logits, const int32_t * __restrict__ targets, int64_t rows, int64_t columns) {
    memra_grid_dependencies();
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float2 * p = partials + row * chunks;
        float m = -INFINITY;
        for (int64_t c = threadIdx.x; c < chunks; c += 32) m = fmaxf(m, p[c].x);
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
        float sum = 0.0f;
        for (int64_t c = threadIdx.x; c < chunks; c += 32) sum += p[c].y * expf(p[c].x - m);  // 0 for a chunk of -Infinity only
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        if (threadIdx.x == 0) out[row] = (logits[row * columns + targets[row]] - m) - logf(sum);
    }
}

/*
 * One pass: block (x, y) sorts inputs [x * per_block, min((x + 1) * per_block, inputs)) of row y
 * (rows strided by gridDim.y): values of `logits` when `lists_in` is null, else lists of k keys
 * ([rows, inputs, k]). Writes the best k keys to lists_out [rows, gridDim.x, k], or, when
 * lists_out is null (the last pass: gridDim.x == 1), indices and values to ids / values [rows, k].
 * sort_size: a power of two, at least the inputs' keys, at most MEMRA_CUDA_TOP_K_SORT.
 */
static __global__ void top_k_sort_kernel(const float * __restrict__ logits, int64_t columns, const uint64_t * __restrict__ lists_in, int64_t inputs,
                                         int64_t per_block, int32_t k, int32_t sort_size, uint64_t * __restrict__ lists_out, int32_t * __restrict__ ids,
                                         float * __restrict__ values, int64_t rows) {
    memra_grid_dependencies();
    __shared__ uint64_t keys[MEMRA_CUDA_TOP_K_SORT];
    const int64_t first = (int64_t)blockIdx.x * per_block;
    const int64_t count = (first + per_block < inputs ? first + per_block : inputs) - first;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        if (lists_in == nullptr) {
            const float * x = logits + row * columns + first;
            for (int i = threadIdx.x; i < sort_size; i += blockDim.x) keys[i] = i < count ? top_k_key(x[i], (uint32_t)(first + i)) : 0;
        } else {
            const uint64_t * from = lists_in + (row * inputs + first) * k;
            const int64_t loaded = count * k;
            for (int i = threadIdx.x; i < sort_size; i += blockDim.x) keys[i] = i < loaded ? from[i] : 0;
        }
        __syncthreads();
        // Bitonic sort, descending: pairs (i, i + stride) with bit `stride` of i clear; the pair's
        // order is descending where bit `size` of i is clear (always, in the last merge).
        for (int size = 2; size <= sort_size; size <<= 1) {
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int t = threadIdx.x; t < sort_size / 2; t += blockDim.x) {
                    const int i = 2 * t - (t & (stride - 1));
                    const uint64_t a = keys[i], b = keys[i + stride];
                    if ((a < b) == ((i & size) == 0)) {
                        keys[i] = b;
                        keys[i + stride] = a;
                    }
                }
                __syncthreads();
            }
        }
        if (lists_out != nullptr) {
            uint64_t * to = lists_out + (row * gridDim.x + blockIdx.x) * k;
            for (int j = threadIdx.x; j < k; j += blockDim.x) to[j] = keys[j];  // k <= sort_size (plan)
        } else {
            for (int j = threadIdx.x; j < k; j += blockDim.x) {
                const uint32_t index = top_k_index(keys[j]);
                ids[row * k + j] = (int32_t)index;
                values[row * k + j] = logits[row * columns + index];
            }
        }
        __syncthreads();
    }
}

}  // namespace memra_cuda_kernels
