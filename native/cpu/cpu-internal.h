/*
 * Declarations shared by the files of native/cpu (not part of the C ABI, see memra.h).
 * Op files hold kernels that trust their arguments; exports.c checks every argument first.
 */
#ifndef MEMRA_CPU_INTERNAL_H
#define MEMRA_CPU_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memra.h"
#include "quant-dot.h"

#define MEMRA_VERSION_STRING "0.1.0"

/* Largest head dimension rope and attention accept (they keep per-head arrays on the stack). */
#define MEMRA_MAX_HEAD_DIM 1024

/* ---- error.c ---- */

/* Records a printf-style message for memra_last_error() and returns `status`. */
int memra_fail(int status, const char * format, ...) __attribute__((format(printf, 2, 3)));
/* The ggml name of a type id ("q8_0"), or "type <id>" for an unknown one (thread-local buffer). */
const char * memra_type_name(int type);

/* ---- thread-pool.c ---- */

typedef struct memra_pool memra_pool;
/* One chunk of a run's work. `thread_index` (0 = the calling thread, < memra_pool_threads) is unique
 * among the threads of a run at any moment: use it to pick per-thread scratch. */
typedef void (*memra_task)(void * argument, int64_t chunk, int thread_index);

/* NULL on failure, with the message recorded. */
memra_pool * memra_pool_create(int threads);
void memra_pool_destroy(memra_pool * pool);
int memra_pool_threads(const memra_pool * pool);
/* Runs task for every chunk in [0, chunks), spread over the workers that show up, and returns when all are done. */
void memra_pool_run(memra_pool * pool, memra_task task, void * argument, int64_t chunks);
/* memra_pool_run, or the chunks in order on the calling thread when `parallel` is false. */
static inline void memra_run_chunks(memra_pool * pool, int parallel, memra_task task, void * argument, int64_t chunks) {
    if (parallel) {
        memra_pool_run(pool, task, argument, chunks);
    } else {
        for (int64_t chunk = 0; chunk < chunks; chunk++) task(argument, chunk, 0);
    }
}

/* ---- context (context.c) ---- */

struct memra_cpu {
    memra_pool * pool;
    int threads;
    /* memra_cpu_set_batch_invariant: GEMM kernels for every row count where a type has them. */
    int batch_invariant;
    /* Activation rows converted to a weight type's vec_dot_type, grown on demand (never shrunk). */
    void * converted;
    size_t converted_bytes;
    /* Attention scratch (scores and accumulators): `threads` rows of `scores_per_thread` floats, grown on demand. */
    float * scores;
    size_t scores_per_thread;
};

/* Makes cpu->converted at least `bytes` long (64-byte aligned). MEMRA_OK or MEMRA_ERROR_OUT_OF_MEMORY. */
int memra_cpu_reserve_converted(memra_cpu * cpu, size_t bytes);
/* Makes every thread's score row at least `count` floats. */
int memra_cpu_reserve_scores(memra_cpu * cpu, size_t count);

/* ---- half.h-like helpers (dequantize.c) ---- */

float memra_f16_to_f32(uint16_t h);
uint16_t memra_f32_to_f16(float f);
float memra_bf16_to_f32(uint16_t h);
uint16_t memra_f32_to_bf16(float f);

/* ---- dequantize.c ---- */

/* Values per block of `type` (1 for f32/f16/bf16), 0 when dequantize has no kernel for it. */
int64_t memra_dequantize_block_size(int type);
/* Bytes per block of `type`, 0 when unknown. */
size_t memra_dequantize_block_bytes(int type);
/* y[0..n) = dequantized x (n a multiple of the block size; type supported). */
void memra_dequantize_row(int type, const void * x, float * y, int64_t n);

/* ---- quantize-iq3.c ---- */

/* Builds the neighbour tables of `type`'s grid (MEMRA_TYPE_IQ3_XXS: 256 entries, else iq3_s's 512) once
 * (thread-safe); 0 when they could not be allocated. */
int memra_quantize_iq3_ready(int type);
/* One block of 256 values -> 98 bytes of iq3_xxs / 110 bytes of iq3_s, as ggml's quantize_iq3_xxs /
 * quantize_iq3_s; importance: the block's 256 weights (its part of the row's imatrix entry), or NULL
 * (memra_quantize_iq3_ready(type) must have returned 1). */
void memra_quantize_iq3_xxs(const float * x, uint8_t * y, const float * importance);
void memra_quantize_iq3_s(const float * x, uint8_t * y, const float * importance);

