/*
 * memra.h — the whole C ABI of Memra's native CPU library (libmemra_cpu).
 *
 * Plain C functions over opaque handles; nothing here allocates on the caller's behalf except
 * memra_cpu_create. Every entry point that can fail returns an int status (MEMRA_OK = 0) and, on
 * failure, leaves a message naming the problem in memra_last_error() (thread-local, valid until
 * the next failing call on the same thread). No entry point aborts the process.
 *
 * Activations are f32, token-major: a buffer of `rows` rows of `width` values holds row r at
 * [r * width, (r + 1) * width). Every buffer argument comes with its length in elements, which the
 * library checks against the sizes the operation needs.
 *
 * Weights stay in ggml layout, wherever the caller keeps them (typically a pointer straight into
 * a memory-mapped GGUF file: zero copy). A weight matrix is described by its ggml type id (the
 * values of ggml.h's enum ggml_type), n_in (values per row, GGUF's ne0), n_out (rows, ne1) and,
 * for a 3-D weight, experts (ne2); weight_bytes is the size of the memory the pointer addresses,
 * checked against what the shape needs.
 *
 * Threads: a memra_cpu context owns a persistent thread pool (the calling thread is worker 0).
 * A context must not be used from two threads at once; distinct contexts are independent.
 */
#ifndef MEMRA_H
#define MEMRA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define MEMRA_API __declspec(dllexport)
#else
#define MEMRA_API __attribute__((visibility("default")))
#endif

/* Incremented on every incompatible change of this header. */
#define MEMRA_ABI_VERSION 1

/* ---- status codes ---- */
enum memra_status {
    MEMRA_OK = 0,
    MEMRA_ERROR_INVALID_ARGUMENT = 1, /* null pointer, negative or inconsistent size, buffer too short */
    MEMRA_ERROR_UNSUPPORTED_TYPE = 2, /* a ggml type the operation has no kernel for */
    MEMRA_ERROR_OUT_OF_RANGE = 3,     /* an index (token id, row id, expert) outside its table */
    MEMRA_ERROR_OUT_OF_MEMORY = 4,
    MEMRA_ERROR_THREAD = 5,           /* a worker thread could not be started */
};

/* ---- operations, for memra_cpu_supports ---- */
enum memra_op {
    MEMRA_OP_EMBEDDING = 0,
    MEMRA_OP_RMS_NORM = 1,
    MEMRA_OP_MATMUL = 2,
    MEMRA_OP_ROPE_NEOX = 3,
    MEMRA_OP_ATTENTION = 4,
    MEMRA_OP_SWIGLU = 5,
    MEMRA_OP_ADD = 6,
    MEMRA_OP_MOE_ROUTE = 7,
    MEMRA_OP_EXPERT_MATMUL = 8,
    MEMRA_OP_GATHER_ROWS = 9,
    MEMRA_OP_SCATTER_ADD_ROWS = 10,
    MEMRA_OP_COUNT = 11,
};

/* Pass as weight_type to memra_cpu_supports for an operation without a weight. */
#define MEMRA_NO_WEIGHT_TYPE (-1)

/* ---- library ---- */

/* The library version, "MAJOR.MINOR.PATCH". */
MEMRA_API const char * memra_version(void);
/* MEMRA_ABI_VERSION as the library was built. */
MEMRA_API int memra_abi_version(void);
/* The message of the last failing call on this thread ("" when none). */
MEMRA_API const char * memra_last_error(void);
/* The SIMD path the dot-product kernels chose at run time ("avx512vnni", "avx2", "neondot", "neon", "scalar"). */
MEMRA_API const char * memra_cpu_isa(void);
/* 1 when `op` (enum memra_op) runs with weights of ggml type `weight_type` (or with
 * MEMRA_NO_WEIGHT_TYPE: runs at all), 0 otherwise. Never fails. */
MEMRA_API int memra_cpu_supports(int op, int weight_type);
/* Number of processors online (at least 1). */
MEMRA_API int memra_cpu_processor_count(void);

/* ---- context ---- */

typedef struct memra_cpu memra_cpu;

/* A context with `threads` workers (the calling thread included; 0 = one per processor online).
 * NULL on failure (see memra_last_error). */
MEMRA_API memra_cpu * memra_cpu_create(int threads);
/* Stops the workers and frees the context. NULL is ignored. */
MEMRA_API void memra_cpu_destroy(memra_cpu * cpu);
/* The number of workers, the calling thread included (0 when cpu is NULL). */
MEMRA_API int memra_cpu_thread_count(const memra_cpu * cpu);
/* Batch invariance (0: off, the default; 1: on): with it, a matmul row's result does not depend
 * on how many rows the call has. Weight types with GEMM kernels then run them for a single row
 * too (decode), in the arithmetic of every other row count, instead of the matrix-vector kernels
 * (decode of the 0.6B q8_0 shape on AVX-512 measured 15-30% slower). Paged attention is batch invariant either way.
 * MEMRA_ERROR_INVALID_ARGUMENT for another value. */
