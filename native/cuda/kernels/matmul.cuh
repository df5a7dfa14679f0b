/*
 * matmul.cuh — out[r, o] = Σ_i x[r, i] · W[o, i] for ggml weights.
 *
 * matrix_vector_kernel<TYPE, ROWS, SPLIT>: decode and small batches. One warp per output feature
 * (SPLIT: 2 or 4 warps of a block per feature where a launch has few features, each taking every
 * second or fourth iteration of the row, their totals added in shared memory; see
 * memra_cuda_plan_mmv_split); lane l reads 8-value groups l, l + 32, ... of the weight row
 * (adjacent lanes read adjacent bytes, so a warp streams the row coalesced), dequantizes them in
 * registers and multiplies them with up to ROWS activation rows in f32; a warp shuffle sums the
 * lanes. The q8_0 and __dp4a kernels below split alike; the q8_0 one can also round SwiGLU for the
 * down projection in its last blocks (swiglu_epilogue), or add its output to the residual stream
 * and apply the next RMSNorm in its last block (norm_tail).
 *
 * gemm_kernel<TYPE>: prefill. A 64 × 64 output tile per block of 4 warps (2 × 2, each 32 × 32 =
 * 2 × 4 mma.sync.m16n8k16 tiles, f16 inputs, f32 accumulators). Per 32-wide step of the inner
 * dimension, the activation tile (f32 → f16) and the weight tile (dequantized → f16) go to shared
 * memory, rows padded by 16 bytes so that the fragment loads of a warp hit 32 distinct banks.
 * Correctness first: no cp.async pipelining, no ldmatrix yet.
 *
 * gemm_codes_kernel<TYPE>: prefill of quantized weights on the activations' q8 codes (the f16
 * tiles above holding integer codes; exact products, scaled per 16-value chunk). Every quantized
 * type but q8_0/q4_0/q5_0, and those too with MEMRA_CUDA_INT8_GEMM=0.
 *
 * gemm_int8_kernel<TYPE>: prefill of q8_0, q4_0 and q5_0 weights on int8 tensor cores
 * (mma.sync m16n8k32 s8, one 32-value block per k-step, the block scales applied in registers),
 * 128 × 128 tiles of 8 warps, two shared-memory stages. Checked on the CPU emulator and on an H200
 * (cuda-int8-gemm.test.ts and the golden suite; 110-140 TFLOP/s there at 512 rows of an 8B shape).
 */
#pragma once

#include "mma.cuh"
#include "quant.cuh"
#include "rms-norm.cuh"

namespace memra_cuda_kernels {

/* Sums each row's per-lane partial sums over the warp: afterwards sum[0] holds the total of the row
 * returned, in every lane (which lanes hold which row: below). */
template <int ROWS>
__device__ __forceinline__ int reduce_rows(float sum[ROWS], int lane) {
    /* Transposing reduction: at each of the first log2(ROWS) steps a lane keeps half of its rows
     * (the upper half when the step's lane bit is set) and adds its partner's copy of them, so
     * the shuffles number ROWS - 1 + 5 - log2(ROWS) instead of 5 · ROWS. Afterwards every lane
     * holds the total of row ((lane >> 4) & 1) · 4 + ((lane >> 3) & 1) · 2 + ((lane >> 2) & 1)
     * (the bits of the split steps), the same in the 4 lanes of a quad. */
    int count = ROWS, row = 0;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        if (count > 1) {
            const int half = count / 2;
            const bool upper = (lane & offset) != 0;
#pragma unroll
            for (int i = 0; i < ROWS / 2; i++) {
                if (i < half) {
                    const float send = upper ? sum[i] : sum[i + half];
                    const float keep = upper ? sum[i + half] : sum[i];
                    sum[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
                }
            }
            row += upper ? half : 0;
            count = half;
        } else {
            sum[0] += __shfl_xor_sync(0xffffffffu, sum[0], offset);
        }
    }
    return row;
}

/* One lane per row of reduce_rows<ROWS>'s result: the one that stores it. */
template <int ROWS>
__device__ __forceinline__ bool row_writer(int lane) {
    return ROWS >= 8 ? (lane & 3) == 0 : ROWS == 4 ? (lane & 7) == 0 : ROWS == 2 ? (lane & 15) == 0 : lane == 0;
}

/* Sums each row's per-lane partial sums over the warp and stores row r's total at out[r, o]. */
template <int ROWS>
__device__ __forceinline__ void reduce_rows_and_store(float sum[ROWS], int lane, int rows, float * __restrict__ out, int64_t n_out, int64_t o) {
    const int row = reduce_rows<ROWS>(sum, lane);
    if (row_writer<ROWS>(lane) && row < rows) out[row * n_out + o] = sum[0];
}

/* SwiGLU's silu(g) · u exactly as swiglu_kernel computes it. */
__device__ __forceinline__ float swiglu_value(float g, float u) { return __fmul_rn(g / (1.0f + expf(-g)), u); }

/* The code of `value` in a q8_0 block whose largest magnitude is `max`: the block's scale d = max /
 * 127 and its f16 value d16, and the code, as ggml's quantize_row_q8_0. */
__device__ __forceinline__ float q8_0_code(float value, float max, float & d, float & d16) {
    d = max / 127.0f;
    d16 = __half2float(__float2half_rn(d));
    const float inverse = max != 0.0f ? 127.0f / max : 0.0f;
    return rintf(__fmul_rn(value, inverse));
}
/* q8_0 rounding of a 32-value block held one value per lane (every lane taking part): q8_0_code
 * of the lane's value, the block's max found by shuffles. */
__device__ __forceinline__ float round_q8_0_lane(float value, float & d, float & d16) {
    float max = fabsf(value);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
    return q8_0_code(value, max, d, d16);
}

/* Lane's value of q8_0 block b rounded into codes and the block's f16 scale (lane 0), every lane
 * taking part: round_block's q8_0 codes. */
__device__ __forceinline__ void round_q8_0_codes(int64_t b, int lane, float value, int8_t * __restrict__ codes, float * __restrict__ scales) {
    float d, d16;
    const float q = round_q8_0_lane(value, d, d16);
    codes[b * 32 + lane] = (int8_t)q;
    if (lane == 0) scales[b] = d16;
}

/* Up to MEMRA_CUDA_MMV_SEGMENTS weight matrices of one type multiplied by the same activations in
 * one launch (Q, K and V; gate and up): segment i's blocks start at first_block[i]. */
struct matrix_segments {
    float * out[MEMRA_CUDA_MMV_SEGMENTS];
    const uint8_t * weight[MEMRA_CUDA_MMV_SEGMENTS];
    int64_t n_out[MEMRA_CUDA_MMV_SEGMENTS];
    int64_t first_block[MEMRA_CUDA_MMV_SEGMENTS];
    int count;
};

/* This block's matrix and output feature (o ≥ n_out: past the matrix's last feature). */
struct segment_row {
    float * out;
    const uint8_t * weight;
    int64_t n_out, o;
};
/* split_shift: log2 of the warps per output feature (matrix_vector_q8_0_kernel's split; 0 for the
 * other kernels), so that a block covers MEMRA_CUDA_MMV_WARPS >> split_shift features. */
__device__ __forceinline__ segment_row segment_of(const matrix_segments & segments, int split_shift = 0) {
    /* Only compile-time indices into the parameter's arrays: a run-time index would copy the whole
     * struct to local memory (a 104-byte stack frame per thread, by ptxas's report). */
    segment_row row;
    row.out = segments.out[0];
    row.weight = segments.weight[0];
    row.n_out = segments.n_out[0];
    int64_t first = 0;
#pragma unroll
    for (int k = 1; k < MEMRA_CUDA_MMV_SEGMENTS; k++) {
        if (k < segments.count && (int64_t)blockIdx.x >= segments.first_block[k]) {
            row.out = segments.out[k];
            row.weight = segments.weight[k];
            row.n_out = segments.n_out[k];
            first = segments.first_block[k];
        }
    }
    row.o = ((int64_t)blockIdx.x - first) * (MEMRA_CUDA_MMV_WARPS >> split_shift) + ((threadIdx.x >> 5) >> split_shift);
    return row;
}

/* The end of a decode kernel whose features are split over 1 << split_shift warps (split_shift > 0;
 * every warp of the block calls it): each warp's totals (reduce_rows) go to shared memory, then the
 * warps of a feature are added in warp order, part 0 first, by one thread per (feature, row) of the
 * block. o: the calling warp's feature. */
template <int ROWS>
__device__ __forceinline__ void store_split_rows(float sum[ROWS], int lane, int rows, float * __restrict__ out, int64_t n_out, int64_t o, int split_shift) {
    __shared__ float partials[MEMRA_CUDA_MMV_WARPS][ROWS];
    const int warp = threadIdx.x >> 5;
    const int row = reduce_rows<ROWS>(sum, lane);
    if (row_writer<ROWS>(lane) && row < rows) partials[warp][row] = sum[0];
    __syncthreads();
    const int feature = threadIdx.x / ROWS, r = threadIdx.x % ROWS;
    const int64_t feature_o = o - (warp >> split_shift) + feature; /* the block's first feature + feature */
    if (feature < (MEMRA_CUDA_MMV_WARPS >> split_shift) && r < rows && feature_o < n_out) {
        float total = partials[feature << split_shift][r];
        for (int p = 1; p < (1 << split_shift); p++) total += partials[(feature << split_shift) + p][r];
        out[r * n_out + feature_o] = total;
    }
}

/* sum[r] += group g's 8 weights v · row r's 8 activations, for the rows < rows. */
template <int ROWS>
__device__ __forceinline__ void add_group_products(float sum[ROWS], const float v[8], const float * __restrict__ x, int64_t n_in, int64_t g, int rows) {
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        if (r < rows) {
            const float4 * xr = reinterpret_cast<const float4 *>(x + r * n_in + g * 8);
            const float4 a = __ldg(xr), b = __ldg(xr + 1);
            sum[r] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
        }
    }
}

/* early_weights (as matrix_vector_q8_0_kernel's): the lane's first UNROLL groups are loaded and
 * dequantized before memra_grid_dependencies() (for an f16 row of 1,024 inputs, the whole row) and
 * summed first, in the order the loop would. */
template <int TYPE, int ROWS, bool SPLIT>
__global__ void __launch_bounds__(MEMRA_CUDA_MMV_WARPS * 32) matrix_vector_kernel(matrix_segments segments, const float * __restrict__ x,
                                                                                  int64_t row_bytes, int rows, int64_t n_in, int early_weights, int shift) {
    if (!early_weights) memra_grid_dependencies();
    const int lane = threadIdx.x & 31;
    const int split_shift = SPLIT ? shift : 0;
    const segment_row target = segment_of(segments, split_shift);
    const int64_t o = target.o, n_out = target.n_out;
    float * __restrict__ out = target.out;
    const bool active = o < n_out;
    const uint8_t * w = target.weight + (active ? o : 0) * row_bytes;
    const int64_t groups = n_in / 8;
    /* 4 groups' loads in flight for up to 2 rows, 2 for more (registers). An iteration: the warp's
     * 32 · UNROLL groups; split (as matrix_vector_q8_0_kernel's), warp `part` of a feature takes
     * iterations part, part + split, ... */
    constexpr int UNROLL = ROWS <= 2 ? 4 : 2;
    const int64_t start = SPLIT ? (int64_t)((threadIdx.x >> 5) & ((1 << split_shift) - 1)) * 32 * UNROLL : 0;
    float first_v[UNROLL][8];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t g = start + lane + 32 * u;
        dequantize_group<TYPE>(w, g < groups ? g : 0, first_v[u]); /* group 0's past the row's end (unused) */
    }
    if (early_weights) memra_grid_dependencies();
    if (!active && !SPLIT) return; /* a split block's warps all reach its barrier (store_split_rows) */
    float sum[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; r++) sum[r] = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t g = start + lane + 32 * u;
        if (active && g < groups) add_group_products<ROWS>(sum, first_v[u], x, n_in, g, rows);
    }
    if constexpr (!SPLIT) {
        /* Unrolled so that the loads of several groups are in flight together (one warp per output
         * row leaves few warps per SM for narrow matrices); the same sums in the same order. */
#pragma unroll 4
        for (int64_t g = lane + 32 * UNROLL; g < groups; g += 32) {
            float v[8];
            dequantize_group<TYPE>(w, g, v);
            add_group_products<ROWS>(sum, v, x, n_in, g, rows);
        }
        reduce_rows_and_store<ROWS>(sum, lane, rows, out, n_out, o);
    } else {
        const int64_t stride = ((int64_t)32 * UNROLL) << split_shift;
        for (int64_t base = active ? start + stride : groups; base < groups; base += stride) {
            float v[UNROLL][8];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int64_t g = base + lane + 32 * u;
                dequantize_group<TYPE>(w, g < groups ? g : 0, v[u]);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int64_t g = base + lane + 32 * u;
                if (g < groups) add_group_products<ROWS>(sum, v[u], x, n_in, g, rows);
            }
        }
        store_split_rows<ROWS>(sum, lane, rows, out, n_out, o, split_shift);
    }
}

