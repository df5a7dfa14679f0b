/*
 * launch-plan.h — every launch decision of libmemra_cuda as plain host arithmetic: ggml block
 * layouts, grid and block sizes, shared-memory and workspace sizes, tile choices, and the
 * bookkeeping of the caching allocator and of the staging arena. No CUDA here: this file and
 * launch-plan.c compile with the system C/C++ compiler alone, so the launch logic is unit-tested
 * on machines without a GPU (native/cuda/tests/test-launch-plan.c).
 */
#ifndef MEMRA_CUDA_LAUNCH_PLAN_H
#define MEMRA_CUDA_LAUNCH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ggml type ids (ggml.h enum ggml_type). */
enum {
    MEMRA_CUDA_TYPE_F32 = 0,
    MEMRA_CUDA_TYPE_F16 = 1,
    MEMRA_CUDA_TYPE_Q4_0 = 2,
    MEMRA_CUDA_TYPE_Q4_1 = 3,
    MEMRA_CUDA_TYPE_Q5_0 = 6,
    MEMRA_CUDA_TYPE_Q5_1 = 7,
    MEMRA_CUDA_TYPE_Q8_0 = 8,
    MEMRA_CUDA_TYPE_Q2_K = 10,
    MEMRA_CUDA_TYPE_Q3_K = 11,
    MEMRA_CUDA_TYPE_Q4_K = 12,
    MEMRA_CUDA_TYPE_Q5_K = 13,
    MEMRA_CUDA_TYPE_Q6_K = 14,
    MEMRA_CUDA_TYPE_IQ2_XXS = 16,
    MEMRA_CUDA_TYPE_IQ2_XS = 17,
    MEMRA_CUDA_TYPE_IQ3_XXS = 18,
    MEMRA_CUDA_TYPE_IQ1_S = 19,
    MEMRA_CUDA_TYPE_IQ4_NL = 20,
    MEMRA_CUDA_TYPE_IQ3_S = 21,
    MEMRA_CUDA_TYPE_IQ2_S = 22,
    MEMRA_CUDA_TYPE_IQ4_XS = 23,
    MEMRA_CUDA_TYPE_IQ1_M = 29,
    MEMRA_CUDA_TYPE_BF16 = 30,
    /* Not ggml types: rows repacked on the device (memra_cuda_repack) in groups of 8 blocks, each
     * group the same bytes as its 8 blocks with their parts gathered (first the scales, then the
     * codes), so that the codes are 8- and 16-byte aligned where the file's blocks are only 2-byte
     * aligned. A row keeps its bytes; the values and every kernel's arithmetic are the file type's.
     * q8_0_x8 (rows of 256k values): a 272-byte group is the 8 blocks' f16 scales (16 bytes), then
     * their 8 × 32 codes: block b's scale at (b / 8) · 272 + 2 · (b % 8), its codes at
     * (b / 8) · 272 + 16 + 32 · (b % 8). */
    MEMRA_CUDA_TYPE_Q8_0_X8 = 200,
    /* q6_K_x8 (rows of 2,048k values): a 1,680-byte group is the 8 blocks' f16 d (16 bytes), their
     * 8 × 16 int8 scales (at 16), 8 × 128 ql bytes (at 144) and 8 × 64 qh bytes (at 1,168), each
     * block's part as in its block. */
    MEMRA_CUDA_TYPE_Q6_K_X8 = 201,
    /* q4_0_x8 (rows of 256k values): a 144-byte group is the 8 blocks' f16 scales (16 bytes), then
     * their 8 × 16 nibble bytes (at 16 + 16 k, each block's as in its block). */
    MEMRA_CUDA_TYPE_Q4_0_X8 = 202,
};

/* 1 for q8_0 and its repacked layout (the same values, activation rounding and kernels). */
int memra_cuda_type_is_q8_0(int type);
/* The layout memra_cuda_repack rewrites rows of n values of `type` into: q8_0_x8 and q4_0_x8 for
 * q8_0 and q4_0 rows of 256k values, q6_K_x8 for q6_K rows of 2,048k; `type` itself where there
 * is none. */
int memra_cuda_repacked_type(int type, int64_t n);