MEMRA_API int memra_cpu_set_batch_invariant(memra_cpu * cpu, int on);

/* ---- ops (output first) ---- */

/* out[r] = table row ids[r], dequantized. table: [rows_in_table, width] of ggml type `type`.
 * out: [id_count, width]. An id outside [0, rows_in_table) is MEMRA_ERROR_OUT_OF_RANGE. */
MEMRA_API int memra_cpu_embedding(memra_cpu * cpu, float * out, int64_t out_length,
                                  int type, const void * table, int64_t table_bytes, int64_t width, int64_t rows_in_table,
                                  const int32_t * ids, int64_t id_count);

/* Dequantizes `count` values of ggml type `type` (count a multiple of the type's block size). */
MEMRA_API int memra_cpu_dequantize(memra_cpu * cpu, float * out, int64_t out_length,
                                   int type, const void * data, int64_t data_bytes, int64_t count);

/* As ggml's rms_norm followed by mul: out[r] = x[r] * (1 / sqrt(mean(x[r]^2) + eps)) * weight, the
 * sum of squares accumulated in double. x, out: [rows, width] (out may equal x); weight: [width] f32. */
MEMRA_API int memra_cpu_rms_norm(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length,
                                 const float * weight, int64_t weight_length, int64_t rows, int64_t width, float eps);

/* out[r, o] = sum_i x[r, i] * W[o, i]. x: [rows, n_in] f32, out: [rows, n_out] f32 (out must not
 * overlap x); W: [n_out, n_in] of ggml type `type`. Activations are converted to the weight type's
 * ggml vec_dot_type first, as llama.cpp's CPU backend does. */
MEMRA_API int memra_cpu_matmul(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows,
                               int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out);

/* memra_cpu_matmul with matrix `expert` of a 3-D weight [experts, n_out, n_in]. */
MEMRA_API int memra_cpu_expert_matmul(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows,
                                      int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out,
                                      int64_t experts, int64_t expert);

/* NEOX rotary embedding in place, as ggml: theta_scale = powf(freq_base, -2.0f / head_dim), theta
 * starts at the position and is multiplied by theta_scale pair by pair; each head rotates
 * (i, i + head_dim / 2). x: [rows, heads * head_dim]; positions: [rows]. */
MEMRA_API int memra_cpu_rope_neox(memra_cpu * cpu, float * x, int64_t x_length, const int32_t * positions, int64_t rows,
                                  int64_t heads, int64_t head_dim, float freq_base);

/* memra_cpu_rope_neox with RoPE scaling, as ggml's rope_yarn: pair i's angle theta becomes
 * freq_scale * theta, mixed back toward theta by ramp(i) * ext_factor (ramp: 1 below corr_low, 0
 * from corr_high on, linear between; ext_factor 0 for linear scaling, 1 for YaRN), and its cos and
 * sin are multiplied by magnitude (YaRN: 1 + 0.1 ln(1 / freq_scale); linear: 1). */
MEMRA_API int memra_cpu_rope_neox_scaled(memra_cpu * cpu, float * x, int64_t x_length, const int32_t * positions, int64_t rows,
                                         int64_t heads, int64_t head_dim, float freq_base, float freq_scale, float ext_factor,
                                         float magnitude, float corr_low, float corr_high);

/* Causal scaled-dot-product attention with grouped KV heads. q, out: [rows, heads * head_dim];
 * keys, values: [>= kv_rows, kv_heads * head_dim]. Query row r attends to cache rows
 * [0, first_row + r], which must be < kv_rows. heads is a multiple of kv_heads. */
MEMRA_API int memra_cpu_attention(memra_cpu * cpu, float * out, int64_t out_length, const float * q, int64_t q_length,
                                  const float * keys, const float * values, int64_t kv_length, int64_t kv_rows,
                                  int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t first_row, float scale);

/* ---- paged KV cache ---- */

/* KV storage element types (ggml type ids): f32 = 0, f16 = 1, q8_0 = 8 (34 bytes per 32 values).
 * Storage is `storage_bytes` of rows ("slots") of kv_heads * head_dim values of that type; a
 * paged cache puts block b's token t at slot b * block_tokens + t. */

/* Stores rows [0, count) of source ([count, width] f32) at slots[i], converted to `type` (f16 rounds
 * to nearest even, q8_0 as ggml's quantize_row_q8_0). A slot outside the storage is
 * MEMRA_ERROR_OUT_OF_RANGE. */
MEMRA_API int memra_cpu_kv_write(memra_cpu * cpu, int type, void * storage, int64_t storage_bytes, int64_t width, const int32_t * slots,
                                 int64_t count, const float * source, int64_t source_length);