/* The weights of one step of matrix_vector_q8_0_kernel: STEPS × 8 consecutive blocks from block
 * `first` of the row at w, a quarter (8 codes) of one block per lane, with its scale. */
template <int STEPS, bool X8>
struct q8_0_step {
    float d[STEPS];
    int q[STEPS][2];
    /* Block k of the step: first + 8k + lane / 4; at or past `blocks` (d and q then block 0's), none.
     * q8_0: the 8 codes as four 2-byte loads (a 34-byte block is only 2-byte aligned): 5 loads a
     * lane and step, each instruction of the warp spread over 272 bytes. q8_0_x8 (first a multiple
     * of 8: a step is one 272-byte group): one 8-byte load of codes, the warp's 256 contiguous bytes,
     * and the scale from the group's first 16 bytes. */
    __device__ __forceinline__ void load(const uint8_t * w, int64_t first, int64_t blocks, int lane, int quarter) {
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int64_t b = first + 8 * k + (lane >> 2);
            const int64_t at = b < blocks ? b : 0;
            if constexpr (X8) {
                d[k] = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short *>(q8_0_x8::scale(w, at)))));
                const int2 codes = __ldg(reinterpret_cast<const int2 *>(q8_0_x8::payload(w, at) + quarter * 8));
                q[k][0] = codes.x;
                q[k][1] = codes.y;
            } else {
                const uint8_t * block = w + at * 34;
                d[k] = half_at(block);
                const unsigned short * halves = reinterpret_cast<const unsigned short *>(block + 2 + quarter * 8);
#pragma unroll
                for (int i = 0; i < 2; i++) q[k][i] = (int)((uint32_t)__ldg(halves + 2 * i) | ((uint32_t)__ldg(halves + 2 * i + 1) << 16));
            }
        }
    }
};

/* WIDE (matrix_vector_q8_0_kernel on the q8_0_x8 layout, one warp a feature): a step is 16
 * blocks, two 272-byte groups; lane l takes half l & 1 (16 codes, one 16-byte load) of block
 * first + l / 2, so a warp's load instruction covers 512 bytes of codes and STEPS steps keep twice
 * the bytes in flight of the 8-byte loads. */
template <int STEPS>
struct q8_0_wide_step {
    float d[STEPS];
    int4 q[STEPS];
    __device__ __forceinline__ void load(const uint8_t * w, int64_t first, int64_t blocks, int lane) {
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int64_t b = first + 16 * k + (lane >> 1);
            const int64_t at = b < blocks ? b : 0;
            d[k] = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short *>(q8_0_x8::scale(w, at)))));
            q[k] = __ldg(reinterpret_cast<const int4 *>(q8_0_x8::payload(w, at) + (lane & 1) * 16));
        }
    }
};

/* matrix_vector_q8_0_kernel<ROWS, STEPS>: decode with q8_0 weights on the activations' q8_0 codes
 * (round_activations_kernel with CODES): per 32-value block, 8 __dp4a of the weight's and the
 * activation's int8 codes, then sum · (d_w · d_x) as ggml's vec_dot_q8_0_q8_0 does. The 4 lanes of
 * a quad take the 4 quarters (8 codes) of one block, so a warp reads 8 consecutive 34-byte blocks
 * (272 bytes) per step with every load instruction, STEPS steps' loads in flight together (4 by
 * default, MEMRA_CUDA_MMV_STEPS=2 the previous 2: one warp per output row leaves an 8B-shaped
 * down projection's 4096 rows at half occupancy, so the bytes in flight per warp bound the
 * bandwidth); the quarters' integer dot products are added with two shuffles (exact) and the
 * quad's first lane scales the block's sum. The blocks are summed in the same order for any STEPS.
 * Weight codes are read 16 bits at a time (a block is only 2-byte aligned), or with X8 (the
 * q8_0_x8 layout, memra_cuda_repack: a step's 8 blocks are one 272-byte group) 8 bytes at a
 * time, the warp's loads 256 contiguous bytes; the activation codes 8 bytes at a time. The sums
 * are the same for either layout.
 *
 * early_weights (1 unless MEMRA_CUDA_EARLY_WEIGHTS=0): the first step's weights are loaded before
 * memra_grid_dependencies(), so that with programmatic dependent launch they are in flight while
 * the kernel before this one finishes (a Qwen3-0.6B-shaped row of 1,024 inputs is one step: the
 * whole row). Weights are uploaded by copies the host waits for, and written by no kernel the
 * host has not waited for (memra_cuda_repack's rewrites them in place), so no earlier
 * kernel's writes can be missed; activations are read only after the wait. */
/* matrix_vector_q8_0_kernel<..., SWIGLU>'s epilogue (memra_cuda_norm_swiglu_matmul): segments 0
 * and 1 are the gate and up projections of `ffn` features each ([rows, ffn], one warp a feature);
 * the last of the 2 · 32 / MEMRA_CUDA_MMV_WARPS blocks to finish a group of 32 features (its
 * counter's ticket) rounds silu(gate) · up of the group into the down projection's q8_0 codes, as
 * round_activations_kernel with `up` would (round_q8_0_codes), and resets the counter. */
struct swiglu_epilogue {
    int8_t * codes;  /* [rows, ffn] */
    float * scales;  /* [rows, ffn / 32] */
    int * counters;  /* [ffn / 32], zeros */
    int64_t ffn;
};

/* matrix_vector_q8_0_kernel<..., MMV_NORM_TAIL>'s epilogue (memra_cuda_matmul_with_codes with a
 * memra_cuda_residual_norm: the O and down projections of a decode step): the launch is one matrix
 * of `width` features whose output is the residual stream's pending delta; the last of its blocks
 * to finish (its ticket on `counter`) adds that output to `hidden`, sets normed = RMSNorm(hidden) ·
 * weight and rounds normed into q8_0 codes for the matmuls that read it, bit for bit as
 * norm_round_kernel<MEMRA_CUDA_ROUND_Q8_0, true> (a block of `threads` threads, memra_cuda_plan_rows's
 * for the width) does in a launch of its own, and resets the counter. */
struct norm_tail {
    float * hidden;       /* [rows, width]: += the launch's output */
    float * normed;       /* [rows, width] */
    const float * weight; /* [width] */
    int8_t * codes;       /* [rows, width] */
    float * scales;       /* [rows, width / 32] */
    int * counter;        /* one, zero between launches */
    int64_t width;
    int threads;          /* 32, 128 or 256: the block size whose sums the tail reproduces */
    float eps;
};

/* The matrix-vector kernels' epilogues (template argument EPILOGUE). */
enum { MMV_PLAIN = 0, MMV_SWIGLU = 1, MMV_NORM_TAIL = 2 };

/* Every thread's stores of the block made visible device-wide, then one ticket of the block on
 * *counter: true (in every thread) in the block whose ticket is `last`, which has reset the counter
 * and whose later reads see every block's stores (through L2: __ldcg). */
__device__ __forceinline__ bool last_block_ticket(int * counter, int last) {
    __shared__ int ticket;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) ticket = atomicAdd(counter, 1);
    __syncthreads();
    if (ticket != last) return false;
    __threadfence();
    if (threadIdx.x == 0) *counter = 0;
    return true;
}

/* The q8_0 codes of CH blocks held one value a lane (every lane taking part): round_q8_0_codes for
 * each, their shuffles interleaved (independent chains) instead of one block after another. */
template <int CH>
__device__ __forceinline__ void round_q8_0_codes_chunk(const int64_t b[CH], const bool present[CH], int lane, const float value[CH],
                                                       int8_t * __restrict__ codes, float * __restrict__ scales) {
    float max[CH];
#pragma unroll
    for (int k = 0; k < CH; k++) max[k] = fabsf(value[k]);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
        for (int k = 0; k < CH; k++) max[k] = fmaxf(max[k], __shfl_xor_sync(0xffffffffu, max[k], offset));
    }
#pragma unroll
    for (int k = 0; k < CH; k++) {
        if (!present[k]) continue;
        float d, d16;
        codes[b[k] * 32 + lane] = (int8_t)q8_0_code(value[k], max[k], d, d16);
        if (lane == 0) scales[b[k]] = d16;
    }
}

/* norm_tail's work in one block of MEMRA_CUDA_MMV_WARPS warps, `delta` the launch's output: each
 * of tail.threads virtual threads (thread t plays t and t + MEMRA_CUDA_MMV_WARPS · 32) sums the
 * squares of its values in norm_row's order, each virtual warp's 32 sums are added by norm_row's
 * butterfly and the warps' totals in warp order (block_sum), so every row gets norm_row's scale
 * bit for bit; then the q8_0 blocks of the rows are rounded as round_block rounds them. A virtual
 * thread's values are loaded NORM_CHUNK at a time, and the codes are rounded from the values in
 * registers: the 32 lanes of a virtual warp hold one q8_0 block (threads and width are multiples
 * of 32). */
__device__ __forceinline__ void norm_tail_rows(const norm_tail & tail, const float * delta, int rows) {
    constexpr int REAL = MEMRA_CUDA_MMV_WARPS * 32, CH = NORM_CHUNK;
    static_assert(MEMRA_CUDA_MMV_WARPS * 2 <= 8 && REAL * 2 >= 256, "two virtual threads a thread cover norm blocks of up to 256 threads");
    __shared__ double partial[8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t width = tail.width, row_blocks = width / 32;
    const int threads = tail.threads, warps = threads / 32;
    for (int r = 0; r < rows; r++) {
        float * hr = tail.hidden + r * width;
        const float * dr = delta + r * width;
        double sum[2] = {0.0, 0.0};
#pragma unroll
        for (int j = 0; j < 2; j++) {
            /* virtual thread v (whether it exists is the same for the whole warp: threads is a multiple of 32) */
            const int v = (int)threadIdx.x + j * REAL;
            if (v >= threads) continue;
            for (int64_t base = v; base < width; base += (int64_t)CH * threads) {
                float h[CH], d[CH];
#pragma unroll
                for (int k = 0; k < CH; k++) {
                    const int64_t i = base + (int64_t)k * threads;
                    h[k] = i < width ? hr[i] : 0.0f;
                    d[k] = i < width ? __ldcg(dr + i) : 0.0f;
                }
#pragma unroll
                for (int k = 0; k < CH; k++) {
                    const int64_t i = base + (int64_t)k * threads;
                    if (i < width) {
                        const float x = h[k] + d[k];
                        hr[i] = x;
                        sum[j] = add_square(sum[j], x);
                    }
                }
            }
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            sum[j] = warp_sum(sum[j]);
            if (lane == 0 && warp + j * MEMRA_CUDA_MMV_WARPS < warps) partial[warp + j * MEMRA_CUDA_MMV_WARPS] = sum[j];
        }
        __syncthreads(); /* the partials visible to the block */
        double total = partial[0];
        if (warps > 1) {
            total = 0.0;
            for (int w = 0; w < warps; w++) total += partial[w];
        }
        __syncthreads(); /* everyone has read the partials before the next row's */
        const float scale = rms_scale(total, width, tail.eps);
        float * o = tail.normed + r * width;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int v = (int)threadIdx.x + j * REAL;
            if (v >= threads) continue;
            for (int64_t base = v; base < width; base += (int64_t)CH * threads) {
                float x[CH], weight[CH], value[CH];
                int64_t b[CH];
                bool present[CH];
#pragma unroll
                for (int k = 0; k < CH; k++) {
                    const int64_t i = base + (int64_t)k * threads;
                    present[k] = i < width; /* the same for the warp's 32 lanes: one q8_0 block */
                    x[k] = present[k] ? hr[i] : 0.0f; /* this thread's own stores above */
                    weight[k] = present[k] ? tail.weight[i] : 0.0f;
                    b[k] = r * row_blocks + i / 32;
                }
#pragma unroll
                for (int k = 0; k < CH; k++) {
                    value[k] = __fmul_rn(__fmul_rn(x[k], scale), weight[k]);
                    if (present[k]) o[base + (int64_t)k * threads] = value[k];
                }
                round_q8_0_codes_chunk<CH>(b, present, lane, value, tail.codes, tail.scales);
            }
        }
    }
}