/* Values per block and bytes per block of a weight type this library has kernels for; 0 for others. */
int64_t memra_cuda_type_block_values(int type);
int64_t memra_cuda_type_block_bytes(int type);
/* 1 when the matmul, embedding and dequantize kernels handle `type`. */
int memra_cuda_weight_type_supported(int type);
/* Bytes of one row of n values of `type` (n a multiple of the block size); 0 when not. */
int64_t memra_cuda_row_bytes(int type, int64_t n);
/* Bytes of one KV slot of `width` values: f32 (0), f16 (1), q8_0 (8, width a multiple of 32); 0 otherwise. */
int64_t memra_cuda_kv_row_bytes(int type, int64_t width);

/* Largest grid.y / grid.z, and grid.x of these kernels (grid-stride loops cover the rest). */
#define MEMRA_CUDA_MAX_GRID_YZ 65535
#define MEMRA_CUDA_MAX_GRID_X 2147483647LL
/* Values every thread of the matrix kernels dequantizes at once (one 16-byte f16 store). */
#define MEMRA_CUDA_GROUP_VALUES 8

typedef struct memra_cuda_launch {
    int64_t grid_x, grid_y, grid_z;
    int32_t threads;
    int32_t shared_bytes; /* dynamic shared memory */
} memra_cuda_launch;

/* ---- matmul ---- */
enum memra_cuda_matmul_kernel { MEMRA_CUDA_MATMUL_NONE = 0, MEMRA_CUDA_MATMUL_VECTOR = 1, MEMRA_CUDA_MATMUL_GEMM = 2 };

/* Matrix-vector kernel: one warp per output feature, MEMRA_CUDA_MMV_WARPS warps per block, up to
 * MEMRA_CUDA_MMV_MAX_ROWS activation rows per launch (more rows: several launches). */
#define MEMRA_CUDA_MMV_WARPS 4
/* Matrices of one type and one input a matrix-vector launch covers together (Q, K, V). */
#define MEMRA_CUDA_MMV_SEGMENTS 3
#define MEMRA_CUDA_MMV_MAX_ROWS 8
/* Split rows (the decode matrix-vector kernels): where a launch has too few output features to keep
 * the GPU's memory busy with one warp each, `split` warps (2 or 4) of a block share a row, warp p of
 * the row taking its iterations p, p + split, ... (an iteration: the weights a warp loads together,
 * q8_0's STEPS × 8 blocks of 32 inputs, the other kernels' 32 lanes × UNROLL groups of 8), and add
 * their partial sums in shared memory in warp order. Each
 * doubling of the split needs another iteration for the new warps to take, and keeps the launch's
 * warps (output features × split) at or under SPLIT_WARPS_PER_SM per multiprocessor: a
 * Qwen3-0.6B-shaped down projection (1,024 features of 3,072 inputs, 3 iterations of 1,024) is
 * split 4 ways on 132 multiprocessors, its O projection (2,048 inputs) 2 ways, an 8B shape's O and
 * down projections (4,096 features) 2 ways, its Q/K/V, gate/up and LM head (6,144 features and
 * more) not at all. 64 a multiprocessor, not 32: on the H200 (bench/device/mmv-lab.cu, 2026-12-04)
 * 4,096 features of 12,288 inputs read their weights at 3.4 TB/s split 2 ways, 2.5 unsplit, and
 * 4,096 of 4,096 at 2.7 against 2.3. */
#define MEMRA_CUDA_MMV_SPLIT_WARPS_PER_SM 64
/* Norms rounded to q8_0 codes for at most this many rows (decode batches) keep each row's values in
 * registers from load to rounding (norm_round_kernel's REGISTERS form); more rows (prefill) take the
 * form with fewer registers a thread, for occupancy. */
#define MEMRA_CUDA_NORM_REGISTER_ROWS 64
/* Gate/up decode with SwiGLU and the down projection's q8_0 rounding in the matrix-vector kernel
 * (memra_cuda_norm_swiglu_matmul): one counter per 32 features of the FFN, so FFN widths up to
 * 32 · MEMRA_CUDA_SWIGLU_COUNTERS. */