/* The context shift's K shift (llama.cpp's build_rope_shift): the stored key rows at slots[i]
 * rotated in place by `delta` positions, NEOX RoPE as memra_cpu_rope_neox (with `rope`: NULL, or
 * the 5 floats freq_scale, ext_factor, magnitude, corr_low, corr_high of
 * memra_cpu_rope_neox_scaled), through f32 and back to `type` as memra_cpu_kv_write stores it.
 * width = heads * head_dim. Slots must be distinct. */
MEMRA_API int memra_cpu_kv_rotate(memra_cpu * cpu, int type, void * storage, int64_t storage_bytes, int64_t heads, int64_t head_dim,
                                  const int32_t * slots, int64_t count, int32_t delta, float freq_base, const float * rope);

/* Causal attention with grouped KV heads for a batch of sequences, each reading K/V through its
 * block table (converted to f32 a block at a time, never the whole cache). q, out: [rows, heads *
 * head_dim]. sequences: [sequence_count, 4] of (first query row, query rows, cache position of the
 * first query row, offset of its table in block_tables); the sequences' rows follow each other and
 * make up all `rows`. Query row r of a sequence attends to its positions [0, position + r], which
 * must already be written. */
MEMRA_API int memra_cpu_paged_attention(memra_cpu * cpu, float * out, int64_t out_length, const float * q, int64_t q_length, int type,
                                        const void * keys, const void * values, int64_t storage_bytes, int64_t block_tokens,
                                        const int32_t * block_tables, int64_t table_length, const int32_t * sequences, int64_t sequence_count,
                                        int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, float scale);

/* out = silu(gate) * up over `length` values (out may equal gate or up). */
MEMRA_API int memra_cpu_swiglu(memra_cpu * cpu, float * out, int64_t out_length, const float * gate, int64_t gate_length,
                               const float * up, int64_t up_length, int64_t length);

/* out = a + b over `length` values (out may equal a or b). */
MEMRA_API int memra_cpu_add(memra_cpu * cpu, float * out, int64_t out_length, const float * a, int64_t a_length,
                            const float * b, int64_t b_length, int64_t length);

/* Qwen3-MoE routing, as llama.cpp: softmax over each row's `experts` logits, the k largest
 * probabilities (ties to the lower id), weights renormalised to sum to one.
 * logits: [rows, experts]; ids_out, weights_out: [rows, k]. */
MEMRA_API int memra_cpu_moe_route(memra_cpu * cpu, int32_t * ids_out, float * weights_out, int64_t out_length,
                                  const float * logits, int64_t logits_length, int64_t rows, int64_t experts, int64_t k);

/* out[i] = x[row_ids[i]] for i < count, rows of `width`. */
MEMRA_API int memra_cpu_gather_rows(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length,
                                    const int32_t * row_ids, int64_t count, int64_t width);

/* out[row_ids[i]] += scales[i] * x[i] for i < count, rows of `width` (in order of i). */
MEMRA_API int memra_cpu_scatter_add_rows(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length,
                                         const int32_t * row_ids, const float * scales, int64_t count, int64_t width);

/* ---- quantization (no context: plain functions of their arguments) ---- */

/* Quantizes `count` f32 values (a whole number of blocks: 256 values, or 32 for the 32-value types) to
 * `type` (q2_K, q3_K, q4_K, q5_K, q6_K, q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, iq4_xs, iq3_s, iq3_xxs, iq2_s or iq1_m) into out, byte for
 * byte as ggml_quantize_chunk without an importance matrix (quantize_row_*_ref; quantize_iq4_nl/xs, quantize_iq3_s/xxs, quantize_iq2_s, quantize_iq1_m).
 * out must hold count / block values blocks. iq2_xxs, iq2_xs and iq1_s need an importance matrix (memra_cpu_quantize_rows):
 * MEMRA_ERROR_INVALID_ARGUMENT here. Any other type is MEMRA_ERROR_UNSUPPORTED_TYPE. */
MEMRA_API int memra_quantize(int type, const float * x, int64_t count, void * out, int64_t out_bytes);

/* memra_quantize over the context's threads (chunks of 4,096 values): the same bytes. */
MEMRA_API int memra_cpu_quantize(memra_cpu * cpu, int type, const float * x, int64_t count, void * out, int64_t out_bytes);

/* Quantizes `rows` rows of `row_length` f32 values (a whole number of blocks) to `type` (memra_quantize's
 * types and iq2_xxs, iq2_xs, iq1_s, which need importance) into out, byte for byte as ggml_quantize_chunk(type, x, out, 0, rows, row_length,
 * importance): importance is NULL (memra_cpu_quantize's bytes) or one row's `row_length` weights (an
 * importance matrix entry), and then each row follows ggml's quantize_row_*_impl (q8_0 ignores it).
 * Rows are spread over the context's threads; the bytes do not depend on their number. out must hold
 * rows * (row_length / block values) blocks. */
MEMRA_API int memra_cpu_quantize_rows(memra_cpu * cpu, int type, const float * x, int64_t rows, int64_t row_length, const float * importance,
                                      void * out, int64_t out_bytes);

#ifdef __cplusplus
}
#endif

#endif