template <int ROWS, int STEPS, bool SPLIT, int EPILOGUE = MMV_PLAIN, bool X8 = false, bool WIDE = false>
__global__ void __launch_bounds__(MEMRA_CUDA_MMV_WARPS * 32) matrix_vector_q8_0_kernel(matrix_segments segments, const int8_t * __restrict__ codes,
                                                                                       const float * __restrict__ scales, int64_t row_bytes, int rows,
                                                                                       int64_t n_in, int early_weights, int shift, swiglu_epilogue epilogue,
                                                                                       norm_tail tail) {
    if (!early_weights) memra_grid_dependencies();
    constexpr bool SWIGLU = EPILOGUE == MMV_SWIGLU;
    static_assert(!(SPLIT && SWIGLU), "the SwiGLU epilogue takes one warp a feature");
    const int split_shift = SPLIT ? shift : 0; /* SPLIT false: the one-warp kernel, without the split's registers */
    const int lane = threadIdx.x & 31, quarter = lane & 3, warp = threadIdx.x >> 5;
    const segment_row target = segment_of(segments, split_shift);
    const int64_t o = target.o, n_out = target.n_out;
    float * __restrict__ out = target.out;
    const bool active = o < n_out;
    const uint8_t * w = target.weight + (active ? o : 0) * row_bytes;
    const int64_t blocks = n_in / 32;
    /* STEPS steps of 8 blocks at a time, their weight loads issued together (more bytes in flight
     * per warp). The trip count is the warp's: every lane takes part in the quad's shuffles. With a
     * split, warp `part` of the feature's 1 << split_shift takes iterations part, part + split, ... */
    static_assert(STEPS == 2 || STEPS == 4, "2 or 4 steps in flight");
    static_assert(!WIDE || (X8 && (!SPLIT || STEPS == 2)), "the wide loads read the q8_0_x8 layout; split, a warp's iteration is 32 blocks, as the 8-byte loop's");
    const int split = SPLIT ? 1 << split_shift : 1, part = warp & (split - 1);
    const int64_t start = (int64_t)part * 8 * STEPS, stride = (int64_t)split * 8 * STEPS;
    float sum[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; r++) sum[r] = 0.0f;
    if constexpr (WIDE) {
        /* Each block's product and the order of the sums as the 8-byte loop's: block b's integer
         * dot (its two halves added by a shuffle) times d_w · d_x, added to the sum of the blocks
         * ≡ b (mod 8) in increasing b. That sum lives in lane 2 · (b mod 8) here: the lanes 16-31
         * of a step hold the blocks 8 later than lanes 0-15, whose values they pass down (xor 16)
         * to be added after them. Before the lanes' totals are added, lane 4q takes lane 2q's sum,
         * where the 8-byte loop keeps it: the same sums bit for bit (cuda-repack.test.ts compares
         * the layouts' outputs). */
        /* SPLIT (STEPS 2): an iteration is 32 blocks, the 8-byte loop's with its 4 steps, dealt to
         * the feature's warps as that loop deals them; each block's sum still lands, in increasing
         * order, where that loop adds it (the same sums bit for bit, split or not). */
        const int64_t wide_start = (int64_t)part * 16 * STEPS, wide_stride = (int64_t)split * 16 * STEPS; /* part 0 and split 1 unsplit */
        q8_0_wide_step<STEPS> wide;
        wide.load(w, wide_start < blocks ? wide_start : 0, blocks, lane);
        if (early_weights) memra_grid_dependencies();
        if (!active && !SPLIT && EPILOGUE == MMV_PLAIN) return; /* a split or epilogue block's warps all reach its barrier below */
        const int half = lane & 1;
        for (int64_t first = active ? wide_start : blocks; first < blocks; first += wide_stride) {
            if (first > wide_start) wide.load(w, first, blocks, lane);
#pragma unroll
            for (int k = 0; k < STEPS; k++) {
                if (first + 16 * k >= blocks) break;
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    if (r < rows) {
                        const int64_t b = first + 16 * k + (lane >> 1);
                        const bool present = b < blocks;
                        const int4 a = __ldg(reinterpret_cast<const int4 *>(codes + r * n_in + (present ? b : 0) * 32 + half * 16));
                        int dot = present ? __dp4a(wide.q[k].w, a.w, __dp4a(wide.q[k].z, a.z, __dp4a(wide.q[k].y, a.y, __dp4a(wide.q[k].x, a.x, 0)))) : 0;
                        dot += __shfl_xor_sync(0xffffffffu, dot, 1);
                        const float ds = __fmul_rn(wide.d[k], __ldg(scales + r * blocks + (present ? b : 0)));
                        /* block b + 8 of the lane 16 higher */
                        const int later_dot = __shfl_xor_sync(0xffffffffu, dot, 16);
                        const float later_ds = __shfl_xor_sync(0xffffffffu, ds, 16);
                        if (lane < 16 && half == 0) {
                            if (present) sum[r] += (float)dot * ds;
                            if (b + 8 < blocks) sum[r] += (float)later_dot * later_ds;
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const float moved = __shfl_sync(0xffffffffu, sum[r], (lane >> 2) * 2);
            sum[r] = quarter == 0 ? moved : 0.0f;
        }
    } else {
        q8_0_step<STEPS, X8> step;
        step.load(w, start < blocks ? start : 0, blocks, lane, quarter); /* an inactive warp loads row 0's (and uses nothing) */
        if (early_weights) memra_grid_dependencies();
        if (!active && !SPLIT && EPILOGUE == MMV_PLAIN) return; /* a split or epilogue block's warps all reach its barrier below */
        for (int64_t first = active ? start : blocks; first < blocks; first += stride) {
            if (first > start) step.load(w, first, blocks, lane, quarter);
#pragma unroll
            for (int k = 0; k < STEPS; k++) {
                /* the warp's (first is): no block of this step or a later one is in the row (a row of
                 * fewer than 8 · STEPS blocks, or the last iteration's tail), so neither its products
                 * nor its shuffles, which would only add zeros */
                if (first + 8 * k >= blocks) break;
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    if (r < rows) {
                        const int64_t b = first + 8 * k + (lane >> 2);
                        const bool present = b < blocks;
                        const int2 a = __ldg(reinterpret_cast<const int2 *>(codes + r * n_in + (present ? b : 0) * 32 + quarter * 8));
                        int dot = present ? __dp4a(step.q[k][1], a.y, __dp4a(step.q[k][0], a.x, 0)) : 0;
                        dot += __shfl_xor_sync(0xffffffffu, dot, 1);
                        dot += __shfl_xor_sync(0xffffffffu, dot, 2);
                        if (present && quarter == 0) sum[r] += (float)dot * __fmul_rn(step.d[k], __ldg(scales + r * blocks + b));
                    }
                }
            }
        }
    }
    if (!SPLIT) {
        if (active) reduce_rows_and_store<ROWS>(sum, lane, rows, out, n_out, o); /* (active is the warp's) */
        if constexpr (SWIGLU) {
            /* One ticket for the block's group (its MEMRA_CUDA_MMV_WARPS features are in one: the
             * host checks ffn % 32 == 0): the group's gate and up blocks, 2 · 32 / warps. */
            const int64_t group = (o - warp) / 32;
            if (!last_block_ticket(&epilogue.counters[group], 2 * (32 / MEMRA_CUDA_MMV_WARPS) - 1)) return;
            /* the other blocks' outputs through L2 (__ldcg: never a stale L1 line); warp w takes rows w, w + warps, ... */
            const float * gate = segments.out[0];
            const float * up = segments.out[1];
            for (int r = warp; r < rows; r += MEMRA_CUDA_MMV_WARPS) {
                const int64_t b = r * (epilogue.ffn / 32) + group;
                round_q8_0_codes(b, lane, swiglu_value(__ldcg(gate + b * 32 + lane), __ldcg(up + b * 32 + lane)), epilogue.codes, epilogue.scales);
            }
        }
    } else {
        store_split_rows<ROWS>(sum, lane, rows, out, n_out, o, split_shift);
    }
    /* one matrix (the host checks): the last of all the launch's blocks */
    if constexpr (EPILOGUE == MMV_NORM_TAIL) {
        if (last_block_ticket(tail.counter, (int)gridDim.x - 1)) norm_tail_rows(tail, segments.out[0], rows);
    }
}

/* code_words<TYPE>(row, group, w, s, o, zero): the 8 weight codes of `group` (8 values) of a
 * q8_0 (signed codes), q4_0, q5_0 or k-quant row packed as 4 bytes per word (unsigned 0..63 but
 * for q8_0), with the scale s, offset o and code zero point of the group's block (q8_0, q4_0,
 * q5_0) or 16-value chunk (k-quants): value i = s · (byte i − zero) + o, as codes_group gives it
 * (c = byte − zero). Words are built with shifts and masks on whole 32-bit words. */
template <int TYPE>
__device__ __forceinline__ void code_words(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero);

/* Two 32-bit words from a 2-byte aligned address (q6_K, q4_0 and q5_0 blocks are 210, 18 and 22
 * bytes). */
__device__ __forceinline__ void load_words_2(const uint8_t * p, uint32_t words[2]) {
    const unsigned short * h = reinterpret_cast<const unsigned short *>(p);
#pragma unroll
    for (int i = 0; i < 2; i++) words[i] = (uint32_t)__ldg(h + 2 * i) | ((uint32_t)__ldg(h + 2 * i + 1) << 16);
}

/* log2 of the 8-value groups per activation scale of code_words' types: 4 (q8_0 codes) or 32 (q8_K). */
template <int TYPE>
__device__ __forceinline__ constexpr int code_group_shift() {
    return TYPE == MEMRA_CUDA_TYPE_Q8_0 || TYPE == MEMRA_CUDA_TYPE_Q8_0_X8 || TYPE == MEMRA_CUDA_TYPE_Q4_0 || TYPE == MEMRA_CUDA_TYPE_Q4_0_X8 ||
                   TYPE == MEMRA_CUDA_TYPE_Q5_0 || TYPE == MEMRA_CUDA_TYPE_IQ4_NL
               ? 2
               : 5;
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q8_0>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const uint8_t * block = row + (group >> 2) * 34;
    s = half_at(block);
    o = 0.0f;
    zero = 0;
    uint32_t q[2];
    load_words_2(block + 2 + (group & 3) * 8, q); /* signed codes: __dp4a multiplies signed bytes */
    w[0] = (int)q[0];
    w[1] = (int)q[1];
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q8_0_X8>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    s = half_at(q8_0_x8::scale(row, group >> 2));
    o = 0.0f;
    zero = 0;
    const int2 q = __ldg(reinterpret_cast<const int2 *>(q8_0_x8::payload(row, group >> 2) + (group & 3) * 8)); /* 8-byte aligned */
    w[0] = q.x;
    w[1] = q.y;
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q4_0_X8>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const int part = (int)(group & 3);
    s = half_at(q4_0_x8::scale(row, group >> 2));
    o = 0.0f;
    zero = 8;
    const uint2 q = __ldg(reinterpret_cast<const uint2 *>(q4_0_x8::payload(row, group >> 2) + (part & 1) * 8)); /* 8-byte aligned */
    const int shift = part >= 2 ? 4 : 0;
    w[0] = (int)((q.x >> shift) & 0x0f0f0f0fu);
    w[1] = (int)((q.y >> shift) & 0x0f0f0f0fu);
}

/* Bits 0..3 of x to bit 0 of bytes 0..3. */
__device__ __forceinline__ uint32_t spread_bits_4(uint32_t x) { return (x & 1u) | ((x & 2u) << 7) | ((x & 4u) << 14) | ((x & 8u) << 21); }

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q4_0>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const uint8_t * block = row + (group >> 2) * 18;
    const int part = (int)(group & 3);
    s = half_at(block);
    o = 0.0f;
    zero = 8;
    uint32_t q[2];
    load_words_2(block + 2 + (part & 1) * 8, q);
    const int shift = part >= 2 ? 4 : 0;
    w[0] = (int)((q[0] >> shift) & 0x0f0f0f0fu);
    w[1] = (int)((q[1] >> shift) & 0x0f0f0f0fu);
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q5_0>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const uint8_t * block = row + (group >> 2) * 22;
    const int part = (int)(group & 3);
    s = half_at(block);
    o = 0.0f;
    zero = 16;
    const uint32_t qh = load_qh(block + 2) >> ((part & 1) * 8 + (part >= 2 ? 16 : 0));
    uint32_t q[2];
    load_words_2(block + 6 + (part & 1) * 8, q);
    const int shift = part >= 2 ? 4 : 0;
    w[0] = (int)(((q[0] >> shift) & 0x0f0f0f0fu) | (spread_bits_4(qh) << 4));
    w[1] = (int)(((q[1] >> shift) & 0x0f0f0f0fu) | (spread_bits_4(qh >> 4) << 4));
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q4_K>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const k4_group at = k4_group_of(row, group, 144, s, o);
    const uint8_t * block = at.block;
    const int j = at.j, l = at.l;
    zero = 0;
    /* 144-byte blocks of 16-byte aligned rows: the 8 bytes are 8-byte aligned */
    const uint2 q = __ldg(reinterpret_cast<const uint2 *>(block + 16 + (j >> 1) * 32 + l));
    const int shift = (j & 1) * 4;
    w[0] = (int)((q.x >> shift) & 0x0f0f0f0fu);
    w[1] = (int)((q.y >> shift) & 0x0f0f0f0fu);
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q5_K>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const k4_group at = k4_group_of(row, group, 176, s, o);
    const uint8_t * block = at.block;
    const int j = at.j, l = at.l;
    zero = 0;
    /* 176-byte blocks of 16-byte aligned rows: both 8-byte loads are 8-byte aligned */
    const uint2 ql = __ldg(reinterpret_cast<const uint2 *>(block + 48 + (j >> 1) * 32 + l));
    const uint2 qh = __ldg(reinterpret_cast<const uint2 *>(block + 16 + l));
    const int shift = (j & 1) * 4;
    w[0] = (int)(((ql.x >> shift) & 0x0f0f0f0fu) | (((qh.x >> j) & 0x01010101u) << 4));
    w[1] = (int)(((ql.y >> shift) & 0x0f0f0f0fu) | (((qh.y >> j) & 0x01010101u) << 4));
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q6_K>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const q6_k_group at = q6_k_group_of(row, group);
    uint32_t ql[2], qh[2];
    load_words_2(at.ql, ql);
    load_words_2(at.qh, qh);
    s = at.scale;
    o = 0.0f;
    zero = 32;
#pragma unroll
    for (int i = 0; i < 2; i++) w[i] = (int)(((ql[i] >> at.low_shift) & 0x0f0f0f0fu) | (((qh[i] >> at.high_shift) & 0x03030303u) << 4));
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q6_K_X8>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const q6_k_group at = q6_k_group_of<true>(row, group);
    const uint2 ql = __ldg(reinterpret_cast<const uint2 *>(at.ql)), qh = __ldg(reinterpret_cast<const uint2 *>(at.qh)); /* 8-byte aligned */
    s = at.scale;
    o = 0.0f;
    zero = 32;
    w[0] = (int)(((ql.x >> at.low_shift) & 0x0f0f0f0fu) | (((qh.x >> at.high_shift) & 0x03030303u) << 4));
    w[1] = (int)(((ql.y >> at.low_shift) & 0x0f0f0f0fu) | (((qh.y >> at.high_shift) & 0x03030303u) << 4));
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q2_K>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const k2_group at = q2_k_group_of(row, group, s, o);
    zero = 0;
    uint32_t q[2];
    load_words_2(at.q, q);
    w[0] = (int)((q[0] >> at.shift) & 0x03030303u);
    w[1] = (int)((q[1] >> at.shift) & 0x03030303u);
}

/* q3_K's code is low + 4 · high − 4: bytes low | high << 2 with zero point 4. */
template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_Q3_K>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    const k3_group at = q3_k_group_of(row, group, s);
    o = 0.0f;
    zero = 4;
    uint32_t q[2], h[2];
    load_words_2(at.q, q);
    load_words_2(at.h, h);
#pragma unroll
    for (int i = 0; i < 2; i++) w[i] = (int)(((q[i] >> at.shift) & 0x03030303u) | (((h[i] >> at.bit) & 0x01010101u) << 2));
}