#define MEMRA_CUDA_SWIGLU_COUNTERS 8192
/* Tensor-core GEMM tile: TILE_M activation rows × TILE_N output features × TILE_K inputs per step,
 * 4 warps in a 2 × 2 arrangement, each 32 × 32 (2 × 4 m16n8k16 tiles). Rows of the shared tiles are
 * padded by 8 halves (16 bytes) so that fragment loads hit 32 distinct banks. */
#define MEMRA_CUDA_GEMM_TILE_M 64
#define MEMRA_CUDA_GEMM_TILE_N 64
#define MEMRA_CUDA_GEMM_TILE_K 32
#define MEMRA_CUDA_GEMM_THREADS 128
#define MEMRA_CUDA_GEMM_PAD 8
/* Rows from which the GEMM is used instead of the matrix-vector kernel. */
#define MEMRA_CUDA_GEMM_MIN_ROWS 9
/* Split-K where a GEMM launch has fewer output tiles than TARGET_BLOCKS: grid z parts of the
 * inputs (whole TILE_K steps, at most MAX_SPLITS), summed afterwards in part order. */
#define MEMRA_CUDA_GEMM_TARGET_BLOCKS 264
#define MEMRA_CUDA_GEMM_MAX_SPLITS 16

typedef struct memra_cuda_matmul_plan {
    int kernel;            /* enum memra_cuda_matmul_kernel */
    memra_cuda_launch launch;
    int64_t rows_per_launch; /* activation rows one launch covers (grid covers them all for GEMM) */
    int64_t launches;
} memra_cuda_matmul_plan;

/* 0 and the plan, or a status (memra_cuda.h) with a message in `message` (message_bytes long). */
int memra_cuda_plan_matmul_for(int type, int64_t rows, int64_t n_in, int64_t n_out, memra_cuda_matmul_plan * plan, char * message,
                               size_t message_bytes);
/* The same with the tensor-core GEMM allowed or not (MEMRA_CUDA_GEMM=0: the matrix-vector kernel
 * for every row count, exact f32 products of the rounded activations). */
int memra_cuda_plan_matmul_with(int type, int64_t rows, int64_t n_in, int64_t n_out, int allow_gemm, memra_cuda_matmul_plan * plan, char * message,
                                size_t message_bytes);
/* Warps per output feature (1, 2 or 4) of a matrix-vector launch of `features` output
 * features (all its segments) over `blocks` 32-value blocks per row, `iteration_blocks` blocks per
 * warp iteration, on `multiprocessors` SMs. `forced` (MEMRA_CUDA_MMV_SPLIT: 1, 2 or 4) overrides the
 * rule above; 0: the rule. */
int32_t memra_cuda_plan_mmv_split(int64_t features, int64_t blocks, int64_t iteration_blocks, int32_t multiprocessors, int32_t forced);

/* Inputs of one split-K part of a GEMM plan (grid_z parts; a multiple of MEMRA_CUDA_GEMM_TILE_K). */
int64_t memra_cuda_gemm_split_inputs(const memra_cuda_matmul_plan * plan, int64_t n_in);

/* Int8 tensor-core GEMM (gemm_int8_kernel, kernels/matmul.cuh) for prefill of weights whose codes
 * are int8 with one scale per 32 values (q8_0, q4_0, q5_0), times the activations' q8_0 codes:
 * mma.sync m16n8k32 s8 → s32, one 32-value block per k-step. TILE_M activation rows × TILE_N output
 * features per block of 8 warps (2 × 4, each 64 × 32), TILE_K = 2 blocks per shared-memory stage,
 * 2 stages (the next k-tile's global loads are in flight while the tensor cores work on the
 * current one). Shared memory is static: 2 stages × (int8 A and B tiles + f32 block scales). */
#define MEMRA_CUDA_INT8_GEMM_TILE_M 128
#define MEMRA_CUDA_INT8_GEMM_TILE_N 128
#define MEMRA_CUDA_INT8_GEMM_TILE_K 64
#define MEMRA_CUDA_INT8_GEMM_THREADS 256
#define MEMRA_CUDA_INT8_GEMM_STAGES 2
/* Split-K by waves: with `slots` blocks running at once (the SMs × the kernel's blocks an SM), grid z
 * parts of the k-tiles (at most MAX_SPLITS) such that waves × k-tiles a block is least: a launch of
 * fewer tiles than slots is split to fill them, and one of a little more than a wave (288 tiles on
 * 264 slots: 2 waves of which the second is 9% full) is split so that its last wave is fuller.
 * DEFAULT_SLOTS (an H100's or H200's 132 SMs, one block each) where no device is known. */
