/*
 * attention.cuh — KV cache rows and paged attention.
 *
 * kv_write_kernel<KV>: one warp per 32 values of a source row; q8_0 as ggml's quantize_row_q8_0
 * reference (d = amax / 127 stored as f16, q = roundf(x / d)), f16 round-to-nearest-even.
 *
 * paged_attention_kernel<KV, CHUNKS>: split-K ("flash decoding") over the row's positions. Block
 * (query row, head, split) of MEMRA_CUDA_ATTENTION_WARPS warps; lane l holds dims l + 32c
 * (c < CHUNKS = ceil(head_dim / 32)) of q and of the output. The positions [0, length) of the row
 * are cut into groups of MEMRA_CUDA_ATTENTION_KEYS consecutive ones, dealt round robin to the
 * warps of all splits; a warp loads a group's keys together (their loads in flight at once), sums
 * the dot products with interleaved shuffles, and keeps an online softmax (running max and sum,
 * f32) with the weighted values. The block's warps are combined in shared memory; with one split
 * the block writes the output, with more each writes its (max, sum, values) and the pair's last
 * split to finish (a ticket from the context's counters) merges them in split order: the same
 * sums whichever block is last. The block that writes a head's output may also round it to the O
 * projection's q8_0 codes. The splits depend on rows and heads only (launch-plan.c), never on the
 * sequences' lengths, so that a decode step recorded in a CUDA graph and the same step run op by
 * op sum in the same order. Serves decode and the prefills the flash kernel does not take (f32 /
 * q8_0 caches, other head sizes, short chunks). Its FUSED form also applies QK-norm and RoPE and
 * writes the step's K/V (decode: memra_cuda_qk_norm_rope_attention_matmul).
 */
#pragma once

#include "elementwise.cuh"
#include "matmul.cuh"
#include "mma.cuh"
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
        return half_at(block) * small_int_to_float((int8_t)block[2 + (d & 31)]);
    }
}

/* A q8_0 KV block's rounding of the lane's value (the 32 lanes its block): the scale amax / 127
 * (stored as f16) and the code, as ggml's quantize_row_q8_0 reference; the whole warp calls it. */
__device__ __forceinline__ int8_t kv_q8_0_code(float value, float & scale) {
    float amax = fabsf(value);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    scale = amax / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    return (int8_t)roundf(__fmul_rn(value, inverse));
}

/* Values d = 32 · chunk + lane (lanes past `width` idle) of a KV row, converted to the KV type; the
 * whole warp calls it (q8_0: the chunk's amax by shuffles). */
template <int KV>
__device__ __forceinline__ void store_kv_chunk(uint8_t * row, int64_t chunk, int lane, int64_t width, float value) {
    const int64_t d = chunk * 32 + lane;
    if constexpr (KV == MEMRA_CUDA_TYPE_F32) {
        if (d < width) reinterpret_cast<float *>(row)[d] = value;
    } else if constexpr (KV == MEMRA_CUDA_TYPE_F16) {
        if (d < width) reinterpret_cast<__half *>(row)[d] = __float2half_rn(value);
    } else {
        float scale;
        const int8_t code = kv_q8_0_code(value, scale);
        uint8_t * block = row + chunk * 34;
        block[2 + lane] = (uint8_t)code;
        if (lane == 0) *reinterpret_cast<__half *>(block) = __float2half_rn(scale);
    }
}

/* Rows of `source` into `storage` at `slots`, converted to the KV type; blockIdx.z 1 writes
 * `second_source` into `second_storage` (K and V of a layer in one launch). */
template <int KV>
__global__ void kv_write_kernel(uint8_t * storage, uint8_t * second_storage, int64_t row_bytes, int64_t width, const int32_t * __restrict__ slots,
                                int64_t count, const float * source, const float * second_source) {
    memra_grid_dependencies();
    if (blockIdx.z == 1) {
        storage = second_storage;
        source = second_source;
    }
    const int lane = threadIdx.x & 31;
    const int64_t chunk = blockIdx.x * (int64_t)(blockDim.x / 32) + (threadIdx.x >> 5);
    const int64_t d = chunk * 32 + lane;
    if (chunk * 32 >= width) return;
    for (int64_t i = blockIdx.y; i < count; i += gridDim.y) {
        const float value = d < width ? source[i * width + d] : 0.0f;
        store_kv_chunk<KV>(storage + (int64_t)slots[i] * row_bytes, chunk, lane, width, value);
    }
}