/* iq4_nl and iq4_xs: their codes are the table's signed values (as q8_0's), zero point 0. */
__device__ __forceinline__ void iq4_code_words(const iq4_group & at, int w[2]) {
    uint32_t q[2];
    load_words_2(at.q, q);
    w[0] = (int)iq4_nl_bytes((q[0] >> at.shift) & 0x0f0f0f0fu);
    w[1] = (int)iq4_nl_bytes((q[1] >> at.shift) & 0x0f0f0f0fu);
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_IQ4_NL>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    o = 0.0f;
    zero = 0;
    iq4_code_words(iq4_nl_group_of(row, group, s), w);
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_IQ4_XS>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    o = 0.0f;
    zero = 0;
    iq4_code_words(iq4_xs_group_of(row, group, s), w);
}

/* The i-quants: iq2 / iq3 codes are their signed grid bytes (zero point 0, no offset). */
#define MEMRA_CUDA_IQ_CODE_WORDS(TYPE_ID, WORDS)                                                                                                  \
    template <>                                                                                                                                  \
    __device__ __forceinline__ void code_words<TYPE_ID>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {        \
        uint32_t words[2];                                                                                                                       \
        WORDS(row, group, words, s);                                                                                                             \
        o = 0.0f;                                                                                                                                \
        zero = 0;                                                                                                                                \
        w[0] = (int)words[0];                                                                                                                    \
        w[1] = (int)words[1];                                                                                                                    \
    }
MEMRA_CUDA_IQ_CODE_WORDS(MEMRA_CUDA_TYPE_IQ2_XXS, iq2_xxs_words)
MEMRA_CUDA_IQ_CODE_WORDS(MEMRA_CUDA_TYPE_IQ2_XS, iq2_xs_words)
MEMRA_CUDA_IQ_CODE_WORDS(MEMRA_CUDA_TYPE_IQ2_S, iq2_s_words)
MEMRA_CUDA_IQ_CODE_WORDS(MEMRA_CUDA_TYPE_IQ3_XXS, iq3_xxs_words)
MEMRA_CUDA_IQ_CODE_WORDS(MEMRA_CUDA_TYPE_IQ3_S, iq3_s_words)
#undef MEMRA_CUDA_IQ_CODE_WORDS

/* iq1_s and iq1_m: the grid's −1/0/1 bytes as they are, s = dl and the delta as the offset
 * o = ±dl / 8 (per group: iq1_m's changes every 8 values): s · Σ c_w·c_a + o · Σ c_a. */
__device__ __forceinline__ void iq1_code_words(const iq1_group & at, int w[2], float & s, float & o, int & zero) {
    w[0] = (int)at.grid[0];
    w[1] = (int)at.grid[1];
    s = at.dl;
    o = at.negative ? -__fmul_rn(at.dl, 0.125f) : __fmul_rn(at.dl, 0.125f);
    zero = 0;
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_IQ1_S>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    iq1_code_words(iq1_s_group_of(row, group), w, s, o, zero);
}

template <>
__device__ __forceinline__ void code_words<MEMRA_CUDA_TYPE_IQ1_M>(const uint8_t * row, int64_t group, int w[2], float & s, float & o, int & zero) {
    iq1_code_words(iq1_m_group_of(row, group), w, s, o, zero);
}

/* A group's Σ weight · activation before the activation block's scale, from code_words' words,
 * scale, offset and zero point and the activation's 8 codes: s · (Σ c_w·c_a − zero · Σ c_a) +
 * o · Σ c_a, the two sums exact (2 __dp4a each). */
__device__ __forceinline__ float code_group_dot(const int q[2], float s, float offset, int zero, int2 a) {
    const int dot = __dp4a(q[1], a.y, __dp4a(q[0], a.x, 0));
    const int total = __dp4a(0x01010101, a.y, __dp4a(0x01010101, a.x, 0));
    return __fmaf_rn(s, (float)(dot - zero * total), __fmul_rn(offset, (float)total));
}

/* sum[r] += group g's code words (code_words) · row r's 8 activation codes, times the activation
 * block's scale, for the rows < rows. */
template <int ROWS, int GROUP_SHIFT>
__device__ __forceinline__ void add_code_group_products(float sum[ROWS], const int q[2], float s, float offset, int zero, const int8_t * __restrict__ codes,
                                                        const float * __restrict__ scales, int64_t n_in, int64_t blocks, int64_t g, int rows) {
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        if (r < rows) {
            const int2 a = __ldg(reinterpret_cast<const int2 *>(codes + r * n_in + g * 8));
            sum[r] = __fmaf_rn(code_group_dot(q, s, offset, zero, a), __ldg(scales + r * blocks + (g >> GROUP_SHIFT)), sum[r]);
        }
    }
}

/* matrix_vector_codes_kernel<TYPE, ROWS>: decode with q4_0 or q5_0 weights on the activations'
 * q8_0 codes (iq4_nl too), or q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs or the iq1/iq2/iq3 weights on
 * their q8_K codes (one scale per 32 or 256 values).
 * As matrix_vector_kernel, lane l takes 8-value groups l, l + 32, ..., but multiplies codes: per
 * group, 2 __dp4a for Σ c_w · c_a and 2 for Σ c_a (exact integers), then
 * (s · (Σ c_w · c_a − zero · Σ c_a) + o · Σ c_a) · d_a: the products ggml's dot products of these
 * types sum, in another order. A quarter of the float kernel's activation bytes and about half its
 * instructions per weight.
 *
 * early_weights (as matrix_vector_q8_0_kernel's): the lane's first UNROLL groups of weights are
 * loaded before memra_grid_dependencies() (for a q4_K row of 1,024 inputs, the whole row), and
 * summed first, in the order the loop would. */
template <int TYPE, int ROWS, bool SPLIT>
__global__ void __launch_bounds__(MEMRA_CUDA_MMV_WARPS * 32) matrix_vector_codes_kernel(matrix_segments segments, const int8_t * __restrict__ codes,
                                                                                          const float * __restrict__ scales, int64_t row_bytes, int rows,
                                                                                          int64_t n_in, int early_weights, int shift) {
    if (!early_weights) memra_grid_dependencies();
    const int lane = threadIdx.x & 31;
    const int split_shift = SPLIT ? shift : 0;
    const segment_row target = segment_of(segments, split_shift);
    const int64_t o = target.o, n_out = target.n_out;
    float * __restrict__ out = target.out;
    const bool active = o < n_out;
    const uint8_t * w = target.weight + (active ? o : 0) * row_bytes;
    /* activation blocks of 32 (q8_0) or 256 (q8_K) values: 4 or 32 groups */
    constexpr int GROUP_SHIFT = code_group_shift<TYPE>();
    const int64_t groups = n_in / 8, blocks = groups >> GROUP_SHIFT;
    /* 4 groups' loads in flight for up to 2 rows, 2 for more (registers: 8 rows × 4 groups of
     * codes would cut the blocks per SM) */
    constexpr int UNROLL = ROWS <= 2 ? 4 : 2;
    /* split (as matrix_vector_kernel's): warp `part` of a feature takes iterations of 32 · UNROLL groups part, part + split, ... */
    const int64_t start = SPLIT ? (int64_t)((threadIdx.x >> 5) & ((1 << split_shift) - 1)) * 32 * UNROLL : 0;
    int first_q[UNROLL][2], first_zero[UNROLL];
    float first_s[UNROLL], first_offset[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t g = start + lane + 32 * u;
        code_words<TYPE>(w, g < groups ? g : 0, first_q[u], first_s[u], first_offset[u], first_zero[u]); /* group 0's past the row's end (unused) */
    }
    if (early_weights) memra_grid_dependencies();
    if (!active && !SPLIT) return; /* a split block's warps all reach its barrier (store_split_rows) */
    float sum[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; r++) sum[r] = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t g = start + lane + 32 * u;
        if (active && g < groups)
            add_code_group_products<ROWS, GROUP_SHIFT>(sum, first_q[u], first_s[u], first_offset[u], first_zero[u], codes, scales, n_in, blocks, g, rows);
    }
    if constexpr (!SPLIT) {
#pragma unroll(UNROLL)
        for (int64_t g = lane + 32 * UNROLL; g < groups; g += 32) {
            int q[2], zero;
            float s, offset;
            code_words<TYPE>(w, g, q, s, offset, zero);
            add_code_group_products<ROWS, GROUP_SHIFT>(sum, q, s, offset, zero, codes, scales, n_in, blocks, g, rows);
        }
        reduce_rows_and_store<ROWS>(sum, lane, rows, out, n_out, o);
    } else {
        const int64_t stride = ((int64_t)32 * UNROLL) << split_shift;
        for (int64_t base = active ? start + stride : groups; base < groups; base += stride) {
            int q[UNROLL][2], zero[UNROLL];
            float s[UNROLL], offset[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int64_t g = base + lane + 32 * u;
                code_words<TYPE>(w, g < groups ? g : 0, q[u], s[u], offset[u], zero[u]);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int64_t g = base + lane + 32 * u;
                if (g < groups) add_code_group_products<ROWS, GROUP_SHIFT>(sum, q[u], s[u], offset[u], zero[u], codes, scales, n_in, blocks, g, rows);
            }
        }
        store_split_rows<ROWS>(sum, lane, rows, out, n_out, o, split_shift);
    }
}


/* Where this thread's warp works in a GEMM block: warps in a 2 × 2 arrangement of 32 × 32, lanes
 * as (group, quad) of the m16n8k16 fragments, the block's tile origin. */
struct gemm_warp {
    int warp_m, warp_n, group, quad;
    int64_t tile_m, tile_n;
};
__device__ __forceinline__ gemm_warp gemm_warp_here(int tile_rows, int tile_columns) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    return gemm_warp{warp >> 1, warp & 1, lane >> 2, lane & 3, blockIdx.y * (int64_t)tile_rows, blockIdx.x * (int64_t)tile_columns};
}

/* A grouped GEMM (MoE experts over rows sorted by expert, moe_group_kernel): row tile y of the grid
 * is tiles[3y .. 3y + 2] = {expert, first row, end row}, the expert's matrix `matrix_bytes` after
 * the previous one; expert −1: no tile, the block exits. tiles null: the plain GEMM, row tile y is
 * rows [y · tile_rows, (y + 1) · tile_rows) of one matrix. */
struct gemm_groups {
    const int32_t * tiles;
    int64_t matrix_bytes;
};

/* The first row, end row and matrix byte offset of row tile y (by default the block's, blockIdx.y)
 * under `groups`; false for a block without a tile. */
__device__ __forceinline__ bool gemm_group_tile(const gemm_groups & groups, int tile_rows, int64_t rows, int64_t & tile_m, int64_t & row_end,
                                                int64_t & matrix_offset, int64_t y = -1) {
    if (y < 0) y = blockIdx.y;
    matrix_offset = 0;
    if (!groups.tiles) {
        tile_m = y * tile_rows;
        row_end = rows;
        return true;
    }
    const int32_t * tile = groups.tiles + 3 * y;
    if (tile[0] < 0) return false;
    matrix_offset = tile[0] * groups.matrix_bytes;
    tile_m = tile[1];
    row_end = tile[2];
    return true;
}