#define MEMRA_CUDA_INT8_GEMM_DEFAULT_SLOTS 132
#define MEMRA_CUDA_INT8_GEMM_MAX_SPLITS 16
/* The pipelined int8 GEMM (gemm_int8_pipe_kernel, q8_0_x8 weights; MEMRA_CUDA_INT8_PIPELINE=1): the
 * same 128 × 128 tiles and plan (split-K parts of whole 64-input k-tiles, so the same blocks per
 * output in the same order, the same bits), its k-tiles PIPE_BLOCKS 32-value blocks wide, brought
 * by cp.async PIPE_STAGES deep into dynamic shared memory: per stage 128 bytes of codes per
 * activation row and weight row, 4 f32 activation scales per row, 4 f16 weight scales per row. */
#define MEMRA_CUDA_INT8_PIPE_BLOCKS 4
#define MEMRA_CUDA_INT8_PIPE_STAGES 4
/* Launches of at most this many rows run gemm_int8_pipe_kernel<64> (64-row tiles; the same grid). */
#define MEMRA_CUDA_INT8_PIPE_SMALL_ROWS 64
/* Dynamic shared bytes of one block of gemm_int8_pipe_kernel<tile_m> (all stages; over 48 KiB: opt-in). */
int32_t memra_cuda_int8_pipe_shared_bytes(int32_t tile_m);
/* 1 for the weight types gemm_int8_kernel handles (q8_0, q4_0, q5_0). */
int memra_cuda_int8_gemm_supports(int type);
/* Shared bytes of one block of gemm_int8_kernel (all stages). */
int32_t memra_cuda_int8_gemm_shared_bytes(void);
/* The int8 GEMM's plan for rows × n_in inputs and n_out outputs (rows ≥ 1, n_in a multiple of 32)
 * on a device that runs `slots` of its blocks at once (≤ 0: DEFAULT_SLOTS): ceil(n_out / TILE_N) ×
 * ceil(rows / TILE_M) blocks, at most MEMRA_CUDA_MAX_GRID_YZ row tiles per launch (more rows:
 * several launches), × grid_z split-K parts of ceil(k-tiles / grid_z) k-tiles each (none empty).
 * 0, or a status with a message. */
int memra_cuda_plan_int8_gemm(int type, int64_t rows, int64_t n_in, int64_t n_out, int64_t slots, memra_cuda_matmul_plan * plan, char * message,
                              size_t message_bytes);
/* K-tiles of one split-K part of an int8 GEMM plan over n_in inputs. */
int64_t memra_cuda_int8_gemm_split_tiles(const memra_cuda_matmul_plan * plan, int64_t n_in);

/* ---- activation rounding (as ggml's CPU matmul rounds activations to the weight's vec_dot_type) ---- */
enum memra_cuda_rounding {
    MEMRA_CUDA_ROUND_NONE = 0, /* f32 weights */
    MEMRA_CUDA_ROUND_Q8_0 = 1, /* q4_0, q5_0, q8_0: per 32 values d = f16(max|x| / 127), q = rint(x · 127 / max|x|) */
    MEMRA_CUDA_ROUND_Q8_1 = 2, /* q4_1, q5_1: the q8_0 values, and per block f16(d · Σq) − d16 · Σq for the weight's offset m */
    MEMRA_CUDA_ROUND_Q8_K = 3, /* K-quants: per 256 values iscale = −127 / x_maxabs, q = min(127, rint(iscale · x)), d = 1 / iscale */
    MEMRA_CUDA_ROUND_F16 = 4,
    MEMRA_CUDA_ROUND_BF16 = 5,
};
/* The rounding of activations multiplied with weights of `type`. */
int memra_cuda_activation_rounding(int type);
/* Values per rounding block (32 or 256; 1 for f16/bf16/none). */
int64_t memra_cuda_rounding_block(int rounding);
/* The rounding kernel over rows × n_in values: one warp per block of q8_0/q8_1/q8_K (4 warps per
 * thread block, grid-stride past the cap), elementwise for f16/bf16. */