/* The context shift's K shift (llama.cpp's build_rope_shift), in place: one block per slot (grid-
 * stride); the row is read into shared memory as f32 (width floats), each (head, pair) rotated by
 * `delta` positions (rope_pair, as rope_neox_kernel), then stored as kv_write_kernel stores
 * (a warp per 32 values: q8_0 blocks). Slots must be distinct (blocks would race on a row). */
template <int KV>
__global__ void kv_rotate_kernel(uint8_t * storage, int64_t row_bytes, const int32_t * __restrict__ slots, int64_t count, int heads, int head_dim,
                                 int32_t delta, float theta_scale, rope_scaling scaling) {
    memra_grid_dependencies();
    MEMRA_DYNAMIC_SHARED(float, values);
    const int64_t width = (int64_t)heads * head_dim;
    const int half = head_dim / 2;
    const int lane = threadIdx.x & 31;
    for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
        uint8_t * row = storage + (int64_t)slots[i] * row_bytes;
        for (int64_t d = threadIdx.x; d < width; d += blockDim.x) values[d] = kv_value<KV>(row, d);
        __syncthreads();
        for (int64_t p = threadIdx.x; p < (int64_t)heads * half; p += blockDim.x) rope_pair(values + (p / half) * head_dim, p % half, half, delta, theta_scale, scaling);
        __syncthreads();
        for (int64_t chunk = threadIdx.x >> 5; chunk * 32 < width; chunk += blockDim.x >> 5) {
            const int64_t d = chunk * 32 + lane;
            store_kv_chunk<KV>(row, chunk, lane, width, d < width ? values[d] : 0.0f);
        }
        __syncthreads();
    }
}

/* QK-norm, RoPE and the K/V write of a layer in one launch: one warp per (row, head) of q (heads),
 * of k (kv_heads: norm_rope_head, then its values into `keys` at the row's slot) and of v
 * (kv_heads: into `values`), the stores exactly as kv_write_kernel's. head_dim a multiple of 32
 * for a q8_0 cache (a head is whole blocks). */
template <int KV>
__global__ void qk_norm_rope_kv_kernel(float * q, float * k, const float * __restrict__ v, const float * __restrict__ q_weight,
                                       const float * __restrict__ k_weight, const int32_t * __restrict__ positions, const int32_t * __restrict__ slots,
                                       uint8_t * keys, uint8_t * values, int64_t row_bytes, int64_t rows, int heads, int kv_heads, int head_dim, float eps,
                                       float theta_scale, rope_scaling scaling) {
    memra_grid_dependencies();
    const int lane = threadIdx.x & 31;
    const int warps = blockDim.x / 32;
    const int per_row = heads + 2 * kv_heads;
    const int64_t width = (int64_t)kv_heads * head_dim;
    const int64_t head_rows = rows * per_row;
    for (int64_t hr = blockIdx.x * (int64_t)warps + threadIdx.x / 32; hr < head_rows; hr += (int64_t)gridDim.x * warps) {
        const int64_t row = hr / per_row;
        const int h = (int)(hr % per_row);
        if (h < heads) {
            norm_rope_head(q + (row * heads + h) * head_dim, q_weight, positions[row], lane, head_dim, eps, theta_scale, scaling);
            continue;
        }
        const bool key = h < heads + kv_heads;
        const int kv_head = key ? h - heads : h - heads - kv_heads;
        const float * source = (key ? k : v) + row * width + (int64_t)kv_head * head_dim;
        if (key) norm_rope_head(k + row * width + (int64_t)kv_head * head_dim, k_weight, positions[row], lane, head_dim, eps, theta_scale, scaling);
        uint8_t * target = (key ? keys : values) + (int64_t)slots[row] * row_bytes;
        const int64_t first_chunk = (int64_t)kv_head * head_dim / 32;
        for (int c = 0; c * 32 < head_dim; c++) {
            const int i = c * 32 + lane;
            const float value = i < head_dim ? source[i] : 0.0f;
            if constexpr (KV == MEMRA_CUDA_TYPE_Q8_0) {
                store_kv_chunk<KV>(target, first_chunk + c, lane, width, value);
            } else if (i < head_dim) {
                /* f32/f16: value by value (a head need not start a 32-value chunk), as store_kv_chunk converts */
                const int64_t d = (int64_t)kv_head * head_dim + i;
                if constexpr (KV == MEMRA_CUDA_TYPE_F32) reinterpret_cast<float *>(target)[d] = value;
                else reinterpret_cast<__half *>(target)[d] = __float2half_rn(value);
            }
        }
        __syncwarp();
    }
}