/* ---- quantize-iq2.c, quantize-iq1.c ---- */

/* ggml's iq2xs_init_impl / iq3xs_init_impl search tables of one grid: an iq2 grid's (256: iq2_xxs, 512: iq2_xs,
 * 1024: iq2_s, 2048: iq1_s and iq1_m) entries have 8 levels 0..2, an iq3 grid's (256: iq3_xxs, 512: iq3_s) 4 levels 0..7. */
typedef struct {
    int grid_size;
    const uint8_t * levels;      /* [grid_size * 8 or 4]: each entry's levels */
    const int32_t * map;         /* [65536 or 4096]: level pattern (2 or 3 bits a value) -> grid index, or -(offset + 1) of its neighbour list */
    const uint16_t * neighbours; /* lists: a count, then that many grid indices */
} memra_iq_grid_tables;

/* The tables of an iq2 grid, built once (thread-safe); NULL when they could not be allocated. */
const memra_iq_grid_tables * memra_iq2_grid_tables_get(int grid_size);
/* Builds the tables `type` (iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m) searches; 0 when they could not be allocated or another type. */
int memra_quantize_iq2_ready(int type);
/* One row of n_per_row values (a multiple of 256) -> its blocks, as ggml's quantize_iq2_xxs etc. with
 * `importance` the row's importance (n_per_row values; NULL allowed for iq2_s and iq1_m only).
 * memra_quantize_iq2_ready(type) must have returned 1. */
void memra_quantize_iq2_xxs_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance);
void memra_quantize_iq2_xs_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance);
void memra_quantize_iq2_s_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance);
void memra_quantize_iq1_s_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance);
void memra_quantize_iq1_m_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance);

/* ---- quantize.c ---- */

/* ggml's make_qp_quants: a scale for n non-negative values with levels L in [0, nmax] (as uint8_t: a
 * negative level wraps), judged by the fit weighted with `weights`; 0 for an all-zero group. */
float memra_search_positive_scale(int n, int nmax, const float * x, uint8_t * L, const float * weights);

/* Bytes per block of `type` memra_quantize_blocks or memra_quantize_row writes (k-quants, the 32-value block types, iq4_nl, iq4_xs,
 * iq3_s, iq3_xxs, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m), 0 for any other type. */
size_t memra_quantize_block_bytes(int type);
/* Values per block of `type` (memra_dequantize_block_size). */
int64_t memra_quantize_block_values(int type);
/* Whether ggml quantizes `type` only with an importance matrix (ggml_quantize_requires_imatrix). */
int memra_quantize_requires_importance(int type);
/* y = `blocks` blocks of x (memra_quantize_block_values each) quantized to `type` (memra_quantize_block_bytes > 0)
 * without an importance matrix. */
void memra_quantize_blocks(int type, const float * x, uint8_t * y, int64_t blocks);
/* y = one row of n_per_row values (a whole number of blocks) quantized to `type` as ggml's
 * quantize_<type>(x, y, 1, n_per_row, importance): importance NULL (memra_quantize_blocks) or n_per_row
 * weights (the quantize_row_*_impl functions; q8_0 ignores them). Rows are independent. */
void memra_quantize_row(int type, const float * x, uint8_t * y, int64_t n_per_row, const float * importance);

/* ---- kernels (one file per op family) ---- */

void memra_matmul(memra_cpu * cpu, float * out, const float * x, int64_t rows, int type, const void * weight, int64_t n_in, int64_t n_out);
/* Bytes per activation row memra_matmul needs in cpu->converted (0: it reads x directly). */
size_t memra_matmul_scratch_row_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in);
/* All the bytes memra_matmul needs in cpu->converted, given activation_bytes = rows * scratch_row_bytes:
 * the rows, then (64-byte aligned) one unpacked-weight buffer per thread when its tiles use them. */
size_t memra_matmul_scratch_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in, size_t activation_bytes);
/* Bytes of a packed row when memra_matmul takes the GEMM path for this call, else 0. */
size_t memra_matmul_packed_row_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in);
void memra_embedding(float * out, int type, const void * table, int64_t width, const int32_t * ids, int64_t count);
void memra_rms_norm(memra_cpu * cpu, float * out, const float * x, const float * weight, int64_t rows, int64_t width, float eps);
/* RoPE scaling as ggml's rope_yarn (see rope.c). */
typedef struct {
    float freq_scale, ext_factor, magnitude, corr_low, corr_high;
} memra_rope_scaling;