/* The warp's A fragments (2 row blocks of 16) and B fragments (4 column blocks of 8) of the
 * 16-wide k-step `kk`, from the padded f16 tiles (rows of STRIDE halves) by the m16n8k16 layouts. */
template <int STRIDE>
__device__ __forceinline__ void load_fragments(const __half * a_tile, const __half * b_tile, int warp_m, int warp_n, int group, int quad, int kk,
                                               uint32_t a[2][4], uint32_t b[4][2]) {
#pragma unroll
    for (int mi = 0; mi < 2; mi++) {
        const __half * base = a_tile + (warp_m * 32 + mi * 16 + group) * STRIDE + kk + quad * 2;
        a[mi][0] = *reinterpret_cast<const uint32_t *>(base);
        a[mi][1] = *reinterpret_cast<const uint32_t *>(base + 8 * STRIDE);
        a[mi][2] = *reinterpret_cast<const uint32_t *>(base + 8);
        a[mi][3] = *reinterpret_cast<const uint32_t *>(base + 8 * STRIDE + 8);
    }
#pragma unroll
    for (int ni = 0; ni < 4; ni++) {
        const __half * base = b_tile + (warp_n * 32 + ni * 8 + group) * STRIDE + kk + quad * 2;
        b[ni][0] = *reinterpret_cast<const uint32_t *>(base);
        b[ni][1] = *reinterpret_cast<const uint32_t *>(base + 8);
    }
}

/* The warp's 32 × 32 accumulators (C fragments) into out, rows < rows and columns < n_out. */
__device__ __forceinline__ void store_accumulators(float * __restrict__ out, const float acc[2][4][4], int64_t tile_m, int64_t tile_n, int warp_m,
                                                   int warp_n, int group, int quad, int64_t rows, int64_t n_out) {
#pragma unroll
    for (int mi = 0; mi < 2; mi++) {
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
            const int64_t row = tile_m + warp_m * 32 + mi * 16 + group;
            const int64_t column = tile_n + warp_n * 32 + ni * 8 + quad * 2;
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int64_t r = row + half * 8;
                if (r >= rows) continue;
                if (column < n_out) out[r * n_out + column] = acc[mi][ni][half * 2];
                if (column + 1 < n_out) out[r * n_out + column + 1] = acc[mi][ni][half * 2 + 1];
            }
        }
    }
}

template <int TYPE>
__global__ void __launch_bounds__(MEMRA_CUDA_GEMM_THREADS) gemm_kernel(float * __restrict__ out, const float * __restrict__ x,
                                                                       const uint8_t * __restrict__ weight, int64_t row_bytes, int64_t rows,
                                                                       int64_t n_in, int64_t n_out, int64_t k_per_split, gemm_groups groups) {
    memra_grid_dependencies();
    constexpr int TM = MEMRA_CUDA_GEMM_TILE_M, TN = MEMRA_CUDA_GEMM_TILE_N, TK = MEMRA_CUDA_GEMM_TILE_K, STRIDE = TK + MEMRA_CUDA_GEMM_PAD;
    __shared__ __align__(16) __half a_tile[TM * STRIDE];
    __shared__ __align__(16) __half b_tile[TN * STRIDE];
    int64_t tile_m = 0, row_end = 0, matrix_offset = 0;
    if (!gemm_group_tile(groups, TM, rows, tile_m, row_end, matrix_offset)) return;
    weight += matrix_offset;
    /* Split-K (grid z): inputs [k_begin, k_end), partial sums at out + z · rows · n_out. */
    const int64_t k_begin = blockIdx.z * k_per_split, k_end = k_begin + k_per_split < n_in ? k_begin + k_per_split : n_in;
    out += blockIdx.z * rows * n_out;
    const int tid = threadIdx.x;
    const gemm_warp at = gemm_warp_here(TM, TN);
    const int warp_m = at.warp_m, warp_n = at.warp_n, group = at.group, quad = at.quad;
    const int64_t tile_n = at.tile_n;

    float acc[2][4][4] = {};

    for (int64_t k0 = k_begin; k0 < k_end; k0 += TK) {
        /* 64 rows × 4 groups of 8 per tile: 256 groups, 2 per thread, for A and for B. */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int index = tid + i * MEMRA_CUDA_GEMM_THREADS;
            const int r = index >> 2, c = (index & 3) * 8;
            float v[8];
            const int64_t m = tile_m + r;
            if (m < row_end) {
                const float4 * source = reinterpret_cast<const float4 *>(x + m * n_in + k0 + c);
                const float4 p = __ldg(source), q = __ldg(source + 1);
                v[0] = p.x; v[1] = p.y; v[2] = p.z; v[3] = p.w; v[4] = q.x; v[5] = q.y; v[6] = q.z; v[7] = q.w;
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = 0.0f;
            }
            *reinterpret_cast<uint4 *>(&a_tile[r * STRIDE + c]) = pack_half8(v);
            const int64_t n = tile_n + r;
            if (n < n_out) {
                dequantize_group<TYPE>(weight + n * row_bytes, (k0 + c) / 8, v);
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = 0.0f;
            }
            *reinterpret_cast<uint4 *>(&b_tile[r * STRIDE + c]) = pack_half8(v);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16) {
            uint32_t a[2][4], b[4][2];
            load_fragments<STRIDE>(a_tile, b_tile, warp_m, warp_n, group, quad, kk, a, b);
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) mma_m16n8k16(acc[mi][ni], a[mi], b[ni]);
        }
        __syncthreads();
    }
    store_accumulators(out, acc, tile_m, tile_n, warp_m, warp_n, group, quad, row_end, n_out);
}

/* gemm_codes_kernel<TYPE>: prefill with the activations as q8 codes (round_activations_kernel
 * with CODES) and the weights as integer codes (codes_group): both exact in f16, so the tensor
 * cores' products and their f32 sums over a 16-value chunk are exact integers, as ggml's integer
 * dot products are. Per chunk, the warp's mma goes to a zeroed accumulator, which is then scaled
 * into the result: acc += d_x(row) · (s_w(col) · Σ c_w q_x + o_w(col) · Σ q_x). The tiles are the
 * f16 GEMM's (64 × 64 × 32, 4 warps, padded rows); `block_shift` is log2 of the activation
 * block (5 for q8_0/q8_1, 8 for q8_K: a 32-wide k-step never straddles two blocks). */
template <int TYPE>
__global__ void __launch_bounds__(MEMRA_CUDA_GEMM_THREADS) gemm_codes_kernel(float * __restrict__ out, const int8_t * __restrict__ codes,
                                                                             const float * __restrict__ scales, int block_shift,
                                                                             const uint8_t * __restrict__ weight, int64_t row_bytes, int64_t rows,
                                                                             int64_t n_in, int64_t n_out, int64_t k_per_split, gemm_groups groups) {
    memra_grid_dependencies();
    constexpr int TM = MEMRA_CUDA_GEMM_TILE_M, TN = MEMRA_CUDA_GEMM_TILE_N, TK = MEMRA_CUDA_GEMM_TILE_K, STRIDE = TK + MEMRA_CUDA_GEMM_PAD;
    __shared__ __align__(16) __half a_tile[TM * STRIDE];
    __shared__ __align__(16) __half b_tile[TN * STRIDE];
    __shared__ float row_scale[TM];          /* d_x of the k-step's block */
    __shared__ int row_sums[TM][TK / 8];     /* Σ q_x per 8-value group */
    __shared__ float column_scale[TN][TK / 16], column_offset[TN][TK / 16];
    int64_t tile_m = 0, row_end = 0, matrix_offset = 0;
    if (!gemm_group_tile(groups, TM, rows, tile_m, row_end, matrix_offset)) return;
    weight += matrix_offset;
    const int tid = threadIdx.x;
    const gemm_warp at = gemm_warp_here(TM, TN);
    const int warp_m = at.warp_m, warp_n = at.warp_n, group = at.group, quad = at.quad;
    const int64_t tile_n = at.tile_n;
    const int64_t blocks_per_row = n_in >> block_shift;
    /* Split-K (grid z): inputs [k_begin, k_end), partial sums at out + z · rows · n_out. */
    const int64_t k_begin = blockIdx.z * k_per_split, k_end = k_begin + k_per_split < n_in ? k_begin + k_per_split : n_in;
    out += blockIdx.z * rows * n_out;

    float acc[2][4][4] = {};

    for (int64_t k0 = k_begin; k0 < k_end; k0 += TK) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int index = tid + i * MEMRA_CUDA_GEMM_THREADS;
            const int r = index >> 2, c = (index & 3) * 8;
            float v[8];
            const int64_t m = tile_m + r;
            int sum = 0;
            if (m < row_end) {
                uint8_t q[8];
                const uint2 raw = *reinterpret_cast<const uint2 *>(codes + m * n_in + k0 + c);
                memcpy(q, &raw, 8);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    v[k] = (float)(int8_t)q[k];
                    sum += (int8_t)q[k];
                }
                if (c == 0) row_scale[r] = scales[m * blocks_per_row + ((k0) >> block_shift)];
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = 0.0f;
                if (c == 0) row_scale[r] = 0.0f;
            }
            row_sums[r][c / 8] = sum;
            *reinterpret_cast<uint4 *>(&a_tile[r * STRIDE + c]) = pack_half8(v);
            const int64_t n = tile_n + r;
            float s = 0.0f, o = 0.0f;
            if (n < n_out) {
                codes_group<TYPE>(weight + n * row_bytes, (k0 + c) / 8, v, s, o);
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = 0.0f;
            }
            if ((c & 15) == 0) {
                column_scale[r][c / 16] = s;
                column_offset[r][c / 16] = o;
            }
            *reinterpret_cast<uint4 *>(&b_tile[r * STRIDE + c]) = pack_half8(v);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16) {
            uint32_t a[2][4], b[4][2];
            load_fragments<STRIDE>(a_tile, b_tile, warp_m, warp_n, group, quad, kk, a, b);
            const int chunk = kk / 16;
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    mma_m16n8k16(partial, a[mi], b[ni]);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int r = warp_m * 32 + mi * 16 + group + (e >> 1) * 8;
                        const int c = warp_n * 32 + ni * 8 + quad * 2 + (e & 1);
                        const float q_sum = (float)(row_sums[r][chunk * 2] + row_sums[r][chunk * 2 + 1]);
                        acc[mi][ni][e] += row_scale[r] * (column_scale[c][chunk] * partial[e] + column_offset[c][chunk] * q_sum);
                    }
                }
            }
        }
        __syncthreads();
    }
    store_accumulators(out, acc, tile_m, tile_n, warp_m, warp_n, group, quad, row_end, n_out);
}

/* gemm_int8_kernel<TYPE>: prefill of q8_0, q4_0 and q5_0 weights (int8 codes, one f16 scale d_w
 * per 32 values) with the activations as q8_0 codes and f32 block scales d_x
 * (round_activations_kernel<MEMRA_CUDA_ROUND_Q8_0, true>), on mma.sync m16n8k32 s8 → s32.
 *
 * Numerics: one k-step is one 32-value block, so the s32 result of an mma is the block's exact
 * integer dot product isum, and each accumulator element gets acc += (d_w · d_x) · (float)isum, the
 * two products and the sum rounded separately (__fmul_rn, __fadd_rn) as ggml's scalar
 * vec_dot_q8_0_q8_0 does per block: the results are ggml's up to the order of the block sum.
 *
 * Tile: 128 activation rows × 128 output features per block of 8 warps (2 × 4; each warp 64 × 32 =
 * 4 × 4 m16n8k32 tiles), 2 blocks (64 inputs) per k-tile. The choice, for H100/H200 (65536
 * registers, 228 KB of shared memory per SM): a thread holds 64 f32 accumulators, per k-step 16 A
 * and 8 B fragment registers and 16 scales, and the prefetched next k-tile (8 activation words and
 * up to 10 weight words), about 150 registers by this count; ptxas (CUDA 13.0, sm_90) reports
 * 174-177 and no spills. So one block of 256 threads (8 warps) per SM: two would need ≤ 128
 * registers, which 64 accumulators leave no room for without spills. Per k-step a warp issues
 * 16 mma and, for the per-block scaling, 64 int-to-float conversions (small_int_to_float: an IADD
 * and an FADD, not the quarter-rate I2F) + 128 FMUL + 64 FADD: by instruction count the scaling
 * rather than the tensor cores should bound the kernel (an estimate, not a measurement),
 * and it costs the same per product for any tile shape. Against 64 × 64 tiles of 4 warps the
 * larger tile halves the global loads per product and the B-fragment reads (a B fragment serves
 * 4 mma instead of 2). The cost: 128-row tiles waste more on short prompts, and narrow matrices
 * give few blocks (pp512 of a 1024-wide K/V projection: 8 × 4 = 32 blocks for 132 SMs): the
 * k-tiles are split over grid z where that takes fewer waves × k-tiles a block (split-K, at most
 * 16 parts, memra_cuda_plan_int8_gemm), each part's sums go to workspace and split_sum_kernel adds
 * them in part order (deterministic: the split follows the shape and the device's SM count only).
 *
 * Data movement: thread t loads block (t & 1) of row t / 2 of both tiles per k-tile: 32 activation
 * code bytes as two 16-byte loads and the weight block (2-byte aligned: 4-byte loads from the
 * block or from the block + 2 and one 2-byte load, whichever alignment the block has, then
 * realigned; no divergence; q8_0_x8 and q4_0_x8: two and one 16-byte loads and the scale's 2),
 * q4_0 nibbles and q5_0 high bits expanded to int8 codes (offset applied) in registers. Two shared-memory stages: the next k-tile's global loads are issued before
 * the current tile's mma loop and stored to the other stage after it, one barrier per k-tile.
 *
 * Shared layout: rows of 64 code bytes, no padding. Within each 32-byte block the 4-byte words are
 * interleaved (word 4h + q at position 2q + h) so that a lane's two words of a fragment row
 * (k 4q..4q+3 and 16 + 4q..) are one 8-byte load, and the two blocks of a row swap places when
 * bit 1 of the row is set: a half-warp's 8-byte fragment loads (4 rows × 4 quads) then hit 32
 * distinct banks; a thread's block is stored as two 16-byte stores (2-way conflicts). Scales as f32,
 * [block][row]. 36 KB in all (memra_cuda_int8_gemm_shared_bytes), static, under the 48 KB that
 * needs no opt-in.
 *
 * Measured on an H200 (2026-12-04, the 8B shape's pp512 in forward.bench.ts --profile): 110-139
 * TFLOP/s, 82% of the prefill's time. gemm_int8_pipe_kernel below is the cp.async/ldmatrix form
 * of the q8_0_x8 case. Not used: wgmma. */