/* The O projection's input rounded (memra_cuda_attention_matmul) by the block that wrote head
 * `pair` of out: its warps round the head's q8_0 blocks (head_dim a multiple of 32: a block never
 * spans two heads) into codes and scales with round_block, the body of round_activations_kernel:
 * bit for bit the rounding the matmul would do, without its launch. No barrier: the block's thread
 * t wrote the values d ≡ t (mod blockDim), and warp w takes blocks b ≡ w (mod warps), so lane l
 * reads d = 32b + l ≡ 32w + l = t: each thread rounds values it wrote itself. */
__device__ __forceinline__ void round_head(float * out, int64_t pair, int head_dim, int8_t * __restrict__ codes, float * __restrict__ scales, float mine) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int64_t first = pair * head_dim / 32;
    if (head_dim == (int)blockDim.x) {
        /* one value a thread (head_dim 128, Qwen3's): warp w's lanes hold block w, rounded from
         * `mine`, the value the thread has just stored (no read back through L2) */
        round_q8_0_codes(first + warp, lane, mine, codes, scales);
        return;
    }
    /* The trip count depends on the warp only: every lane takes part in each shuffle. */
    for (int b = warp; b < head_dim / 32; b += warps) round_block<MEMRA_CUDA_ROUND_Q8_0, true>(first + b, lane, nullptr, nullptr, out, codes, scales, nullptr);
}

/* out[pair] from the splits' partial states (read through L2: written by other blocks of the same
 * launch), then its rounding where codes is not null. `out` is not __restrict__: read back.
 * The loads are issued together: lane s of warp 0 reads split s's max and sum (the max over the
 * splits by shuffles; fmaxf is exact in any order), and each thread all the splits' values of its
 * dims before it adds them. The sums are the sequential ones, split 0 first, with the same terms
 * (a split that saw no key, max −∞, adds nothing), so the result does not depend on the loads'
 * order. Before, each of the three passes over the splits waited for its loads one after another:
 * about 7 µs of a 14 µs decode step on the H200. */
__device__ __forceinline__ void combine_head(float * out, const float * partials, int64_t pair, int head_dim, int splits, int8_t * __restrict__ codes,
                                             float * __restrict__ scales) {
    constexpr int MAX = MEMRA_CUDA_ATTENTION_MAX_SPLITS;
    static_assert(MAX <= 32, "one lane per split");
    __shared__ float factor[MAX];
    __shared__ int seen[MAX];
    __shared__ float shared_inverse;
    const float * p = partials + pair * splits * (int64_t)(head_dim + 2);
    const int64_t size = head_dim + 2;
    if (threadIdx.x < 32) {
        const int s = threadIdx.x;
        const float ms = s < splits ? __ldcg(p + s * size) : -INFINITY;
        const float ls = s < splits ? __ldcg(p + s * size + 1) : 0.0f;
        float m = ms;
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
        const float f = ms == -INFINITY ? 0.0f : expf(ms - m);
        /* split s's term of the sum, as the sequential pass adds it */
        const float term = ms == -INFINITY ? 0.0f : f * ls;
        if (s < MAX) {
            factor[s] = f;
            seen[s] = ms != -INFINITY;
        }
        /* l: the terms added in split order (lane 0 gathers them) */
        float l = 0.0f;
        for (int t = 0; t < splits; t++) l += __shfl_sync(0xffffffffu, term, t);
        if (s == 0) shared_inverse = 1.0f / l;
    }
    __syncthreads();
    const float inverse = shared_inverse;
    float mine = 0.0f; /* the last value this thread stores: its only one where head_dim is blockDim.x */
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float values[MAX];
#pragma unroll
        for (int s = 0; s < MAX; s++) values[s] = s < splits ? __ldcg(p + s * size + 2 + d) : 0.0f;
        float sum = 0.0f;
#pragma unroll
        for (int s = 0; s < MAX; s++) {
            if (s < splits && seen[s]) sum += factor[s] * values[s];
        }
        mine = sum * inverse;
        out[pair * head_dim + d] = mine;
    }
    if (codes) round_head(out, pair, head_dim, codes, scales, mine);
}