memra_cuda_launch memra_cuda_plan_rounding(int rounding, int64_t rows, int64_t n_in);

/* Static shared bytes of the GEMM tiles (A and B, f16, padded). */
int32_t memra_cuda_gemm_shared_bytes(void);

/* ---- row and elementwise kernels ---- */
/* Elementwise over `count` items: 256 threads, grid capped (grid-stride loop). */
memra_cuda_launch memra_cuda_plan_elementwise(int64_t count);
/* One block per row (grid-stride over rows past the cap), threads a multiple of 32 fitted to width. */
memra_cuda_launch memra_cuda_plan_rows(int64_t rows, int64_t width);
/* Embedding / dequantize: one thread per 8-value group. */
memra_cuda_launch memra_cuda_plan_groups(int64_t groups);
/* KV write: one warp per 32 values of a row (q8_0 blocks), rows in grid.y (grid-stride past the cap). */
memra_cuda_launch memra_cuda_plan_kv_write(int64_t count, int64_t width);
/* KV rotate (the context shift's K shift): one block of 128 threads per row (grid-stride past the
 * cap), the row in width floats of shared memory. */
memra_cuda_launch memra_cuda_plan_kv_rotate(int64_t count, int64_t width);

/* ---- attention ---- */
/* paged_attention_kernel: a block of MEMRA_CUDA_ATTENTION_WARPS warps per (query row, head, split)
 * (grid x, y, z); each lane holds head_dim / 32 values of q and of the output; a warp takes
 * MEMRA_CUDA_ATTENTION_KEYS consecutive positions at a time. The splits (grid_z) depend on rows and
 * heads only: enough blocks for MEMRA_CUDA_ATTENTION_TARGET_BLOCKS, at most
 * MEMRA_CUDA_ATTENTION_MAX_SPLITS; more than one needs memra_cuda_attention_partial_bytes of
 * workspace and a counter per (row, head): the last split to finish merges them. */
#define MEMRA_CUDA_ATTENTION_MAX_HEAD_DIM 256
#define MEMRA_CUDA_ATTENTION_WARPS 4
#define MEMRA_CUDA_ATTENTION_KEYS 4
#define MEMRA_CUDA_ATTENTION_TARGET_BLOCKS 2048
#define MEMRA_CUDA_ATTENTION_MAX_SPLITS 32
/* The context's split counters (one int per (row, head) pair): a launch has several splits only
 * when its pairs are fewer than MEMRA_CUDA_ATTENTION_TARGET_BLOCKS, so that many always suffice. */
#define MEMRA_CUDA_ATTENTION_COUNTERS MEMRA_CUDA_ATTENTION_TARGET_BLOCKS
int memra_cuda_plan_attention(int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, memra_cuda_launch * launch, char * message,
                              size_t message_bytes);
/* Bytes of the splits' partial states ((max, sum, head_dim values) per row, head and split). */
int64_t memra_cuda_attention_partial_bytes(const memra_cuda_launch * launch, int64_t head_dim);

/* Flash-style prefill attention (f16 KV, head_dim 64 or 128): a block of 4 warps takes a tile of
 * up to 64 query rows of one sequence (16 per warp) and one head, and walks the sequence's KV
 * positions 32 at a time through shared memory with tensor-core products. Used from
 * MEMRA_CUDA_FLASH_MIN_ROWS query rows in a call. */
#define MEMRA_CUDA_FLASH_ROWS 64
#define MEMRA_CUDA_FLASH_KV 32
#define MEMRA_CUDA_FLASH_THREADS 128
#define MEMRA_CUDA_FLASH_MIN_ROWS 16
/* 1 when the flash kernel serves this attention call: f16 KV, head_dim 64 or 128, and a sequence
 * of at least MEMRA_CUDA_FLASH_MIN_ROWS query rows (`longest`): a batch of single-row decode
 * sequences stays on the warp kernel, whose one warp per row wastes nothing. */