/* small_int_to_float (quant.cuh) converts the int8 GEMM's block sums: an int8 block dot product is
 * at most 32 · 128 · 128 = 2^19 in magnitude. */

/* Words of a weight block after its f16 scale: q8_0 32 code bytes; q4_0 16 nibble bytes; q5_0 4 bytes
 * of high bits and 16 nibble bytes. A block is 2 + 4 · words bytes. */
template <int TYPE>
struct int8_block_words;
template <>
struct int8_block_words<MEMRA_CUDA_TYPE_Q8_0> { static constexpr int value = 8; };
template <>
struct int8_block_words<MEMRA_CUDA_TYPE_Q8_0_X8> { static constexpr int value = 8; };
template <>
struct int8_block_words<MEMRA_CUDA_TYPE_Q4_0> { static constexpr int value = 4; };
template <>
struct int8_block_words<MEMRA_CUDA_TYPE_Q4_0_X8> { static constexpr int value = 4; };
template <>
struct int8_block_words<MEMRA_CUDA_TYPE_Q5_0> { static constexpr int value = 5; };

/* A 2-byte aligned block of 2 + 4 · P bytes: its scale's bits and its P payload words. A block at a
 * 4-byte boundary is read as P words from its start and 2 bytes at its end; one 2 bytes past a
 * boundary as 2 bytes at its start and P words after them; either way P + 1 loads within the block. */
template <int P>
__device__ __forceinline__ void load_weight_block(const uint8_t * block, uint32_t & scale_bits, uint32_t payload[P]) {
    const bool aligned = ((uintptr_t)block & 2u) == 0;
    const uint32_t * words = reinterpret_cast<const uint32_t *>(block + (aligned ? 0 : 2));
    const uint32_t edge = __ldg(reinterpret_cast<const unsigned short *>(block + (aligned ? 4 * P : 0)));
    uint32_t w[P];
#pragma unroll
    for (int j = 0; j < P; j++) w[j] = __ldg(words + j);
    scale_bits = aligned ? (w[0] & 0xffffu) : edge;
#pragma unroll
    for (int j = 0; j < P; j++) payload[j] = aligned ? (w[j] >> 16) | ((j + 1 < P ? w[j + 1] : edge) << 16) : w[j];
}

/* Four 4-bit codes (one per byte, 0..15) minus 8, as int8: the low 3 bits, and 0xf8 where bit 3 is clear. */
__device__ __forceinline__ uint32_t nibbles_minus_8(uint32_t nibbles) { return (nibbles & 0x07070707u) | ((~nibbles & 0x08080808u) * 0x1fu); }

/* The block's 32 codes as int8, 4 per word (word j: values 4j .. 4j + 3, the lowest in the low byte). */
template <int TYPE>
__device__ __forceinline__ void int8_codes(const uint32_t payload[int8_block_words<TYPE>::value], uint32_t codes[8]) {
    if constexpr (TYPE == MEMRA_CUDA_TYPE_Q8_0 || TYPE == MEMRA_CUDA_TYPE_Q8_0_X8) {
#pragma unroll
        for (int j = 0; j < 8; j++) codes[j] = payload[j];
    } else if constexpr (TYPE == MEMRA_CUDA_TYPE_Q4_0 || TYPE == MEMRA_CUDA_TYPE_Q4_0_X8) {
        /* value i < 16: the low nibble of byte i; value 16 + i: its high nibble */
#pragma unroll
        for (int j = 0; j < 8; j++) codes[j] = nibbles_minus_8((payload[j & 3] >> (j >= 4 ? 4 : 0)) & 0x0f0f0f0fu);
    } else {
        /* q5_0: value i = (nibble | bit i of qh << 4) − 16: the nibble where the bit is set, else nibble | 0xf0 */
        const uint32_t qh = payload[0];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t nibbles = (payload[1 + (j & 3)] >> (j >= 4 ? 4 : 0)) & 0x0f0f0f0fu;
            const uint32_t high = (((qh >> (4 * j)) & 0xfu) * 0x00204081u) & 0x01010101u; /* bit b → byte b */
            codes[j] = nibbles | ((~high & 0x01010101u) * 0xf0u);
        }
    }
}

/* One stage of the int8 GEMM's shared memory: codes of TILE_M activation rows and TILE_N weight rows
 * (64 bytes each, laid out by int8_tile_word) and their block scales. */
struct int8_gemm_stage {
    uint32_t a[MEMRA_CUDA_INT8_GEMM_TILE_M * MEMRA_CUDA_INT8_GEMM_TILE_K / 4];
    uint32_t b[MEMRA_CUDA_INT8_GEMM_TILE_N * MEMRA_CUDA_INT8_GEMM_TILE_K / 4];
    float a_scale[MEMRA_CUDA_INT8_GEMM_TILE_K / 32][MEMRA_CUDA_INT8_GEMM_TILE_M];
    float b_scale[MEMRA_CUDA_INT8_GEMM_TILE_K / 32][MEMRA_CUDA_INT8_GEMM_TILE_N];
};

/* Index of the first word of block `step` of tile row `row` (16 words a row; blocks swapped in rows
 * with bit 1 set). Word 4h + q of the block is at + 2q + h. */
__device__ __forceinline__ int int8_tile_block(int row, int step) { return row * 16 + 8 * (step ^ ((row >> 1) & 1)); }

/* Stores the 8 code words of block `step` of tile row `row` (word j: k 4j .. 4j + 3). */
__device__ __forceinline__ void store_int8_block(uint32_t * tile, int row, int step, const uint32_t w[8]) {
    uint4 * target = reinterpret_cast<uint4 *>(tile + int8_tile_block(row, step));
    target[0] = make_uint4(w[0], w[4], w[1], w[5]);
    target[1] = make_uint4(w[2], w[6], w[3], w[7]);
}

/* A lane's two words of fragment row `row` at k-step `step`: k 4 quad .. +3 (x) and 16 + 4 quad .. (y). */
__device__ __forceinline__ uint2 load_int8_pair(const uint32_t * tile, int row, int step, int quad) {
    return *reinterpret_cast<const uint2 *>(tile + int8_tile_block(row, step) + 2 * quad);
}

/* The next k-tile of one thread, in registers between its global loads and its shared stores. */
template <int TYPE>
struct int8_gemm_fetch {
    uint4 a[2];       /* 32 activation codes */
    float a_scale;
    uint32_t b[int8_block_words<TYPE>::value];
    uint32_t b_scale; /* f16 bits */
};

/* One 32-value block of the int8 GEMMs' k loop: each m16n8k32 tile's exact integer products (a
 * zeroed accumulator), scaled into acc as ggml's vec_dot_q8_0_q8_0 scales a block: acc += (d_w ·
 * d_x) · isum, the products and the sum rounded one by one. C fragment e: row e >> 1, column e & 1. */
template <int MI, int NI>
__device__ __forceinline__ void add_int8_block(float acc[MI][NI][4], const uint32_t a[MI][4], const uint32_t b[NI][2], const float row_scale[MI][2],
                                               const float column_scale[NI][2]) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
            int32_t dot[4] = {0, 0, 0, 0};
            mma_m16n8k32_s8(dot, a[mi], b[ni]);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float d = __fmul_rn(column_scale[ni][e & 1], row_scale[mi][e >> 1]);
                acc[mi][ni][e] = __fadd_rn(acc[mi][ni][e], __fmul_rn(d, small_int_to_float(dot[e])));
            }
        }
    }
}

/* The int8 GEMMs' accumulators (a warp's MI × NI m16n8 tiles at rows warp_m · 16 MI, columns
 * warp_n · 8 NI of the block's tile) into out, rows < row_end and columns < n_out. C fragments:
 * (group, 2 quad .. +1) and (group + 8, ...) of each 16 × 8 tile; pairs as float2 where the row
 * length and `out` allow 8-byte stores. */
template <int MI, int NI>
__device__ __forceinline__ void store_int8_accumulators(float * __restrict__ out, const float acc[MI][NI][4], int64_t tile_m, int64_t tile_n, int warp_m,
                                                        int warp_n, int group, int quad, int64_t row_end, int64_t n_out) {
    const bool pairs = (n_out & 1) == 0 && ((uintptr_t)out & 7u) == 0;
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
            const int64_t column = tile_n + warp_n * NI * 8 + ni * 8 + 2 * quad;
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int64_t row = tile_m + warp_m * MI * 16 + mi * 16 + group + half * 8;
                if (row >= row_end) continue;
                float * target = out + row * n_out + column;
                if (pairs && column + 1 < n_out) {
                    *reinterpret_cast<float2 *>(target) = make_float2(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1]);
                } else {
                    if (column < n_out) target[0] = acc[mi][ni][half * 2];
                    if (column + 1 < n_out) target[1] = acc[mi][ni][half * 2 + 1];
                }
            }
        }
    }
}