/* One warp's online softmax state over the keys it has seen: running max m, sum l, and the
 * weighted sum of values acc (lane l holds dims l + 32c). */
template <int CHUNKS>
struct softmax_state {
    float m, l, acc[CHUNKS];
};

/* What paged_attention_kernel<KV, CHUNKS, true> needs to do Qwen3's QK-norm and RoPE and this step's
 * K/V write itself (memra_cuda_qk_norm_rope_attention_matmul, decode: one query row per sequence):
 * the projections before QK-norm and RoPE, the norms' weights, each row's position and cache slot,
 * and the cache to write. */
struct fused_qk_kv {
    const float * k;        /* [rows, kv_heads · head_dim] */
    const float * v;        /* [rows, kv_heads · head_dim] */
    const float * q_weight; /* [head_dim] */
    const float * k_weight; /* [head_dim] */
    const int32_t * positions;
    const int32_t * slots;
    uint8_t * keys;
    uint8_t * values;
    float eps, theta_scale;
    rope_scaling scaling;
};

/* norm_rope_head on a head held by a warp's registers (lane l: dims l + 32c), head_dim = 32 · CHUNKS
 * with CHUNKS even, so that a RoPE pair (i, i + head_dim / 2) is in one lane: the same operations in
 * the same order, so bit for bit its values (the sum of squares over c then the shuffles, each
 * pair's angle the position times theta_scale pair times in f32). */
template <int CHUNKS>
__device__ __forceinline__ void norm_rope_lanes(float x[CHUNKS], const float * __restrict__ w, int32_t position, int lane, int head_dim, float eps,
                                                float theta_scale, rope_scaling scaling) {
    static_assert(CHUNKS % 2 == 0, "RoPE pairs in one lane");
    double sum = 0.0;
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) sum += (double)x[c] * (double)x[c];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float mean = (float)(sum / (double)head_dim);
    const float scale = 1.0f / sqrtf(mean + eps);
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) x[c] = __fmul_rn(__fmul_rn(x[c], scale), __ldg(w + c * 32 + lane));
    constexpr int HALF = CHUNKS / 2;
    float theta = (float)position;
    for (int n = 0; n < lane; n++) theta = __fmul_rn(theta, theta_scale);
#pragma unroll
    for (int c = 0; c < HALF; c++) { /* pair lane + 32c: its angle continues the chain of pair lane + 32(c − 1) */
        if (c > 0)
            for (int n = 0; n < 32; n++) theta = __fmul_rn(theta, theta_scale);
        const float angle = scaled_rope_angle(scaling, lane + 32 * c, theta); /* the chain itself stays unscaled */
        const float cosine = __fmul_rn(cosf(angle), scaling.magnitude), sine = __fmul_rn(sinf(angle), scaling.magnitude);
        const float x0 = x[c], x1 = x[c + HALF];
        x[c] = __fsub_rn(__fmul_rn(x0, cosine), __fmul_rn(x1, sine));
        x[c + HALF] = __fadd_rn(__fmul_rn(x0, sine), __fmul_rn(x1, cosine));
    }
}

/* A value as a KV cache of type KV gives it back (kv_value of what store_kv_chunk stores), for the
 * 32 values of a q8_0 block across the warp's lanes: the whole warp calls it. */
template <int KV>
__device__ __forceinline__ float kv_stored_value(float value) {
    if constexpr (KV == MEMRA_CUDA_TYPE_F32) {
        return value;
    } else if constexpr (KV == MEMRA_CUDA_TYPE_F16) {
        return __half2float(__float2half_rn(value));
    } else {
        float scale;
        const int8_t code = kv_q8_0_code(value, scale);
        return __half2float(__float2half_rn(scale)) * small_int_to_float(code);
    }
}

/* FUSED (memra_cuda_qk_norm_rope_attention_matmul; head_dim = 32 · CHUNKS, CHUNKS even; one query
 * row per sequence): q is the Q projection before QK-norm and RoPE, which each warp applies to its
 * head in registers (norm_rope_lanes); the row's last position (this step's token, not yet in the
 * cache) is left out of the loop over the cache and added last by the warp whose group holds it,
 * from the K (normed and rotated) and V projections rounded as the cache stores them: the same
 * online-softmax steps in the same order as when qk_norm_rope_kv_kernel has written them first.
 * That warp, in the block of the first query head of the KV head's group, also writes them into the
 * cache at the row's slot (for the next steps; nothing in this launch reads them there). */