int memra_cuda_flash_attention_applies(int kv_type, int64_t head_dim, int64_t longest);
/* The query tiles of a call: for each sequence (sequences as memra_cuda_paged_attention takes
 * them), ceil(rows / 64) tiles of (sequence index, first query row, row count) written to `tiles`
 * (3 int32 each, `capacity` tiles at most). Returns the number of tiles, or -1 when they do not fit. */
int64_t memra_cuda_flash_tiles(const int32_t * sequences, int64_t sequence_count, int32_t * tiles, int64_t capacity);

/* ---- MoE routing ---- */
#define MEMRA_CUDA_MOE_MAX_K 64
#define MEMRA_CUDA_MOE_MAX_EXPERTS 1024
/* One warp per row; the row's probabilities in shared memory (experts floats per warp). */
int memra_cuda_plan_moe_route(int64_t rows, int64_t experts, int64_t k, memra_cuda_launch * launch, char * message, size_t message_bytes);

/* Many rows (prefill, large decode batches): memra_cuda_moe_experts sorts the (row, expert) pairs
 * by expert on the device and runs each projection as one grouped GEMM whose blocks take tiles of
 * one expert's rows (moe_group_kernel writes the tile table), so that an expert's matrix is read
 * once per tile of its rows instead of once per pair. Chosen when the pairs are at least twice
 * the experts (on average two or more rows per expert; below that, one matrix-vector product per
 * pair reads no more weights) and at least MEMRA_CUDA_GEMM_MIN_ROWS. */
int memra_cuda_moe_grouped(int64_t rows, int64_t experts, int64_t k);
/* Most tiles of tile_rows rows the pairs, grouped by expert, can need: Σ ceil(count_e / tile_rows)
 * over the experts with rows is at most floor(pairs / tile_rows) + min(experts, pairs), and at
 * most pairs. The grouped GEMM's grid has this many row tiles; blocks past the used ones exit. */
int64_t memra_cuda_moe_tile_bound(int64_t pairs, int64_t experts, int64_t tile_rows);
/* moe_group_kernel: one block; per-expert counts and cursors in shared memory (2 · experts int32). */
#define MEMRA_CUDA_MOE_GROUP_THREADS 1024
memra_cuda_launch memra_cuda_plan_moe_group(int64_t experts);

/* ---- caching allocator bookkeeping ---- */
/* The size class of a request: 512-byte steps below 1 MiB, 2 MiB steps above. */
int64_t memra_cuda_allocation_class(int64_t bytes);

typedef struct memra_cuda_cached_block {
    void * pointer;
    int64_t bytes; /* its size class */
} memra_cuda_cached_block;

typedef struct memra_cuda_block_cache {
    memra_cuda_cached_block * blocks; /* unused allocations, any order */
    int64_t count, capacity;
    int64_t cached_bytes;
} memra_cuda_block_cache;

/* A cached block of exactly size class `bytes` (removed from the cache), or NULL. */
void * memra_cuda_cache_take(memra_cuda_block_cache * cache, int64_t bytes);
/* Adds an unused block; 0, or -1 when the list cannot grow (the caller frees the block instead). */
int memra_cuda_cache_put(memra_cuda_block_cache * cache, void * pointer, int64_t bytes);
/* Removes and returns any block (for releasing the cache), or NULL when empty. */
void * memra_cuda_cache_pop(memra_cuda_block_cache * cache, int64_t * bytes);
void memra_cuda_cache_dispose(memra_cuda_block_cache * cache);

/* ---- staging arena (host index arrays → device, reset at stream synchronisation) ---- */
#define MEMRA_CUDA_ARENA_ALIGNMENT 256
typedef struct memra_cuda_arena {
    int64_t capacity; /* bytes of both the pinned host and the device ring */
    int64_t used;
} memra_cuda_arena;

enum memra_cuda_arena_result {
    MEMRA_CUDA_ARENA_FITS = 0,       /* *offset is where the bytes go */
    MEMRA_CUDA_ARENA_SYNCHRONIZE = 1, /* full: wait for the stream, memra_cuda_arena_reset, try again */
    MEMRA_CUDA_ARENA_GROW = 2,       /* larger than the capacity: wait, grow to *offset bytes, try again */
};
int memra_cuda_arena_reserve(memra_cuda_arena * arena, int64_t bytes, int64_t * offset);
void memra_cuda_arena_reset(memra_cuda_arena * arena);