template <int TYPE>
__global__ void __launch_bounds__(MEMRA_CUDA_INT8_GEMM_THREADS) gemm_int8_kernel(float * __restrict__ out, const int8_t * __restrict__ codes,
                                                                                 const float * __restrict__ scales, const uint8_t * __restrict__ weight,
                                                                                 int64_t row_bytes, int64_t rows, int64_t n_in, int64_t n_out,
                                                                                 int64_t k_tiles_per_split, gemm_groups groups) {
    memra_grid_dependencies();
    constexpr int TM = MEMRA_CUDA_INT8_GEMM_TILE_M, TN = MEMRA_CUDA_INT8_GEMM_TILE_N, STEPS = MEMRA_CUDA_INT8_GEMM_TILE_K / 32;
    constexpr int P = int8_block_words<TYPE>::value, BLOCK_BYTES = 2 + 4 * P;
    constexpr int MI = 4, NI = 4; /* a warp's 64 × 32: 4 × 4 m16n8k32 tiles */
    static_assert(STEPS == 2 && MEMRA_CUDA_INT8_GEMM_THREADS == TM * STEPS && TM == TN && MEMRA_CUDA_INT8_GEMM_STAGES == 2,
                  "one (row, block) of each tile per thread and k-tile; two stages");
    static_assert(sizeof(int8_gemm_stage) * 2 <= 48 * 1024, "static shared memory");
    __shared__ __align__(16) int8_gemm_stage stages[2];

    int64_t tile_m = 0, row_end = 0, matrix_offset = 0;
    if (!gemm_group_tile(groups, TM, rows, tile_m, row_end, matrix_offset)) return;
    weight += matrix_offset;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp >> 2, warp_n = warp & 3, group = lane >> 2, quad = lane & 3;
    const int64_t tile_n = blockIdx.x * (int64_t)TN;
    const int64_t blocks = n_in / 32, k_tiles = (blocks + STEPS - 1) / STEPS;
    /* Split-K (grid z): this block's k-tiles, and its partial sums at out + z · rows · n_out. */
    const int64_t k_first = blockIdx.z * k_tiles_per_split;
    const int64_t k_end = k_first + k_tiles_per_split < k_tiles ? k_first + k_tiles_per_split : k_tiles;
    out += blockIdx.z * rows * n_out;

    /* This thread's share of every k-tile: block `load_step` of activation row tile_m + load_row and
     * of weight row tile_n + load_row; rows past the matrices (and the second block of a last k-tile
     * of one block) are zeros with zero scales. */
    const int load_row = tid >> 1, load_step = tid & 1;
    const bool a_row = tile_m + load_row < row_end, b_row = tile_n + load_row < n_out;
    const int8_t * a_codes = codes + (a_row ? tile_m + load_row : 0) * n_in;
    const float * a_scales = scales + (a_row ? tile_m + load_row : 0) * blocks;
    const uint8_t * b_blocks = weight + (b_row ? tile_n + load_row : 0) * row_bytes;

    int8_gemm_fetch<TYPE> next;
    auto fetch = [&](int64_t k_tile) {
        const int64_t block = k_tile * STEPS + load_step;
        if (a_row && block < blocks) {
            const uint4 * source = reinterpret_cast<const uint4 *>(a_codes + block * 32);
            next.a[0] = __ldg(source);
            next.a[1] = __ldg(source + 1);
            next.a_scale = __ldg(a_scales + block);
        } else {
            next.a[0] = next.a[1] = make_uint4(0, 0, 0, 0);
            next.a_scale = 0.0f;
        }
        if (b_row && block < blocks) {
            if constexpr (TYPE == MEMRA_CUDA_TYPE_Q8_0_X8) { /* the codes 16-byte aligned: two 16-byte loads */
                next.b_scale = __ldg(reinterpret_cast<const unsigned short *>(q8_0_x8::scale(b_blocks, block)));
                const uint4 * source = reinterpret_cast<const uint4 *>(q8_0_x8::payload(b_blocks, block));
                const uint4 low = __ldg(source), high = __ldg(source + 1);
                next.b[0] = low.x, next.b[1] = low.y, next.b[2] = low.z, next.b[3] = low.w;
                next.b[4] = high.x, next.b[5] = high.y, next.b[6] = high.z, next.b[7] = high.w;
            } else if constexpr (TYPE == MEMRA_CUDA_TYPE_Q4_0_X8) { /* the nibbles 16-byte aligned: one load */
                next.b_scale = __ldg(reinterpret_cast<const unsigned short *>(q4_0_x8::scale(b_blocks, block)));
                const uint4 nibbles = __ldg(reinterpret_cast<const uint4 *>(q4_0_x8::payload(b_blocks, block)));
                next.b[0] = nibbles.x, next.b[1] = nibbles.y, next.b[2] = nibbles.z, next.b[3] = nibbles.w;
            } else {
                load_weight_block<P>(b_blocks + block * BLOCK_BYTES, next.b_scale, next.b);
            }
        } else {
            next.b_scale = 0;
#pragma unroll
            for (int j = 0; j < P; j++) next.b[j] = 0;
        }
    };
    auto store = [&](int64_t k_tile, int8_gemm_stage & stage) {
        const uint32_t a_words[8] = {next.a[0].x, next.a[0].y, next.a[0].z, next.a[0].w, next.a[1].x, next.a[1].y, next.a[1].z, next.a[1].w};
        store_int8_block(stage.a, load_row, load_step, a_words);
        stage.a_scale[load_step][load_row] = next.a_scale;
        uint32_t b_words[8];
        int8_codes<TYPE>(next.b, b_words);
        const bool present = b_row && k_tile * STEPS + load_step < blocks;
#pragma unroll
        for (int j = 0; j < 8; j++) b_words[j] = present ? b_words[j] : 0u; /* q4_0/q5_0 zeros would decode to −8/−16 */
        store_int8_block(stage.b, load_row, load_step, b_words);
        stage.b_scale[load_step][load_row] = __half2float(__ushort_as_half((unsigned short)next.b_scale));
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

    fetch(k_first);
    store(k_first, stages[0]);
    __syncthreads();
    for (int64_t k_tile = k_first; k_tile < k_end; k_tile++) {
        const int8_gemm_stage & stage = stages[(k_tile - k_first) & 1];
        if (k_tile + 1 < k_end) fetch(k_tile + 1); /* in flight during the mma loop */
#pragma unroll
        for (int step = 0; step < STEPS; step++) {
            if (step > 0 && k_tile * STEPS + step >= blocks) break; /* the same for the whole block */
            uint32_t a[MI][4], b[NI][2];
            float row_scale[MI][2], column_scale[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                const int row = warp_m * 64 + mi * 16 + group;
                const uint2 top = load_int8_pair(stage.a, row, step, quad), bottom = load_int8_pair(stage.a, row + 8, step, quad);
                a[mi][0] = top.x;
                a[mi][1] = bottom.x;
                a[mi][2] = top.y;
                a[mi][3] = bottom.y;
                row_scale[mi][0] = stage.a_scale[step][row];
                row_scale[mi][1] = stage.a_scale[step][row + 8];
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int column = warp_n * 32 + ni * 8;
                const uint2 pair = load_int8_pair(stage.b, column + group, step, quad);
                b[ni][0] = pair.x;
                b[ni][1] = pair.y;
                const float2 d = *reinterpret_cast<const float2 *>(&stage.b_scale[step][column + 2 * quad]);
                column_scale[ni][0] = d.x;
                column_scale[ni][1] = d.y;
            }
            add_int8_block<MI, NI>(acc, a, b, row_scale, column_scale);
        }
        if (k_tile + 1 < k_end) store(k_tile + 1, stages[(k_tile + 1 - k_first) & 1]);
        __syncthreads();
    }

    store_int8_accumulators<MI, NI>(out, acc, tile_m, tile_n, warp_m, warp_n, group, quad, row_end, n_out);
}

/* gemm_int8_pipe_kernel: gemm_int8_kernel<q8_0_x8>'s product with the operands brought by cp.async
 * several stages ahead (MEMRA_CUDA_INT8_PIPELINE=1; measured against it on a GPU before it is the
 * default). gemm_int8_kernel issues the next k-tile's loads into registers before its mma loop and
 * stores them to shared memory after it: with one block of 8 warps an SM and 2 blocks (64 inputs)
 * a k-tile, the loads have one k-tile of mma to land in, and each k-tile ends at a barrier. Here a
 * k-tile is PIPE_BLOCKS (4) blocks, and PIPE_STAGES (4) of them are in flight: the copies of k-tile
 * i + 3 are issued while the tensor cores work on k-tile i, straight to shared memory (no staging
 * registers, no conversion: the q8_0_x8 layout's codes are the int8 operands as they are, 16-byte
 * aligned, and its f16 scales are converted where they are read).
 *
 * The same tiles (128 × 128, 8 warps of 64 × 32), plan and split-K parts (whole 64-input k-tiles of
 * gemm_int8_kernel's plan: a part may end with half a k-tile here, whose last 2 blocks are then
 * neither copied nor multiplied), and per output the same block terms added in the same order with
 * the same roundings: the results are gemm_int8_kernel's bit for bit (cuda-int8-gemm.test.ts).
 *
 * TM (template): the rows of a block's tile, 128 as gemm_int8_kernel's, or 64 for launches of at
 * most 64 rows (a batched decode step): the same grid (one row tile), half the tensor-core work of
 * a 128-row tile that is half empty, warps of 32 × 32 (2 × 4 m16n8k32 tiles), 104 KiB of shared
 * memory and at most 128 registers, so two blocks an SM (16 warps hide what the unrolled
 * k-steps of the 128-row kernel hide).
 *
 * Shared memory, per stage: activation codes [TM rows][128 bytes], weight codes [128][128], the
 * 16-byte chunks of a row at chunk c ^ (row & 7) (so that the 8 rows an ldmatrix matrix reads fall
 * in 8 distinct 16-byte bank groups), activation scales [TM][4] f32 and weight scales [128][4] f16.
 * Copies per thread and k-tile: TM / 32 + 4 chunks of 16 bytes (a warp: 4 whole rows), an 8-byte
 * pair of activation scales (TM = 128; half the threads for 64), a 4-byte pair of weight scales.
 * Rows past the matrices are zero-filled
 * (cp.async with no source bytes). Fragments: ldmatrix.x4, one per 16 × 32 A tile and per two 8 × 32
 * B tiles. Registers: the accumulators (64 a thread for TM = 128, as gemm_int8_kernel's), no staging. */
template <int TM>
__global__ void __launch_bounds__(MEMRA_CUDA_INT8_GEMM_THREADS, TM == 64 ? 2 : 1)
    gemm_int8_pipe_kernel(float * __restrict__ out, const int8_t * __restrict__ codes, const float * __restrict__ scales, const uint8_t * __restrict__ weight,
                          int64_t row_bytes, int64_t rows, int64_t n_in, int64_t n_out, int64_t k_tiles_per_split, gemm_groups groups) {
    memra_grid_dependencies();
    constexpr int TN = MEMRA_CUDA_INT8_GEMM_TILE_N, KB = MEMRA_CUDA_INT8_PIPE_BLOCKS, STAGES = MEMRA_CUDA_INT8_PIPE_STAGES;
    constexpr int ROW = KB * 32; /* code bytes of a row in a stage */
    constexpr int A_CODES = 0, B_CODES = TM * ROW, A_SCALES = B_CODES + TN * ROW, B_SCALES = A_SCALES + TM * KB * 4, STAGE = B_SCALES + TN * KB * 2;
    constexpr int MI = TM / 32, NI = 4; /* a warp's TM / 2 × 32: MI × 4 m16n8k32 tiles */
    static_assert((TM == 128 || TM == 64) && KB == 4 && ROW == 128 && TN == 128 && MEMRA_CUDA_INT8_GEMM_THREADS == 256,
                  "a row is 8 chunks of 16 bytes; a thread copies 4 chunks of each tile and one scale pair of each");
    static_assert(MEMRA_CUDA_INT8_GEMM_TILE_K == 64, "split-K parts are whole 64-input k-tiles of gemm_int8_kernel's plan: even block counts");
    static_assert(STAGE % 16 == 0 && STAGES >= 2, "16-byte aligned stages");
    MEMRA_DYNAMIC_SHARED(uint8_t, pipe_shared); /* named apart: nvcc holds one extern __shared__ array of a name per translation unit, moe.cuh has `shared` */

    /* Ungrouped, blocks in launch order (x fastest) take the row tiles of one column tile after
     * another: the blocks that read a weight tile run together, so HBM serves it once and L2 the
     * other row tiles (with x the column tile, a prefill's 4 row tiles of it ran a wave apart, and
     * a 53 MB matrix does not stay in L2). The same tiles, the same work each: the same results. */
    uint32_t tile_x = blockIdx.x, tile_y = blockIdx.y;
    if (!groups.tiles && (uint64_t)gridDim.x * gridDim.y <= 0xffffffffu) { /* 32-bit (64-bit division spilled in the 64-row kernel) */
        const uint32_t linear = blockIdx.y * gridDim.x + blockIdx.x;
        tile_y = linear % gridDim.y;
        tile_x = linear / gridDim.y;
    }
    int64_t tile_m = 0, row_end = 0, matrix_offset = 0;
    if (!gemm_group_tile(groups, TM, rows, tile_m, row_end, matrix_offset, (int64_t)tile_y)) return;
    weight += matrix_offset;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp >> 2, warp_n = warp & 3, group = lane >> 2, quad = lane & 3;
    const int64_t tile_n = (int64_t)tile_x * TN;
    const int64_t blocks = n_in / 32;
    /* This block's blocks [first, end) (even both: split-K parts are whole 64-input k-tiles) and its
     * partial sums at out + z · rows · n_out. */
    const int64_t first = blockIdx.z * k_tiles_per_split * 2;
    const int64_t end = first + k_tiles_per_split * 2 < blocks ? first + k_tiles_per_split * 2 : blocks;
    const int64_t tiles = end > first ? (end - first + KB - 1) / KB : 0;
    out += blockIdx.z * rows * n_out;

    /* The copies of k-tile `tile` into stage `stage`: chunk c (0..7) of row r is bytes 16c .. of
     * the tile's 4 blocks, block pair c >> 2 (a pair of blocks is 64 contiguous bytes in both
     * layouts, as the tile's first block is even). */
    auto load = [&](int64_t tile, int stage) {
        uint8_t * base = pipe_shared + stage * STAGE;
        const int64_t b0 = first + tile * KB;
        const int pairs = end - b0 >= KB ? 2 : 1;
#pragma unroll
        for (int j = 0; j < TN / 32; j++) {
            const int index = tid + j * MEMRA_CUDA_INT8_GEMM_THREADS, r = index >> 3, c = index & 7, pair = c >> 2;
            if (pair >= pairs) continue;
            const int at = r * ROW + ((c ^ (r & 7)) << 4);
            if (j < TM / 32) {
                const bool a_present = tile_m + r < row_end;
                cp_async<16>(base + A_CODES + at, codes + (a_present ? (tile_m + r) * n_in + b0 * 32 + c * 16 : 0), a_present);
            }
            const bool b_present = tile_n + r < n_out;
            const uint8_t * b_row = weight + (b_present ? tile_n + r : 0) * row_bytes;
            cp_async<16>(base + B_CODES + at, q8_0_x8::payload(b_row, b0 + 2 * pair) + 16 * (c & 3), b_present);
        }
        const int r = tid >> 1, pair = tid & 1;
        if (pair < pairs) {
            if (r < TM) {
                const bool a_present = tile_m + r < row_end;
                cp_async<8>(base + A_SCALES + r * KB * 4 + pair * 8, scales + (a_present ? (tile_m + r) * blocks + b0 + 2 * pair : 0), a_present);
            }
            const bool b_present = tile_n + r < n_out;
            cp_async<4>(base + B_SCALES + r * KB * 2 + pair * 4, q8_0_x8::scale(weight + (b_present ? tile_n + r : 0) * row_bytes, b0 + 2 * pair), b_present);
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

    /* The first STAGES − 1 k-tiles in flight; a group per k-tile, empty past the last, so that
     * cp_async_wait<STAGES − 2> always means "k-tile i has landed". */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < tiles) load(s, s);
        cp_async_commit();
    }
    for (int64_t i = 0; i < tiles; i++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); /* k-tile i is in shared memory for every thread, and k-tile i − 1's stage is free */
        if (i + STAGES - 1 < tiles) load(i + STAGES - 1, (int)((i + STAGES - 1) % STAGES));
        cp_async_commit();

        const uint8_t * base = pipe_shared + (int)(i % STAGES) * STAGE;
        const float * a_scales = reinterpret_cast<const float *>(base + A_SCALES);
        const __half * b_scales = reinterpret_cast<const __half *>(base + B_SCALES);
        const int steps = end - (first + i * KB) >= KB ? KB : 2; /* the same for the whole block */
        /* One block's k-step; its loop is unrolled fully for 128-row tiles, not at all for 64 (ptxas,
         * CUDA 13.0, sm_90: 255 registers and no spills for 128; 128 and none for 64, whose full
         * unroll spilled 20 bytes under the 2-blocks-an-SM cap, and 2 ways 28 once the tile order
         * below the grid's came in; for 128, a 4-way count spilled 48 bytes where the plain pragma
         * spills none). */
        auto multiply = [&](int step) {
            uint32_t a[MI][4], b[NI][2];
            float row_scale[MI][2], column_scale[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                /* lane l: row l & 7 of matrix l >> 3: rows + 8 for matrices 1 and 3, bytes 16.. for 2 and 3 */
                const int row = warp_m * (TM / 2) + mi * 16 + ((lane >> 3) & 1) * 8 + (lane & 7), chunk = 2 * step + (lane >> 4);
                ldmatrix_x4(a[mi], base + A_CODES + row * ROW + ((chunk ^ (row & 7)) << 4));
                const int top = warp_m * (TM / 2) + mi * 16 + group;
                row_scale[mi][0] = a_scales[top * KB + step];
                row_scale[mi][1] = a_scales[(top + 8) * KB + step];
            }
#pragma unroll
            for (int p = 0; p < NI / 2; p++) {
                /* matrices: (tile 2p, bytes 0-15), (2p, 16-31), (2p + 1, 0-15), (2p + 1, 16-31) */
                const int column = warp_n * 32 + (2 * p + (lane >> 4)) * 8 + (lane & 7), chunk = 2 * step + ((lane >> 3) & 1);
                uint32_t r[4];
                ldmatrix_x4(r, base + B_CODES + column * ROW + ((chunk ^ (column & 7)) << 4));
                b[2 * p][0] = r[0];
                b[2 * p][1] = r[1];
                b[2 * p + 1][0] = r[2];
                b[2 * p + 1][1] = r[3];
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int column = warp_n * 32 + ni * 8 + 2 * quad;
                column_scale[ni][0] = __half2float(b_scales[column * KB + step]);
                column_scale[ni][1] = __half2float(b_scales[(column + 1) * KB + step]);
            }
            add_int8_block<MI, NI>(acc, a, b, row_scale, column_scale);
        };
        if constexpr (TM == 128) {
#pragma unroll
            for (int step = 0; step < KB; step++) {
                if (step >= steps) break;
                multiply(step);
            }
        } else {
#pragma unroll 1
            for (int step = 0; step < KB; step++) {
                if (step >= steps) break;
                multiply(step);
            }
        }
    }
    cp_async_wait<0>(); /* nothing real is pending (the groups past the last k-tile are empty) */
    store_int8_accumulators<MI, NI>(out, acc, tile_m, tile_n, warp_m, warp_n, group, quad, row_end, n_out);
}