/* Head_dim 96 or 128 (CHUNKS 3, 4): at most 64 registers, 8 blocks an SM. At 71 (ptxas, CUDA 13.0,
 * sm_90) 7 fitted, 924 on an H200: a decode step of the 8B shape (32 heads × 32 splits) launches
 * 1,024 blocks, a wave and 100 blocks; capped, ptxas spills nothing (the fused kernel's 32-byte
 * stack frame is the one it had). Other head sizes get no minimum (0), as before: smaller ones are
 * under 64 already (48-56; with a minimum of 8 ptxas spilled them, with 1 it gave them 78). */
template <int KV, int CHUNKS, bool FUSED>
__global__ void __launch_bounds__(MEMRA_CUDA_ATTENTION_WARPS * 32, CHUNKS == 3 || CHUNKS == 4 ? 8 : 0)
    paged_attention_kernel(float * out, float * __restrict__ partials, const float * __restrict__ q, const uint8_t * __restrict__ keys,
                           const uint8_t * __restrict__ values, int64_t row_bytes, int block_tokens, const int32_t * __restrict__ block_tables,
                           const int32_t * __restrict__ sequences, int sequence_count, int heads, int kv_heads, int head_dim, float scale, int splits,
                           int * __restrict__ counters, int8_t * __restrict__ codes, float * __restrict__ scales, fused_qk_kv fused) {
    memra_grid_dependencies();
    constexpr int WARPS = MEMRA_CUDA_ATTENTION_WARPS, KEYS = MEMRA_CUDA_ATTENTION_KEYS;
    __shared__ float shared_m[WARPS], shared_l[WARPS], shared_acc[WARPS][CHUNKS * 32];
    const int64_t row = blockIdx.x;
    const int head = blockIdx.y;
    const int split = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int s = 0;
    while (s + 1 < sequence_count && row >= sequences[(s + 1) * 4]) s++;
    const int32_t * sequence = sequences + s * 4;
    const int64_t length = (int64_t)sequence[2] + (row - sequence[0]) + 1; /* attends to positions [0, length) */
    const int32_t * table = block_tables + sequence[3];
    const int kv_head = head / (heads / kv_heads);
    const int64_t kv_offset = (int64_t)kv_head * head_dim;
    const float * qr = q + (row * heads + head) * (int64_t)head_dim;
    /* Lanes past head_dim (head_dim not a multiple of 32) hold zeros and never load. */
    float qv[CHUNKS];
    softmax_state<CHUNKS> state;
    state.m = -INFINITY;
    state.l = 0.0f;
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        qv[c] = c * 32 + lane < head_dim ? qr[c * 32 + lane] : 0.0f;
        state.acc[c] = 0.0f;
    }
    if constexpr (FUSED) norm_rope_lanes<CHUNKS>(qv, fused.q_weight, fused.positions[row], lane, head_dim, fused.eps, fused.theta_scale, fused.scaling);
    /* positions in the cache: all of them, or FUSED all but this step's (the last) */
    const int64_t cached = FUSED ? length - 1 : length;
    /* Groups of KEYS consecutive positions, dealt round robin to the warps of every split. */
    const int64_t stride = (int64_t)splits * WARPS * KEYS;
    for (int64_t first = ((int64_t)split * WARPS + warp) * KEYS; first < cached; first += stride) {
        /* the group's keys and values loaded together: the values are in flight with the keys,
         * not loaded one key at a time after each key's softmax step (their addresses are known) */
        float dot[KEYS], vv[KEYS][CHUNKS];
#pragma unroll
        for (int j = 0; j < KEYS; j++) {
            const int64_t p = first + j < cached ? first + j : first; /* past the end: a repeat, unused */
            const int64_t slot = (int64_t)table[p / block_tokens] * block_tokens + p % block_tokens;
            const uint8_t * k = keys + slot * row_bytes;
            const uint8_t * v = values + slot * row_bytes;
            dot[j] = 0.0f;
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
                const bool inside = c * 32 + lane < head_dim;
                vv[j][c] = inside ? kv_value<KV>(v, kv_offset + c * 32 + lane) : 0.0f;
                if (inside) dot[j] += qv[c] * kv_value<KV>(k, kv_offset + c * 32 + lane);
            }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
            for (int j = 0; j < KEYS; j++) dot[j] += __shfl_xor_sync(0xffffffffu, dot[j], offset);
        }