void memra_rope_neox(memra_cpu * cpu, float * x, const int32_t * positions, int64_t rows, int64_t heads, int64_t head_dim, float freq_base,
                     const memra_rope_scaling * scaling);
/* Floats of per-thread scratch memra_attention needs when `visible` cache rows are visible at most. */
size_t memra_attention_scratch(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t visible);
void memra_attention(memra_cpu * cpu, float * out, const float * q, const float * keys, const float * values, int64_t rows, int64_t heads,
                     int64_t kv_heads, int64_t head_dim, int64_t first_row, float scale);
/* KV cache element types: the ggml type ids of f32, f16 and q8_0. */
enum { MEMRA_KV_F32 = 0, MEMRA_KV_F16 = 1, MEMRA_KV_Q8_0 = 8 };
/* Bytes of one stored row of `width` values of KV type `type`, 0 for another type (kv-cache.c). */
size_t memra_kv_row_bytes(int type, int64_t width);
/* Stores source rows [0, count) ([count, width] f32) at slots[i] of `storage`, converted to `type`. */
void memra_kv_write(int type, void * storage, int64_t width, const int32_t * slots, int64_t count, const float * source);
/* out[0, n) = n values of a stored row (n a multiple of 32 for q8_0, starting on a block). */
void memra_kv_read(int type, const void * row, float * out, int64_t n);
/* One sequence of a paged attention call (memra_cpu_paged_attention's `sequences`). */
typedef struct { int32_t query_row, rows, position, table_offset; } memra_attention_sequence;
/* Query rows of one sequence a paged attention task runs together. */
int64_t memra_paged_attention_tile_rows(void);
size_t memra_paged_attention_scratch(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t block_tokens, int64_t tile_rows, int64_t visible);
void memra_paged_attention(memra_cpu * cpu, float * out, const float * q, int type, const void * keys, const void * values, int64_t block_tokens,
                           const int32_t * block_tables, const memra_attention_sequence * sequences, int64_t sequence_count, int64_t heads,
                           int64_t kv_heads, int64_t head_dim, float scale, int64_t * tasks, int64_t task_count);
void memra_swiglu(memra_cpu * cpu, float * out, const float * gate, const float * up, int64_t length);
void memra_add(memra_cpu * cpu, float * out, const float * a, const float * b, int64_t length);
void memra_moe_route(int32_t * ids, float * weights, const float * logits, int64_t rows, int64_t experts, int64_t k);
void memra_gather_rows(float * out, const float * x, const int32_t * row_ids, int64_t count, int64_t width);
void memra_scatter_add_rows(float * out, const float * x, const int32_t * row_ids, const float * scales, int64_t count, int64_t width);

/*
 * Kernels whose loops the compiler vectorizes get one clone per x86 SIMD level, chosen at load time
 * (GCC/Clang target_clones over glibc's ifunc); elsewhere they are compiled once for the baseline.
 */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__))
#define MEMRA_VECTORIZED __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MEMRA_VECTORIZED
#endif

/*
 * e^x in f32 for loops the compiler vectorizes: Cody-Waite reduction by ln 2 and Cephes' expf
 * polynomial, scaled by 2^n through the exponent bits (no libm call, no branch). Within 2 ulp of
 * expf over [-87, 88]; inputs are clamped to that range (e^-87 stands in for 0, e^88 for overflow).
 */
static inline float memra_exp(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float shifted = x * 1.44269504088896341f + shifter;
    const float n = shifted - shifter;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { float f; uint32_t u; } shifted_bits = { shifted }, result = { p };
    result.u += (shifted_bits.u - 0x4b400000u) << 23; /* 0x4b400000: the bits of `shifter`; wraps for n < 0 */
    return result.f;
}

/* The range [begin, end) of chunk `chunk` when `count` items go in chunks of `per_chunk`. */
static inline void memra_chunk_range(int64_t count, int64_t per_chunk, int64_t chunk, int64_t * begin, int64_t * end) {
    *begin = chunk * per_chunk;
    *end = *begin + per_chunk < count ? *begin + per_chunk : count;
}

/* Chunks of `per_chunk` items needed for `count` items. */
static inline int64_t memra_chunk_count(int64_t count, int64_t per_chunk) {
    return (count + per_chunk - 1) / per_chunk;
}

#endif