/* out[i] = Σ_s partials[s · count + i], s = 0, 1, ... in order: a split-K GEMM's partial sums. */
static __global__ void split_sum_kernel(float * __restrict__ out, const float * __restrict__ partials, int64_t count, int splits) {
    memra_grid_dependencies();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        float sum = partials[i];
        for (int s = 1; s < splits; s++) sum = __fadd_rn(sum, partials[s * count + i]);
        out[i] = sum;
    }
}

/* Activations rounded as ggml's CPU matmul rounds them for the weight type (launch-plan.h enum
 * memra_cuda_rounding; the formulas of packages/core/src/activation-rounding.ts), so that the
 * matrix kernels' f32 products of rounded values give llama.cpp's results up to summation order.
 * q8_0/q8_1/q8_K: one warp per block of 32 or 256 values; `corrections` (q8_1 only) gets
 * f16(d · Σq) − d16 · Σq per 32-value block. */
/* Activation i: x[i], or SwiGLU's silu(x[i]) · up[i] exactly as swiglu_kernel computes it when the
 * rounding reads the gate and up projections (memra_cuda_swiglu_matmul). */
__device__ __forceinline__ float activation_at(const float * x, const float * up, int64_t i) {
    if (!up) return x[i];
    return swiglu_value(x[i], up[i]);
}


/* One q8 block (32 values, or 256 for q8_K) of the activations rounded by one warp: block b of x
 * (or of silu(x) · up), every lane taking part. The body of round_activations_kernel, shared with
 * the fused RMSNorm-and-rounding kernel so that both round bit for bit alike. */
template <int MODE, bool CODES>
/* x and up are not __restrict__: the fused kernel reads here values it wrote itself, which must
 * not go through the read-only data cache. */
__device__ __forceinline__ void round_block(int64_t b, int lane, float * __restrict__ out, float * __restrict__ corrections, const float * x,
                                            int8_t * __restrict__ codes, float * __restrict__ scales, const float * up) {
    constexpr int BLOCK = MODE == MEMRA_CUDA_ROUND_Q8_K ? 256 : 32;
    const int64_t base = b * BLOCK;
    float * ob = out + b * BLOCK;
    if constexpr (MODE == MEMRA_CUDA_ROUND_Q8_K) {
        /* The first value of largest magnitude, with its sign (ggml's q8_K keeps the sign). */
        float best = -1.0f;
        int best_index = BLOCK;
#pragma unroll
        for (int i = 0; i < BLOCK / 32; i++) {
            const float a = fabsf(activation_at(x, up, base + i * 32 + lane));
            if (a > best) { best = a; best_index = i * 32 + lane; }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_xor_sync(0xffffffffu, best, offset);
            const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
            if (other > best || (other == best && other_index < best_index)) { best = other; best_index = other_index; }
        }
        if (best == 0.0f) {
#pragma unroll
            for (int i = 0; i < BLOCK / 32; i++) {
                if constexpr (CODES) codes[b * BLOCK + i * 32 + lane] = 0;
                else ob[i * 32 + lane] = 0.0f;
            }
            if (CODES && lane == 0) scales[b] = 0.0f;
            return;
        }
        const float inverse_scale = -127.0f / activation_at(x, up, base + best_index);
        const float d = 1.0f / inverse_scale;
#pragma unroll
        for (int i = 0; i < BLOCK / 32; i++) {
            const float q = fminf(127.0f, rintf(__fmul_rn(inverse_scale, activation_at(x, up, base + i * 32 + lane))));
            if constexpr (CODES) codes[b * BLOCK + i * 32 + lane] = (int8_t)q;
            else ob[i * 32 + lane] = __fmul_rn(d, q);
        }
        if (CODES && lane == 0) scales[b] = d;
    } else if constexpr (MODE == MEMRA_CUDA_ROUND_Q8_0 && CODES) {
        round_q8_0_codes(b, lane, activation_at(x, up, base + lane), codes, scales);
    } else {
        const float value = activation_at(x, up, base + lane);
        float d, d16;
        const float q = round_q8_0_lane(value, d, d16);
        if constexpr (CODES) {
            codes[b * BLOCK + lane] = (int8_t)q;
            if (lane == 0) scales[b] = d16;
        } else {
            ob[lane] = __fmul_rn(d16, q);
        }
        if constexpr (MODE == MEMRA_CUDA_ROUND_Q8_1) {
            int sum = (int)q;
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
            /* d16 · Σq is exact in f32 (11 + 12 bits), so is the difference. */
            if (lane == 0) corrections[b] = __half2float(__float2half_rn(__fmul_rn(d, (float)sum))) - __fmul_rn(d16, (float)sum);
        }
    }
}

template <int MODE, bool CODES = false>
__global__ void round_activations_kernel(float * __restrict__ out, float * __restrict__ corrections, const float * __restrict__ x, int64_t count,
                                         int8_t * __restrict__ codes, float * __restrict__ scales, const float * __restrict__ up) {
    memra_grid_dependencies();
    /* CODES (q8_0/q8_1/q8_K, for the integer GEMM): the codes q and the block scales d instead of
     * the values d · q. */
    if constexpr (MODE == MEMRA_CUDA_ROUND_F16 || MODE == MEMRA_CUDA_ROUND_BF16) {
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
            if constexpr (MODE == MEMRA_CUDA_ROUND_F16) out[i] = __half2float(__float2half_rn(activation_at(x, up, i)));
            else out[i] = __bfloat162float(__float2bfloat16_rn(activation_at(x, up, i)));
        }
    } else {
        constexpr int BLOCK = MODE == MEMRA_CUDA_ROUND_Q8_K ? 256 : 32;
        const int lane = threadIdx.x & 31;
        const int64_t blocks = count / BLOCK;
        const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
        /* The loop's trip count depends on the warp only: every lane takes part in each shuffle. */
        for (int64_t b = blockIdx.x * (int64_t)(blockDim.x / 32) + (threadIdx.x >> 5); b < blocks; b += warps) {
            round_block<MODE, CODES>(b, lane, out, corrections, x, codes, scales, up);
        }
    }
}

/* out[r, o] += Σ_b m(o, b) · corrections[r, b] for q4_1 / q5_1 weights (offset m at byte 2 of each
 * block): ggml multiplies the weight's offset with the activation block's rounded sum s, not with
 * the sum of the rounded values. One thread per output, grid-stride. */
static __global__ void offset_correction_kernel(float * __restrict__ out, const float * __restrict__ corrections, const uint8_t * __restrict__ weight,
                                         int64_t row_bytes, int64_t block_bytes, int64_t rows, int64_t blocks, int64_t n_out) {
    memra_grid_dependencies();
    const int64_t total = rows * n_out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / n_out, o = i % n_out;
        const uint8_t * w = weight + o * row_bytes + 2;
        const float * c = corrections + r * blocks;
        float sum = 0.0f;
        for (int64_t b = 0; b < blocks; b++) sum += __fmul_rn(half_at(w + b * block_bytes), c[b]);
        out[i] += sum;
    }
}

/* The byte of a group of 8 file blocks that byte o of its repacked group is (launch-plan.h's
 * layouts): q8_0_x8 (TYPE q8_0), q4_0_x8 (q4_0), q6_K_x8 (q6_K). */
template <int TYPE>
__device__ __forceinline__ int repacked_source(int o);
template <>
__device__ __forceinline__ int repacked_source<MEMRA_CUDA_TYPE_Q8_0>(int o) { return q8_0_x8::source(o); }
template <>
__device__ __forceinline__ int repacked_source<MEMRA_CUDA_TYPE_Q4_0>(int o) { return q4_0_x8::source(o); }
template <>
__device__ __forceinline__ int repacked_source<MEMRA_CUDA_TYPE_Q6_K>(int o) {
    if (o < 16) return 210 * (o >> 1) + 208 + (o & 1);                 /* d */
    if (o < 144) return 210 * ((o - 16) >> 4) + 192 + ((o - 16) & 15); /* scales */
    if (o < 1168) return 210 * ((o - 144) >> 7) + ((o - 144) & 127);   /* ql */
    return 210 * ((o - 1168) >> 6) + 128 + ((o - 1168) & 63);          /* qh */
}

/* repack_kernel<TYPE>: `groups` groups of 8 blocks of TYPE (GROUP bytes each, 16-byte aligned)
 * rewritten in place into the repacked layout: one warp a group, the whole group read into shared
 * memory before any of it is written. Grid-stride over the groups. */
template <int TYPE, int GROUP>
__global__ void __launch_bounds__(256) repack_kernel(uint8_t * __restrict__ data, int64_t groups) {
    memra_grid_dependencies();
    static_assert(GROUP % 16 == 0, "whole 16-byte words");
    constexpr int WORDS = GROUP / 4;
    __shared__ __align__(16) uint32_t staged[8][WORDS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint8_t * bytes = reinterpret_cast<const uint8_t *>(staged[warp]);
    for (int64_t g = blockIdx.x * 8LL + warp; g < groups; g += gridDim.x * 8LL) { /* the warp's trip count */
        uint32_t * words = reinterpret_cast<uint32_t *>(data + g * GROUP);
        for (int i = lane; i < WORDS; i += 32) staged[warp][i] = words[i];
        __syncwarp();
        for (int i = lane; i < WORDS; i += 32) {
            uint32_t v = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) v |= (uint32_t)bytes[repacked_source<TYPE>(4 * i + k)] << (8 * k);
            words[i] = v;
        }
        __syncwarp(); /* every lane has read the staged group before the next is staged */
    }
}

}  // namespace memra_cuda_kernels