#pragma unroll
        for (int j = 0; j < KEYS; j++) {
            if (first + j >= cached) break;
            const float score = dot[j] * scale;
            const float next_max = fmaxf(state.m, score);
            const float correction = expf(state.m - next_max);
            const float weight = expf(score - next_max);
            state.l = state.l * correction + weight;
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
                if (c * 32 + lane < head_dim) state.acc[c] = state.acc[c] * correction + weight * vv[j][c];
            }
            state.m = next_max;
        }
    }
    if constexpr (FUSED) {
        /* This step's position: the warp whose group holds it in the loop above adds it, last. */
        const int64_t last = length - 1;
        if ((last / KEYS) % ((int64_t)splits * WARPS) == (int64_t)split * WARPS + warp) {
            const int64_t kv_width = (int64_t)kv_heads * head_dim;
            const float * kr = fused.k + row * kv_width + kv_offset;
            const float * vr = fused.v + row * kv_width + kv_offset;
            float kn[CHUNKS], vn[CHUNKS];
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
                kn[c] = kr[c * 32 + lane];
                vn[c] = vr[c * 32 + lane];
            }
            norm_rope_lanes<CHUNKS>(kn, fused.k_weight, fused.positions[row], lane, head_dim, fused.eps, fused.theta_scale, fused.scaling);
            if (head % (heads / kv_heads) == 0) {
                /* the KV head's first query head writes them, as qk_norm_rope_kv_kernel would */
                const int64_t slot = fused.slots[row];
#pragma unroll
                for (int c = 0; c < CHUNKS; c++) {
                    store_kv_chunk<KV>(fused.keys + slot * row_bytes, kv_offset / 32 + c, lane, kv_width, kn[c]);
                    store_kv_chunk<KV>(fused.values + slot * row_bytes, kv_offset / 32 + c, lane, kv_width, vn[c]);
                }
            }
            float dot = 0.0f;
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
                kn[c] = kv_stored_value<KV>(kn[c]);
                vn[c] = kv_stored_value<KV>(vn[c]);
                dot += qv[c] * kn[c];
            }
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
            const float score = dot * scale;
            const float next_max = fmaxf(state.m, score);
            const float correction = expf(state.m - next_max);
            const float weight = expf(score - next_max);
            state.l = state.l * correction + weight;
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) state.acc[c] = state.acc[c] * correction + weight * vn[c];
            state.m = next_max;
        }
    }
    /* The block's warps combined: weights exp(m_w − M) (0 for a warp that saw no key). */
    if (lane == 0) {
        shared_m[warp] = state.m;
        shared_l[warp] = state.l;
    }
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) shared_acc[warp][c * 32 + lane] = state.acc[c];
    __syncthreads();
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; w++) m = fmaxf(m, shared_m[w]);
    float factor[WARPS], l = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; w++) {
        factor[w] = shared_m[w] == -INFINITY ? 0.0f : expf(shared_m[w] - m);
        l += factor[w] * shared_l[w];
    }
    const int64_t pair = row * heads + head;
    if (splits == 1) {
        const float inverse = 1.0f / l;
        float * o = out + pair * (int64_t)head_dim;
        float mine = 0.0f; /* as in combine_head */
        for (int d = threadIdx.x; d < head_dim; d += WARPS * 32) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) sum += factor[w] * shared_acc[w][d];
            mine = sum * inverse;
            o[d] = mine;
        }
        if (codes) round_head(out, pair, head_dim, codes, scales, mine);
        return;
    }
    /* Several splits: this one's (m, l, acc[head_dim]) for the combine. */
    float * partial = partials + (pair * splits + split) * (int64_t)(head_dim + 2);
    if (threadIdx.x == 0) {
        partial[0] = m;
        partial[1] = l;
    }
    for (int d = threadIdx.x; d < head_dim; d += WARPS * 32) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) sum += factor[w] * shared_acc[w][d];
        partial[2 + d] = sum;
    }
    /* The last split of the pair to finish merges them (its partial reads bypass L1, which may hold
     * stale lines of this workspace): every thread's writes made visible device-wide before the
     * block takes its ticket; the last one resets the pair's counter for the next launch. */
    __shared__ int ticket;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) ticket = atomicAdd(&counters[pair], 1);
    __syncthreads();
    if (ticket != splits - 1) return;
    if (threadIdx.x == 0) counters[pair] = 0;
    combine_head(out, partials, pair, head_dim, splits, codes, scales);
}

