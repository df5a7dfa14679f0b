/*
 * moe.cuh — Qwen3-MoE routing: one warp per row; softmax over the row's logits (probabilities in
 * shared memory), k rounds of a warp arg-max (ties to the lower expert id), the chosen weights
 * renormalised to sum to one (summed in order, as llama.cpp's ggml_sum_rows over k values).
 *
 * The experts of a few rows on the device (decode), no routing read back to the host:
 * expert_matrix_vector_kernel multiplies each (row, chosen expert) pair's input by that expert's
 * matrix, its id read from the device; expert_combine_kernel sums the pairs' outputs per row,
 * weighted, in ascending expert id, as the gather/scatter path adds them.
 *
 * Many rows (memra_cuda_moe_grouped): moe_group_kernel sorts the pairs by expert and writes the
 * grouped GEMMs' tile tables, gather_pair_rows_kernel copies each slot's input row, the projections
 * run as grouped GEMMs (kernels/matmul.cuh, gemm_groups), and expert_combine_kernel reads each
 * pair's output from its slot.
 */
#pragma once

#include "device.cuh"
#include "matmul.cuh"

namespace memra_cuda_kernels {

static __global__ void moe_route_kernel(int32_t * __restrict__ ids, float * __restrict__ weights, const float * __restrict__ logits, int64_t rows, int experts, int k) {
    memra_grid_dependencies();
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

/* This warp's pair, output feature and weight row in an expert matrix-vector launch: grid.y the
 * pairs from first_pair, grid.x blocks_per_matrix blocks of the first matrix then as many of the
 * second (gate and up in one launch). o >= n_out: a warp past the matrix's end. */
struct expert_row {
    int64_t pair, o;
    float * out;
    const uint8_t * weight;
};
__device__ __forceinline__ expert_row expert_row_here(float * out, float * second_out, const uint8_t * weights, const uint8_t * second_weights,
                                                      int64_t blocks_per_matrix, int64_t matrix_bytes, int64_t row_bytes, const int32_t * ids,
                                                      int64_t first_pair) {
    const int64_t pair = first_pair + blockIdx.y;
    const bool second = (int64_t)blockIdx.x >= blocks_per_matrix;
    const int64_t o = ((int64_t)blockIdx.x - (second ? blocks_per_matrix : 0)) * MEMRA_CUDA_MMV_WARPS + (threadIdx.x >> 5);
    const uint8_t * matrices = second ? second_weights : weights;
    return expert_row{pair, o, second ? second_out : out, matrices + (int64_t)ids[pair] * matrix_bytes + o * row_bytes};
}

/* out[p, o] = W[ids[p]][o, :] · x[p / x_row_divisor, :] for pairs p = row · k + j: grid.x covers
 * n_out in warps (one per output feature, as matrix_vector_kernel with one row), for each of one or
 * two expert weights of one type (gate and up: the second's blocks after the first's, blocks_per
 * matrix each), grid.y the pairs from first_pair. */
template <int TYPE>
__global__ void __launch_bounds__(MEMRA_CUDA_MMV_WARPS * 32) expert_matrix_vector_kernel(float * __restrict__ out, float * __restrict__ second_out,
                                                                                         const float * __restrict__ x, int64_t x_row_divisor,
                                                                                         const uint8_t * __restrict__ weights,
                                                                                         const uint8_t * __restrict__ second_weights, int64_t blocks_per_matrix,
                                                                                         int64_t matrix_bytes, int64_t row_bytes,
                                                                                         const int32_t * __restrict__ ids, int64_t first_pair, int64_t n_in,
                                                                                         int64_t n_out) {
    memra_grid_dependencies();
    const int lane = threadIdx.x & 31;
    const expert_row target = expert_row_here(out, second_out, weights, second_weights, blocks_per_matrix, matrix_bytes, row_bytes, ids, first_pair);
    const int64_t pair = target.pair, o = target.o;
    if (o >= n_out) return;
    out = target.out;
    const uint8_t * w = target.weight;
    const float * xr = x + (pair / x_row_divisor) * n_in;
    float sum[1] = {0.0f};
    /* Unrolled: several groups' loads in flight together (as matrix_vector_kernel). */
#pragma unroll 4
    for (int64_t g = lane; g < n_in / 8; g += 32) {
        float v[8];
        dequantize_group<TYPE>(w, g, v);
        const float4 * x4 = reinterpret_cast<const float4 *>(xr + g * 8);
        const float4 a = __ldg(x4), b = __ldg(x4 + 1);
        sum[0] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
    }
    reduce_rows_and_store<1>(sum, lane, 1, out + pair * n_out, n_out, o);
}

/* expert_matrix_vector_kernel on the activations' q8 codes (q8_0, q4_0, q5_0, q2_K, q3_K, q4_K, q5_K, q6_K,
 * iq4_nl, iq4_xs and the iq1/iq2/iq3 weights; codes [pairs / x_row_divisor, n_in], one scale per 32 or 256 of them): per 8-value
 * group, __dp4a of the weight's and the activation's codes, as matrix_vector_codes_kernel. */
template <int TYPE>
__global__ void __launch_bounds__(MEMRA_CUDA_MMV_WARPS * 32) expert_matrix_vector_codes_kernel(
    float * __restrict__ out, float * __restrict__ second_out, const int8_t * __restrict__ codes, const float * __restrict__ scales, int64_t x_row_divisor,
    const uint8_t * __restrict__ weights, const uint8_t * __restrict__ second_weights, int64_t blocks_per_matrix, int64_t matrix_bytes, int64_t row_bytes,
    const int32_t * __restrict__ ids, int64_t first_pair, int64_t n_in, int64_t n_out) {
    memra_grid_dependencies();
    const int lane = threadIdx.x & 31;
    const expert_row target = expert_row_here(out, second_out, weights, second_weights, blocks_per_matrix, matrix_bytes, row_bytes, ids, first_pair);
    const int64_t pair = target.pair, o = target.o;
    if (o >= n_out) return;
    out = target.out;
    constexpr int GROUP_SHIFT = code_group_shift<TYPE>();
    const uint8_t * w = target.weight;
    const int64_t groups = n_in / 8, x_row = pair / x_row_divisor;
    const int8_t * xr = codes + x_row * n_in;
    const float * dr = scales + x_row * (groups >> GROUP_SHIFT);
    float sum[1] = {0.0f};
#pragma unroll 4
    for (int64_t g = lane; g < groups; g += 32) {
        int q[2], zero;
        float s, offset;
        code_words<TYPE>(w, g, q, s, offset, zero);
        const int2 a = __ldg(reinterpret_cast<const int2 *>(xr + g * 8));
        sum[0] = __fmaf_rn(code_group_dot(q, s, offset, zero, a), __ldg(dr + (g >> GROUP_SHIFT)), sum[0]);
    }
    reduce_rows_and_store<1>(sum, lane, 1, out + pair * n_out, n_out, o);
}

/* out[r, c] = Σ_j weights[r, j] · down[slot(r · k + j), c], added in ascending expert id from zero
 * (the order in which the gather/scatter path adds the experts' rows); slot(p) = pair_slots[p], or
 * p where pair_slots is null (the pairs' outputs in pair order). */
static __global__ void expert_combine_kernel(float * __restrict__ out, const float * __restrict__ down, const int32_t * __restrict__ ids,
                                             const float * __restrict__ weights, const int32_t * __restrict__ pair_slots, int64_t rows, int k,
                                             int64_t width) {
    memra_grid_dependencies();
    const int64_t total = rows * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / width, c = i % width;
        const int32_t * row_ids = ids + r * k;
        float sum = 0.0f;
        int last = -1;
        for (int n = 0; n < k; n++) {
            int chosen = -1;
            for (int j = 0; j < k; j++) {
                if (row_ids[j] > last && (chosen < 0 || row_ids[j] < row_ids[chosen])) chosen = j;
            }
            if (chosen < 0) break;
            last = row_ids[chosen];
            const int64_t pair = r * k + chosen, slot = pair_slots ? pair_slots[pair] : pair;
            sum = __fadd_rn(sum, __fmul_rn(weights[pair], down[slot * width + c]));
        }
        out[i] = sum;
    }
}

/* Appends expert e's tiles of tile_rows rows (its `count` slots from `offset`) to a tile table
 * that holds `used` entries. */
__device__ __forceinline__ void append_expert_tiles(int32_t * tiles, int64_t & used, int e, int offset, int count, int tile_rows) {
    for (int first = 0; first < count; first += tile_rows, used++) {
        tiles[3 * used] = e;
        tiles[3 * used + 1] = offset + first;
        tiles[3 * used + 2] = offset + (count - first < tile_rows ? count : first + tile_rows);
    }
}

/* The grouped path's sort (one block of MEMRA_CUDA_MOE_GROUP_THREADS; shared: counts and cursors,
 * experts int32 each): each expert's pairs get the consecutive slots from its offset (experts in
 * ascending id), slot_pairs[slot] = pair and pair_slots[pair] = slot. Within an expert the slots go
 * in whatever order the threads' atomics take them: a GEMM row's results do not depend on where in
 * a tile the row sits, so the outputs are the same for any order. Then the tile tables, one per
 * GEMM tile height: entry t = {expert, first slot, end slot} for the experts' rows in tiles of
 * tile_rows, experts ascending; entries from the last used one to `bound` get expert −1 (no tile). */
static __global__ void __launch_bounds__(MEMRA_CUDA_MOE_GROUP_THREADS) moe_group_kernel(int32_t * __restrict__ slot_pairs, int32_t * __restrict__ pair_slots,
                                                                                     int32_t * __restrict__ tiles_a, int tile_rows_a, int64_t bound_a,
                                                                                     int32_t * __restrict__ tiles_b, int tile_rows_b, int64_t bound_b,
                                                                                     const int32_t * __restrict__ ids, int64_t pairs, int experts) {
    memra_grid_dependencies();
    MEMRA_DYNAMIC_SHARED(int, shared);
    int * counts = shared;
    int * cursors = shared + experts;
    __shared__ int64_t used[2];
    const int tid = threadIdx.x, threads = blockDim.x;
    for (int e = tid; e < experts; e += threads) counts[e] = 0;
    __syncthreads();
    for (int64_t p = tid; p < pairs; p += threads) atomicAdd(&counts[ids[p]], 1);
    __syncthreads();
    if (tid == 0) {
        int offset = 0;
        int64_t used_a = 0, used_b = 0;
        for (int e = 0; e < experts; e++) {
            const int count = counts[e];
            cursors[e] = offset;
            append_expert_tiles(tiles_a, used_a, e, offset, count, tile_rows_a);
            append_expert_tiles(tiles_b, used_b, e, offset, count, tile_rows_b);
            offset += count;
        }
        used[0] = used_a;
        used[1] = used_b;
    }
    __syncthreads();
    for (int64_t t = used[0] + tid; t < bound_a; t += threads) tiles_a[3 * t] = -1;
    for (int64_t t = used[1] + tid; t < bound_b; t += threads) tiles_b[3 * t] = -1;
    for (int64_t p = tid; p < pairs; p += threads) {
        const int slot = atomicAdd(&cursors[ids[p]], 1);
        slot_pairs[slot] = (int32_t)p;
        pair_slots[p] = slot;
    }
}

/* out[s, :] = x[slot_pairs[s] / k, :]: each slot's row of the input, rows of `width` floats. */
static __global__ void gather_pair_rows_kernel(float * __restrict__ out, const float * __restrict__ x, const int32_t * __restrict__ slot_pairs, int64_t slots,
                                               int k, int64_t width) {
    memra_grid_dependencies();
    const int64_t total = slots * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t s = i / width, c = i % width;
        out[i] = x[(int64_t)(slot_pairs[s] / k) * width + c];
    }
}

}  // namespace memra_cuda_kernels