/* ---- upload staging: chunks of a host→device copy through two pinned halves ---- */
/* The number of chunks of `chunk_bytes` a copy of `bytes` takes. */
int64_t memra_cuda_staging_chunks(int64_t bytes, int64_t chunk_bytes);

/* ---- graphs ---- */
/* The pinned and device buffers a captured graph's inputs share (graph.cu): inputs that fit are
 * copied before each replay in one copy; the rest get buffers and a copy node of their own. */
#define MEMRA_CUDA_GRAPH_INPUT_BYTES (256 * 1024)

/* ---- sampling ---- */
/* argmax_rows_kernel and log_softmax_partial_kernel: blocks of MEMRA_CUDA_ARGMAX_THREADS, each
 * thread MEMRA_CUDA_ARGMAX_VALUES of a chunk of MEMRA_CUDA_ARGMAX_CHUNK values; grid x: a row's
 * chunks, grid y: rows up to the grid limit (blocks stride over rows beyond it). Both plans fail
 * for columns outside 1..INT32_MAX (the index is an int32). */
#define MEMRA_CUDA_ARGMAX_THREADS 256
#define MEMRA_CUDA_ARGMAX_VALUES 16
#define MEMRA_CUDA_ARGMAX_CHUNK (MEMRA_CUDA_ARGMAX_THREADS * MEMRA_CUDA_ARGMAX_VALUES)
int memra_cuda_plan_argmax(int64_t rows, int64_t columns, memra_cuda_launch * launch, char * message, size_t message_bytes);
/* launch[0]: log_softmax_partial_kernel (the argmax's launch, [rows, grid x] partials);
 * launch[1]: log_softmax_combine_kernel, one warp per row (grid-stride beyond the grid limit). */
int memra_cuda_plan_log_softmax(int64_t rows, int64_t columns, memra_cuda_launch launch[2], char * message, size_t message_bytes);

/* top_k_sort_kernel (memra_cuda_top_k_rows): bitonic sorts of at most MEMRA_CUDA_TOP_K_SORT 64-bit
 * keys (value order, then index) in shared memory. Pass 0 sorts chunks of each row's values and
 * keeps every chunk's best k keys (a list); each later pass sorts groups of up to
 * MEMRA_CUDA_TOP_K_SORT / k lists and keeps their best k, until one list per row is left; the last
 * pass writes indices and values instead of keys. k at most MEMRA_CUDA_TOP_K_MAX, so that a group
 * holds at least 4 lists (a row of 2^31 values takes at most 11 passes). */
#define MEMRA_CUDA_TOP_K_SORT 4096
#define MEMRA_CUDA_TOP_K_MAX 1024
#define MEMRA_CUDA_TOP_K_MAX_THREADS 512
#define MEMRA_CUDA_TOP_K_MAX_PASSES 16

typedef struct memra_cuda_top_k_plan {
    int passes;
    /* Per pass: lists each row has after it (1 after the last), inputs each block sorts (values
     * in pass 0, lists later), the sort's size (a power of two holding them, in keys) and the launch
     * (grid x = lists after the pass, grid y = rows up to the grid limit; blocks stride over rows). */
    int64_t lists[MEMRA_CUDA_TOP_K_MAX_PASSES];
    int64_t inputs[MEMRA_CUDA_TOP_K_MAX_PASSES];
    int32_t sort_size[MEMRA_CUDA_TOP_K_MAX_PASSES];
    memra_cuda_launch launch[MEMRA_CUDA_TOP_K_MAX_PASSES];
    /* Keys of the two workspace buffers passes write their lists to (pass p to buffer p % 2; the
     * last pass writes none). */
    int64_t buffer_keys[2];
} memra_cuda_top_k_plan;

/* Fails for columns outside 1..INT32_MAX, k outside 1..min(columns, MEMRA_CUDA_TOP_K_MAX), or a
 * workspace whose size overflows. */
int memra_cuda_plan_top_k(int64_t rows, int64_t columns, int64_t k, memra_cuda_top_k_plan * plan, char * message, size_t message_bytes);

#ifdef __cplusplus
}
#endif

#endif