__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    uint32_t word;
    memcpy(&word, &h, 4);
    return word;
}

__device__ __forceinline__ uint32_t halves_pair(const __half * low, const __half * high) {
    unsigned short a, b;
    memcpy(&a, low, 2);
    memcpy(&b, high, 2);
    return (uint32_t)a | ((uint32_t)b << 16);
}

/* flash_attention_kernel<D>: prefill attention over an f16 paged KV cache, head_dim D (64 or 128).
 * Block (tile, head): tile = (sequence, first query row, rows ≤ 64) from `tiles`; warp w takes
 * rows first + 16w .. + 16, its Q as m16n8k16 A fragments in registers (rounded to f16, as
 * llama.cpp's CPU matmul rounds Q against an f16 cache). Per 32 KV positions: K and V rows are
 * gathered through the block table into shared memory; S = Q·Kᵀ (tensor cores, f32), scaled and
 * masked causally per row; an online softmax (running max and sum per row, f32) rescales the
 * output; P, rounded to f16, becomes the A fragments of O += P·V (the C fragments of two adjacent
 * 8-column S tiles are the A fragment of one 16-wide k-step). Lane (group, quad) holds rows
 * group and group + 8 of its warp's 16. */
template <int D>
__global__ void __launch_bounds__(MEMRA_CUDA_FLASH_THREADS) flash_attention_kernel(float * __restrict__ out, const float * __restrict__ q,
                                                                                   const uint8_t * __restrict__ keys, const uint8_t * __restrict__ values,
                                                                                   int64_t row_bytes, int block_tokens, const int32_t * __restrict__ block_tables,
                                                                                   const int32_t * __restrict__ sequences, const int32_t * __restrict__ tiles,
                                                                                   int heads, int kv_heads, float scale) {
    memra_grid_dependencies();
    constexpr int KV = MEMRA_CUDA_FLASH_KV, STRIDE = D + 8; /* rows padded by 16 bytes */
    __shared__ __align__(16) __half k_tile[KV * STRIDE];
    __shared__ __align__(16) __half v_tile[KV * STRIDE];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int group = lane >> 2, quad = lane & 3;
    const int32_t * tile = tiles + blockIdx.x * 3;
    const int32_t * sequence = sequences + tile[0] * 4;
    const int first = tile[1], count = tile[2];
    const int head = blockIdx.y, kv_head = head / (heads / kv_heads);
    const int32_t * table = block_tables + sequence[3];
    /* Query row r (of the call) attends to cache positions [0, sequence[2] + r - sequence[0]]. */
    const int row0 = first + warp * 16 + group, row1 = row0 + 8;
    const bool valid0 = row0 < first + count, valid1 = row1 < first + count;
    const int64_t last0 = (int64_t)sequence[2] + (row0 - sequence[0]), last1 = last0 + 8;
    const int64_t tile_last = (int64_t)sequence[2] + (first + count - 1 - sequence[0]);
    const int64_t q_stride = (int64_t)heads * D;

    uint32_t qa[D / 16][4];
#pragma unroll
    for (int kc = 0; kc < D / 16; kc++) {
        const int c = kc * 16 + quad * 2;
        const float * q0 = q + row0 * q_stride + (int64_t)head * D;
        const float * q1 = q + row1 * q_stride + (int64_t)head * D;
        qa[kc][0] = valid0 ? pack_half2(q0[c], q0[c + 1]) : 0u;
        qa[kc][1] = valid1 ? pack_half2(q1[c], q1[c + 1]) : 0u;
        qa[kc][2] = valid0 ? pack_half2(q0[c + 8], q0[c + 9]) : 0u;
        qa[kc][3] = valid1 ? pack_half2(q1[c + 8], q1[c + 9]) : 0u;
    }
    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[n][e] = 0.0f;
    float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f}; /* per lane: its columns only */

    for (int64_t p0 = 0; p0 <= tile_last; p0 += KV) {
        __syncthreads(); /* the previous tile's readers are done */
        constexpr int CHUNKS = KV * D / 8; /* 16-byte pieces of one tile */
        for (int i = tid; i < CHUNKS; i += MEMRA_CUDA_FLASH_THREADS) {
            const int position = i / (D / 8), piece = i % (D / 8);
            const int64_t p = p0 + position;
            uint4 kv_k = make_uint4(0, 0, 0, 0), kv_v = make_uint4(0, 0, 0, 0);
            if (p <= tile_last) {
                const int64_t slot = (int64_t)table[p / block_tokens] * block_tokens + p % block_tokens;
                const int64_t offset = slot * row_bytes + (int64_t)kv_head * D * 2 + piece * 16;
                kv_k = *reinterpret_cast<const uint4 *>(keys + offset);
                kv_v = *reinterpret_cast<const uint4 *>(values + offset);
            }
            *reinterpret_cast<uint4 *>(&k_tile[position * STRIDE + piece * 8]) = kv_k;
            *reinterpret_cast<uint4 *>(&v_tile[position * STRIDE + piece * 8]) = kv_v;
        }
        __syncthreads();

        float s[KV / 8][4];
#pragma unroll
        for (int ni = 0; ni < KV / 8; ni++) {
#pragma unroll
            for (int e = 0; e < 4; e++) s[ni][e] = 0.0f;
#pragma unroll
            for (int kc = 0; kc < D / 16; kc++) {
                const __half * base = k_tile + (ni * 8 + group) * STRIDE + kc * 16 + quad * 2;
                uint32_t b[2];
                memcpy(&b[0], base, 4);
                memcpy(&b[1], base + 8, 4);
                mma_m16n8k16(s[ni], qa[kc], b);
            }
        }
        /* Scale, mask, and the rows' new maxima (over the 4 lanes of the quad that hold a row). */
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int ni = 0; ni < KV / 8; ni++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int half = e >> 1;
                const int64_t p = p0 + ni * 8 + quad * 2 + (e & 1);
                const bool visible = half ? (valid1 && p <= last1) : (valid0 && p <= last0);
                s[ni][e] = visible ? s[ni][e] * scale : -INFINITY;
                tile_max[half] = fmaxf(tile_max[half], s[ni][e]);
            }
        }
        float correction[2];
#pragma unroll
        for (int half = 0; half < 2; half++) {
            tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 1));
            tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 2));
            const float next = fmaxf(running_max[half], tile_max[half]);
            /* A row with nothing visible yet keeps max −∞: no correction, no weights. */
            correction[half] = next == -INFINITY ? 1.0f : expf(running_max[half] - next);
            running_max[half] = next;
            running_sum[half] *= correction[half];
        }
#pragma unroll
        for (int ni = 0; ni < KV / 8; ni++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int half = e >> 1;
                const float weight = s[ni][e] == -INFINITY ? 0.0f : expf(s[ni][e] - running_max[half]);
                s[ni][e] = weight;
                running_sum[half] += weight;
            }
        }
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[n][0] *= correction[0];
            o[n][1] *= correction[0];
            o[n][2] *= correction[1];
            o[n][3] *= correction[1];
        }
        /* O += P · V, P in f16: k-step j covers positions 16j .. 16j + 15 = S tiles 2j and 2j + 1. */
#pragma unroll
        for (int j = 0; j < KV / 16; j++) {
            const uint32_t pa[4] = {pack_half2(s[2 * j][0], s[2 * j][1]), pack_half2(s[2 * j][2], s[2 * j][3]), pack_half2(s[2 * j + 1][0], s[2 * j + 1][1]),
                                    pack_half2(s[2 * j + 1][2], s[2 * j + 1][3])};
            const int k = j * 16 + quad * 2;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                const int column = n * 8 + group;
                const uint32_t b[2] = {halves_pair(&v_tile[k * STRIDE + column], &v_tile[(k + 1) * STRIDE + column]),
                                       halves_pair(&v_tile[(k + 8) * STRIDE + column], &v_tile[(k + 9) * STRIDE + column])};
                mma_m16n8k16(o[n], pa, b);
            }
        }
    }
    float total[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        total[half] = running_sum[half];
        total[half] += __shfl_xor_sync(0xffffffffu, total[half], 1);
        total[half] += __shfl_xor_sync(0xffffffffu, total[half], 2);
    }
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
        const int column = n * 8 + quad * 2;
        if (valid0) {
            float * o0 = out + row0 * q_stride + (int64_t)head * D + column;
            o0[0] = o[n][0] / total[0];
            o0[1] = o[n][1] / total[0];
        }
        if (valid1) {
            float * o1 = out + row1 * q_stride + (int64_t)head * D + column;
            o1[0] = o[n][2] / total[1];
            o1[1] = o[n][3] / total[1];
        }
    }
}

}  // namespace memra_cuda_kernels
