/*
 * memra_cuda.h — the whole C ABI of Memra's CUDA library (libmemra_cuda).
 *
 * Plain C functions over opaque handles, in the style of memra.h. Every entry point that can fail
 * returns an int status (MEMRA_CUDA_OK = 0) and, on failure, leaves a message in
 * memra_cuda_last_error() (thread-local, valid until the next failing call on the same thread).
 * Every CUDA runtime call is checked and turned into a status; no entry point aborts the process.
 * The library links the CUDA runtime statically, so loading it needs no CUDA installation: on a
 * machine without a driver or a GPU it loads, and memra_cuda_device_count / memra_cuda_create fail
 * with MEMRA_CUDA_ERROR_NO_DEVICE and the runtime's message.
 *
 * Memory: buffers (f32 activations, weights in ggml layout, KV storage) live in device memory that
 * memra_cuda_alloc hands out from a per-context caching allocator. Device pointers are plain
 * addresses; `pointer + bytes` addresses inside an allocation are valid arguments.
 *
 * Ops: output first; float buffers are device pointers followed by their length in elements,
 * checked against what the operation needs. Small index arrays (token ids, positions, KV slots,
 * block tables, sequences, row ids, scales) are HOST pointers: the library checks them on the host
 * (so an index out of range is an error code, never a device fault) and stages them to the device
 * through pinned memory on the context's stream. Ops are asynchronous on the context's one stream;
 * memra_cuda_download, memra_cuda_moe_route, memra_cuda_argmax_rows, memra_cuda_top_k_rows,
 * memra_cuda_log_softmax_at and memra_cuda_synchronize wait for it.
 *
 * A context must not be used from two threads at once; distinct contexts are independent.
 */
#ifndef MEMRA_CUDA_H
#define MEMRA_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define MEMRA_CUDA_API __declspec(dllexport)
#else
#define MEMRA_CUDA_API __attribute__((visibility("default")))
#endif

/* Incremented on every incompatible change of this header. */
#define MEMRA_CUDA_ABI_VERSION 7

/* ---- status codes (1..4 as memra.h) ---- */
enum memra_cuda_status {
    MEMRA_CUDA_OK = 0,
    MEMRA_CUDA_ERROR_INVALID_ARGUMENT = 1, /* null pointer, negative or inconsistent size, buffer too short */
    MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE = 2, /* a ggml type the operation has no kernel for */
    MEMRA_CUDA_ERROR_OUT_OF_RANGE = 3,     /* an index (token id, row id, slot, block id) outside its table */
    MEMRA_CUDA_ERROR_OUT_OF_MEMORY = 4,    /* device or pinned host memory exhausted */
    MEMRA_CUDA_ERROR_UNSUPPORTED = 6,      /* an operation or shape this library has no kernel for */
    MEMRA_CUDA_ERROR_NO_DEVICE = 7,        /* no driver, no GPU, or the device index does not exist */
    MEMRA_CUDA_ERROR_CUDA = 8,             /* a CUDA runtime call or a kernel launch failed */
};

/* ---- operations, for memra_cuda_supports (the values of memra.h's enum memra_op) ---- */
enum memra_cuda_op {
    MEMRA_CUDA_OP_EMBEDDING = 0,
    MEMRA_CUDA_OP_RMS_NORM = 1,
    MEMRA_CUDA_OP_MATMUL = 2,
    MEMRA_CUDA_OP_ROPE_NEOX = 3,
    MEMRA_CUDA_OP_ATTENTION = 4,
    MEMRA_CUDA_OP_SWIGLU = 5,
    MEMRA_CUDA_OP_ADD = 6,
    MEMRA_CUDA_OP_MOE_ROUTE = 7,
    MEMRA_CUDA_OP_EXPERT_MATMUL = 8,
    MEMRA_CUDA_OP_GATHER_ROWS = 9,
    MEMRA_CUDA_OP_SCATTER_ADD_ROWS = 10,
    MEMRA_CUDA_OP_COUNT = 11,
};

/* Pass as weight_type to memra_cuda_supports for an operation without a weight. */
#define MEMRA_CUDA_NO_WEIGHT_TYPE (-1)

/* ---- library (never touch the GPU) ---- */

/* The library version, "MAJOR.MINOR.PATCH". */
MEMRA_CUDA_API const char * memra_cuda_version(void);
/* MEMRA_CUDA_ABI_VERSION as the library was built. */
MEMRA_CUDA_API int memra_cuda_abi_version(void);
/* The message of the last failing call on this thread ("" when none). */
MEMRA_CUDA_API const char * memra_cuda_last_error(void);
/* 1 when `op` (enum memra_cuda_op) has a kernel for weights of ggml type `weight_type` (or, with
 * MEMRA_CUDA_NO_WEIGHT_TYPE, at all); 0 otherwise. Never fails, never touches the GPU. */
MEMRA_CUDA_API int memra_cuda_supports(int op, int weight_type);
/* The ggml type ids of the KV storage element types: f32 = 0, f16 = 1, q8_0 = 8. */

/* ---- devices ---- */

/* Writes the number of CUDA devices to *count. MEMRA_CUDA_ERROR_NO_DEVICE (with the runtime's
 * message, e.g. "CUDA driver version is insufficient" or "no CUDA-capable device is detected")
 * when there is no usable driver or device. */
MEMRA_CUDA_API int memra_cuda_device_count(int32_t * count);

/* ---- context ---- */

typedef struct memra_cuda memra_cuda;

/* A context on device `device`: its stream, caching allocator and pinned staging buffers.
 * NULL on failure (see memra_cuda_last_error; its status is memra_cuda_last_status()). */
MEMRA_CUDA_API memra_cuda * memra_cuda_create(int device);
/* The status of the last failing call on this thread (MEMRA_CUDA_OK when none). */
MEMRA_CUDA_API int memra_cuda_last_status(void);
/* Waits for the stream, frees every allocation and the context. NULL is ignored. */
MEMRA_CUDA_API void memra_cuda_destroy(memra_cuda * cuda);
/* Writes the device's name (NUL-terminated, truncated to name_bytes) and compute capability. */
MEMRA_CUDA_API int memra_cuda_device_info(memra_cuda * cuda, char * name, int64_t name_bytes, int32_t * compute_capability,
                                          int32_t * multiprocessors);
/* 1 when kernels are launched with programmatic dependent launch (each may start launching while
 * the one before it finishes, and waits for it before touching memory): sm_90 and newer, unless
 * MEMRA_CUDA_PDL=0, and only when a probe launch and graph capture with it worked when the
 * contexts were created; 0 otherwise. */
MEMRA_CUDA_API int memra_cuda_programmatic_launch(void);
/* Free and total device memory in bytes, and the bytes this context's allocator holds cached. */
MEMRA_CUDA_API int memra_cuda_memory_info(memra_cuda * cuda, int64_t * free_bytes, int64_t * total_bytes, int64_t * cached_bytes);
/* Waits until every op queued on the context's stream has finished; reports a kernel's fault. */
MEMRA_CUDA_API int memra_cuda_synchronize(memra_cuda * cuda);
/* Arithmetic choices of a context (defaults from MEMRA_CUDA_GEMM and MEMRA_CUDA_ACTIVATION_ROUNDING,
 * both on unless "0"): `gemm` 1 runs prefill matmuls (≥ 9 rows) on the f16 tensor-core GEMM, 0 on
 * the f32 matrix-vector kernel; `activation_rounding` 1 rounds activations as ggml's CPU matmul does
 * for the weight type (q8_0 / q8_1 / q8_K / f16 / bf16) before quantized and half-precision
 * matmuls, 0 multiplies them unrounded. -1 leaves a setting as it is. */
MEMRA_CUDA_API int memra_cuda_configure(memra_cuda * cuda, int gemm, int activation_rounding);

/* ---- memory ---- */

/* `bytes` of device memory (at least 256-byte aligned) from the caching allocator; NULL on failure.
 * On out-of-memory the cache is released and the allocation retried once. */
MEMRA_CUDA_API void * memra_cuda_alloc(memra_cuda * cuda, int64_t bytes);
/* Returns an allocation to the cache (reused by a later memra_cuda_alloc of the same size class).
 * Stream-ordered: ops queued before still see valid memory. NULL is ignored. */
MEMRA_CUDA_API int memra_cuda_free(memra_cuda * cuda, void * device);
/* Frees every cached (unused) allocation back to the device. */
MEMRA_CUDA_API int memra_cuda_release_cached(memra_cuda * cuda);
/* Copies `bytes` from host memory to the device through pinned staging buffers (double-buffered);
 * returns once `host` may be reused. */
MEMRA_CUDA_API int memra_cuda_upload(memra_cuda * cuda, void * device, const void * host, int64_t bytes);
/* Copies `bytes` from the device to host memory; waits for the stream first. */
MEMRA_CUDA_API int memra_cuda_download(memra_cuda * cuda, void * host, const void * device, int64_t bytes);
/* Device-to-device copy on the stream (the regions must not overlap). */
MEMRA_CUDA_API int memra_cuda_copy(memra_cuda * cuda, void * target, const void * source, int64_t bytes);
/* Sets `bytes` of device memory to zero on the stream. */
MEMRA_CUDA_API int memra_cuda_zero(memra_cuda * cuda, void * device, int64_t bytes);

/* ---- ops (output first; see the top of this file for host index arrays) ---- */

/* out[r] = table row ids[r], dequantized. table: [rows_in_table, width] of ggml type `type`.
 * out: [id_count, width]. An id outside [0, rows_in_table) is MEMRA_CUDA_ERROR_OUT_OF_RANGE. */
MEMRA_CUDA_API int memra_cuda_embedding(memra_cuda * cuda, float * out, int64_t out_length, int type, const void * table, int64_t table_bytes,
                                        int64_t width, int64_t rows_in_table, const int32_t * ids, int64_t id_count);

/* Dequantizes `count` values of ggml type `type` (count a multiple of the type's block size). */
MEMRA_CUDA_API int memra_cuda_dequantize(memra_cuda * cuda, float * out, int64_t out_length, int type, const void * data, int64_t data_bytes,
                                         int64_t count);

/* The type id memra_cuda_repack makes of rows of n values of ggml type `type`: q8_0 and q4_0 rows of
 * 256k values become q8_0_x8 (200) and q4_0_x8 (202), q6_K rows of 2,048k values q6_K_x8 (201):
 * launch-plan.h's layouts of the same bytes per row with the codes 8- and 16-byte aligned; `type`
 * itself where there is none. */
MEMRA_CUDA_API int memra_cuda_repacked_type_of(int type, int64_t n);
/* Rewrites `rows` rows of n values of `type` (data 16-byte aligned) in place into the layout
 * memra_cuda_repacked_type_of names; every op then takes the data as that type, with the values
 * and results of `type`. Waits for the rewrite, as memra_cuda_upload waits for its copy: the
 * matrix-vector kernels read weights before their grid-dependency wait. */
MEMRA_CUDA_API int memra_cuda_repack(memra_cuda * cuda, int type, void * data, int64_t data_bytes, int64_t rows, int64_t n);

/* out[r] = x[r] * (1 / sqrt(mean(x[r]^2) + eps)) * weight, the sum of squares in double.
 * x, out: [rows, width] (out may equal x); weight: [width] f32. */
MEMRA_CUDA_API int memra_cuda_rms_norm(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length,
                                       const float * weight, int64_t weight_length, int64_t rows, int64_t width, float eps);
/* The residual add and the next RMSNorm in one launch: hidden += delta, then out = RMSNorm(hidden)
 * · weight over rows of `width`: the same values as memra_cuda_add then memra_cuda_rms_norm. */
MEMRA_CUDA_API int memra_cuda_add_rms_norm(memra_cuda * cuda, float * out, int64_t out_length, float * hidden, int64_t hidden_length, const float * delta,
                                           int64_t delta_length, const float * weight, int64_t weight_length, int64_t rows, int64_t width, float eps);

/* out[r, o] = sum_i x[r, i] * W[o, i]. x: [rows, n_in] f32, out: [rows, n_out] f32 (no overlap);
 * W: [n_out, n_in] of ggml type `type`. Few rows: a matrix-vector kernel in f32 arithmetic over the
 * dequantized weight. Many rows: a tensor-core GEMM (mma.sync m16n8k16), weight tiles dequantized
 * to f16 in shared memory, activations rounded to f16, f32 accumulation. */
MEMRA_CUDA_API int memra_cuda_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows,
                                     int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out);

/* memra_cuda_matmul with matrix `expert` of a 3-D weight [experts, n_out, n_in]. */
MEMRA_CUDA_API int memra_cuda_expert_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length,
                                            int64_t rows, int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out,
                                            int64_t experts, int64_t expert);
/* out[t] = x · W[t] for `count` (1..8) weights of one input (Q/K/V, gate/up): outs, out_lengths,
 * types, weights (device addresses as uint64), weight_bytes and n_outs are host arrays of `count`.
 * The activations are rounded once per rounding mode, and decode matrices of one type share one
 * matrix-vector launch (up to 3); each result equals its own memra_cuda_matmul's bit for bit. */
MEMRA_CUDA_API int memra_cuda_matmul_shared(memra_cuda * cuda, int64_t count, const uint64_t * outs, const int64_t * out_lengths, const float * x,
                                            int64_t x_length, int64_t rows, const int32_t * types, const uint64_t * weights, const int64_t * weight_bytes,
                                            int64_t n_in, const int64_t * n_outs);
/* normed = RMSNorm(hidden) · norm_weight (hidden += delta first when delta is not NULL), then
 * memra_cuda_matmul_shared of normed: the same results as memra_cuda_add_rms_norm (or
 * memra_cuda_rms_norm) and memra_cuda_matmul_shared one after the other, bit for bit. Where the
 * group's first rounding is a q8 one, the norm and that rounding are one kernel. normed, hidden and
 * delta are [rows, n_in] and must not overlap; norm_weight [n_in] f32. */
MEMRA_CUDA_API int memra_cuda_norm_matmul_shared(memra_cuda * cuda, float * normed, int64_t normed_length, float * hidden, int64_t hidden_length,
                                                 const float * delta, int64_t delta_length, const float * norm_weight, int64_t norm_weight_length, float eps,
                                                 int64_t count, const uint64_t * outs, const int64_t * out_lengths, int64_t rows, const int32_t * types,
                                                 const uint64_t * weights, const int64_t * weight_bytes, int64_t n_in, const int64_t * n_outs);
/* out = (silu(gate) · up) · Wᵀ: SwiGLU and the down projection without storing their product
 * (computed as the activation rounding reads it; gate and up are left as they are). The same
 * values as memra_cuda_swiglu then memra_cuda_matmul. */
MEMRA_CUDA_API int memra_cuda_swiglu_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * gate, int64_t gate_length, const float * up,
                                            int64_t up_length, int64_t rows, int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out);

/* NEOX rotary embedding in place, as ggml (theta_scale = powf(freq_base, -2 / head_dim) computed on
 * the host, theta multiplied by it pair by pair in f32). x: [rows, heads * head_dim]; positions: [rows] (host). */
MEMRA_CUDA_API int memra_cuda_rope_neox(memra_cuda * cuda, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads,
                                        int64_t head_dim, float freq_base);
/* memra_cuda_rope_neox with RoPE scaling, as ggml's rope_yarn (and memra_cpu_rope_neox_scaled): pair
 * i's angle theta becomes freq_scale * theta, mixed back toward theta by ramp(i) * ext_factor (ramp:
 * 1 below corr_low, 0 from corr_high on, linear between; ext_factor 0 for linear scaling, 1 for
 * YaRN), and its cos and sin are multiplied by magnitude (YaRN: 1 + 0.1 ln(1 / freq_scale)). */
MEMRA_CUDA_API int memra_cuda_rope_neox_scaled(memra_cuda * cuda, float * x, int64_t x_length, const int32_t * positions, int64_t rows,
                                               int64_t heads, int64_t head_dim, float freq_base, float freq_scale, float ext_factor,
                                               float magnitude, float corr_low, float corr_high);
/* Qwen3's per-head RMSNorm of q ([rows, heads, head_dim], weight q_weight) and of k ([rows,
 * kv_heads, head_dim], weight k_weight), then NEOX RoPE of both at `positions` (host, rows), in
 * place, in one launch: the same values as memra_cuda_rms_norm (per head) then
 * memra_cuda_rope_neox, or with `rope` (5 host floats: freq_scale, ext_factor, magnitude, corr_low,
 * corr_high; NULL: none) memra_cuda_rope_neox_scaled. head_dim even and below 256. */
MEMRA_CUDA_API int memra_cuda_qk_norm_rope(memra_cuda * cuda, float * q, int64_t q_length, float * k, int64_t k_length, const float * q_weight,
                                           const float * k_weight, int64_t weight_length, const int32_t * positions, int64_t rows, int64_t heads,
                                           int64_t kv_heads, int64_t head_dim, float eps, float freq_base, const float * rope);
/* memra_cuda_qk_norm_rope, then memra_cuda_kv_write_pair of k and v ([rows, kv_heads, head_dim]) into
 * keys and values (one KV type, storage_bytes each) at `slots` (host, rows), in one launch: the
 * same stored bytes as the three calls. A q8_0 cache needs head_dim a multiple of 32
 * (MEMRA_CUDA_ERROR_UNSUPPORTED otherwise). */
MEMRA_CUDA_API int memra_cuda_qk_norm_rope_kv(memra_cuda * cuda, float * q, int64_t q_length, float * k, int64_t k_length, const float * v, int64_t v_length,
                                              const float * q_weight, const float * k_weight, int64_t weight_length, const int32_t * positions, int64_t rows,
                                              int64_t heads, int64_t kv_heads, int64_t head_dim, float eps, float freq_base, int type, void * keys,
                                              void * values, int64_t storage_bytes, const int32_t * slots, const float * rope);

/* The context shift's K shift: the stored key rows at slots[i] (distinct) rotated in place by
 * `delta` positions (NEOX RoPE, with `rope` NULL or its 5 scaling floats as
 * memra_cuda_rope_neox_scaled), through f32 and stored back as memra_cuda_kv_write stores them.
 * Rows of heads * head_dim values, at most 12288. */
MEMRA_CUDA_API int memra_cuda_kv_rotate(memra_cuda * cuda, int type, void * storage, int64_t storage_bytes, int64_t heads, int64_t head_dim,
                                        const int32_t * slots, int64_t count, int32_t delta, float freq_base, const float * rope);
/* Stores rows [0, count) of source ([count, width] f32, device) at slots[i] (host) of KV storage of
 * element type `type` (f32 = 0, f16 = 1 round-to-nearest-even, q8_0 = 8 as ggml's quantize_row_q8_0
 * reference). A slot outside the storage is MEMRA_CUDA_ERROR_OUT_OF_RANGE. */
MEMRA_CUDA_API int memra_cuda_kv_write(memra_cuda * cuda, int type, void * storage, int64_t storage_bytes, int64_t width, const int32_t * slots,
                                       int64_t count, const float * source, int64_t source_length);
/* memra_cuda_kv_write of k into `keys` and of v into `values` (two storages of one type and size,
 * the same slots) in one launch. */
MEMRA_CUDA_API int memra_cuda_kv_write_pair(memra_cuda * cuda, int type, void * keys, void * values, int64_t storage_bytes, int64_t width,
                                            const int32_t * slots, int64_t count, const float * k, int64_t k_length, const float * v, int64_t v_length);

/* Causal attention with grouped KV heads for a batch of sequences, each reading K/V through its
 * block table; arguments as memra_cpu_paged_attention (block_tables and sequences are host arrays;
 * sequences: [sequence_count, 4] of (first query row, query rows, cache position of the first
 * query row, table offset)). head_dim at most 256. */
MEMRA_CUDA_API int memra_cuda_paged_attention(memra_cuda * cuda, float * out, int64_t out_length, const float * q, int64_t q_length, int type,
                                              const void * keys, const void * values, int64_t storage_bytes, int64_t block_tokens,
                                              const int32_t * block_tables, int64_t table_length, const int32_t * sequences,
                                              int64_t sequence_count, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, float scale);

/* The residual add and RMSNorm after a decode step's O or down projection, which
 * memra_cuda_attention_matmul, memra_cuda_qk_norm_rope_attention_matmul and
 * memra_cuda_norm_swiglu_matmul can do in their projection's matrix-vector kernel (its last block)
 * instead of the next op's norm launch: hidden += projected, then normed = RMSNorm(hidden) · weight
 * ([rows, n_out] each, weight [n_out] f32), with the values memra_cuda_add_rms_norm gives, and
 * normed's q8_0 codes kept for the next op: a memra_cuda_norm_matmul_shared,
 * memra_cuda_norm_swiglu_matmul (delta NULL) or memra_cuda_rms_norm of the same normed, hidden,
 * weight, eps and rows called next on the context (no other call between: any other call drops
 * them) launches no norm and, where its matmuls read q8_0 codes, no rounding; a
 * memra_cuda_rms_norm that so launches nothing leaves the codes to a memra_cuda_matmul of normed
 * called next (the final norm, then the LM head: no rounding either). Only where
 * memra_cuda_matmul_norm_tail_applies says so (else MEMRA_CUDA_ERROR_UNSUPPORTED and nothing is
 * done). hidden, normed and projected must not overlap. */
typedef struct memra_cuda_residual_norm {
    float * hidden;
    int64_t hidden_length;
    float * normed;
    int64_t normed_length;
    const float * weight;
    int64_t weight_length;
    float eps;
} memra_cuda_residual_norm;
/* 1 where a projection of `rows` rows by a weight of `type` ([n_out rows of n_in inputs]) takes a
 * memra_cuda_residual_norm on this context: q8_0 decoded on q8_0 codes by the matrix-vector kernel
 * (4 steps), 1 or 2 rows (one block norms every row), n_out a multiple of 32; else 0. */
MEMRA_CUDA_API int memra_cuda_matmul_norm_tail_applies(memra_cuda * cuda, int type, int64_t rows, int64_t n_in, int64_t n_out);

/* memra_cuda_paged_attention into `out`, then projected = out · weight ([n_out rows of heads ·
 * head_dim inputs], as memra_cuda_matmul with rows rows): the same results. Where the matmul reads
 * q8_0 codes (q8_0 decode, the integer GEMMs) and the split attention kernel runs (decode, the
 * prefills the flash kernel does not take), the attention also writes the codes: no rounding
 * launch. With `then` (non-NULL), also the residual norm after the projection (memra_cuda_residual_norm). */
MEMRA_CUDA_API int memra_cuda_attention_matmul(memra_cuda * cuda, float * projected, int64_t projected_length, float * out, int64_t out_length,
                                               const float * q, int64_t q_length, int type, const void * keys, const void * values,
                                               int64_t storage_bytes, int64_t block_tokens, const int32_t * block_tables, int64_t table_length,
                                               const int32_t * sequences, int64_t sequence_count, int64_t rows, int64_t heads, int64_t kv_heads,
                                               int64_t head_dim, float scale, int weight_type, const void * weight, int64_t weight_bytes,
                                               int64_t n_out, const memra_cuda_residual_norm * then);

/* memra_cuda_norm_matmul_shared with 2 weights, gate and up (outs, types, weights: 2 each, of `ffn`
 * features), then memra_cuda_swiglu_matmul(projected, gate, up, down weight): the same results
 * (normed, hidden, gate, up and projected), with the down projection's q8_0 rounding of
 * silu(gate) · up done in the gate/up matrix-vector kernel (the last block of each 32 features)
 * instead of a launch of its own. Only for q8_0 gate and up decoded on q8_0 codes (1 to 8 rows,
 * one warp a feature), ffn a multiple of 32, and a down projection that reads q8_0 codes;
 * else MEMRA_CUDA_ERROR_UNSUPPORTED and nothing is done. With `then` (non-NULL), also the residual
 * norm after the down projection (memra_cuda_residual_norm). */
/* 1 where memra_cuda_norm_swiglu_matmul takes these shapes and types on this context, else 0. */
MEMRA_CUDA_API int memra_cuda_norm_swiglu_matmul_applies(memra_cuda * cuda, int64_t rows, int gate_type, int up_type, int64_t n_in, int64_t ffn,
                                                         int down_type, int64_t n_out);
MEMRA_CUDA_API int memra_cuda_norm_swiglu_matmul(memra_cuda * cuda, float * normed, int64_t normed_length, float * hidden, int64_t hidden_length,
                                                 const float * delta, int64_t delta_length, const float * norm_weight, int64_t norm_weight_length,
                                                 float eps, const uint64_t * outs, const int64_t * out_lengths, int64_t rows, const int32_t * types,
                                                 const uint64_t * weights, const int64_t * weight_bytes, int64_t n_in, int64_t ffn, float * projected,
                                                 int64_t projected_length, int down_type, const void * down_weight, int64_t down_weight_bytes,
                                                 int64_t n_out, const memra_cuda_residual_norm * then);

/* Kernel timings. memra_cuda_profile_begin starts recording a CUDA event after every kernel the
 * context launches (not while it captures a graph; a graph replay is not a kernel launch), up to
 * `capacity` launches, and first launches a kernel that holds the stream `hold_microseconds`, so
 * that the host can queue what it launches next before the GPU runs it: each launch's time is then
 * the GPU's, from the end of the kernel before it (or of the hold) to its own end, gaps included.
 * memra_cuda_profile_end waits for the stream and writes each launch's kernel name ('\n' after each,
 * into `names`, names_bytes long) and microseconds (into `microseconds`, capacity long), and
 * *count; MEMRA_CUDA_ERROR_OUT_OF_RANGE if more than `capacity` kernels were launched (the first
 * `capacity` are written). One context of the process profiles at a time. */
MEMRA_CUDA_API int memra_cuda_profile_begin(memra_cuda * cuda, int64_t capacity, int64_t hold_microseconds);
MEMRA_CUDA_API int memra_cuda_profile_end(memra_cuda * cuda, char * names, int64_t names_bytes, float * microseconds, int64_t capacity, int64_t * count);

/* The K/V side of memra_cuda_qk_norm_rope_attention_matmul (a struct: bun:ffi calls take at most
 * 32 arguments). positions and slots are host arrays of one value per query row. */
typedef struct memra_cuda_qk_inputs {
    const float * k; /* [rows, kv_heads · head_dim]: the K projection, before QK-norm and RoPE */
    int64_t k_length;
    const float * v; /* [rows, kv_heads · head_dim] */
    int64_t v_length;
    const float * q_weight; /* QK-norm weights, [head_dim] each */
    const float * k_weight;
    int64_t weight_length;
    const int32_t * positions;
    const int32_t * slots;
    float eps;
    float freq_base;
} memra_cuda_qk_inputs;

/* A decode step's attention block from the Q/K/V projections: Qwen3's QK-norm and RoPE of q and k
 * (as memra_cuda_qk_norm_rope_kv, at qk->positions), this step's K and V written into keys/values
 * at qk->slots (one per row), then memra_cuda_attention_matmul (its arguments): the same results,
 * in the attention's launch (and the matmul's). q and k are left as they are (not normed in place).
 * Only for one query row per sequence (rows = sequence_count) and head_dim a multiple of 64 below
 * 256; else MEMRA_CUDA_ERROR_UNSUPPORTED and nothing is done. out must not overlap q, k or v. With
 * `then` (non-NULL), also the residual norm after the projection (memra_cuda_residual_norm). `rope`:
 * RoPE scaling as memra_cuda_qk_norm_rope takes it. */
MEMRA_CUDA_API int memra_cuda_qk_norm_rope_attention_matmul(memra_cuda * cuda, float * projected, int64_t projected_length, float * out,
                                                            int64_t out_length, const float * q, int64_t q_length, int type, void * keys,
                                                            void * values, int64_t storage_bytes, int64_t block_tokens, const int32_t * block_tables,
                                                            int64_t table_length, const int32_t * sequences, int64_t sequence_count, int64_t rows,
                                                            int64_t heads, int64_t kv_heads, int64_t head_dim, float scale, int weight_type,
                                                            const void * weight, int64_t weight_bytes, int64_t n_out, const memra_cuda_qk_inputs * qk,
                                                            const memra_cuda_residual_norm * then, const float * rope);

/* out = silu(gate) * up over `length` values (out may equal gate or up). */
MEMRA_CUDA_API int memra_cuda_swiglu(memra_cuda * cuda, float * out, int64_t out_length, const float * gate, int64_t gate_length,
                                     const float * up, int64_t up_length, int64_t length);

/* out = a + b over `length` values (out may equal a or b). */
MEMRA_CUDA_API int memra_cuda_add(memra_cuda * cuda, float * out, int64_t out_length, const float * a, int64_t a_length, const float * b,
                                  int64_t b_length, int64_t length);

/* Qwen3-MoE routing as llama.cpp: softmax over each row's logits (device), the k largest
 * probabilities (ties to the lower id), renormalised. ids_out, weights_out: [rows, k], HOST
 * memory; waits for the stream. k at most 64. */
MEMRA_CUDA_API int memra_cuda_moe_route(memra_cuda * cuda, int32_t * ids_out, float * weights_out, int64_t out_length, const float * logits,
                                        int64_t logits_length, int64_t rows, int64_t experts, int64_t k);
/* Qwen3-MoE's routed experts for a few rows (decode), all on the device, nothing read back:
 * routing of `logits` [rows, experts] as memra_cuda_moe_route, then for each row and chosen
 * expert the SwiGLU FFN of that expert (gate/up [experts, ffn, embedding], down [experts,
 * embedding, ffn] in ggml layout, activations rounded per weight type), and
 * out[r] = Σ weight · expert output, added in ascending expert id. rows · k ≤ 65535. q4_1 / q5_1
 * experts (q8_1 activations) are MEMRA_CUDA_ERROR_UNSUPPORTED: use the gather path. rows 0 checks
 * the weights alone. */
MEMRA_CUDA_API int memra_cuda_moe_experts(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, const float * logits,
                                          int64_t logits_length, int64_t rows, int64_t experts, int64_t k, int gate_type, const void * gate,
                                          int64_t gate_bytes, int up_type, const void * up, int64_t up_bytes, int down_type, const void * down,
                                          int64_t down_bytes, int64_t embedding, int64_t ffn);

/* out[i] = x[row_ids[i]] for i < count, rows of `width`; row_ids on the host. */
MEMRA_CUDA_API int memra_cuda_gather_rows(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length,
                                          const int32_t * row_ids, int64_t count, int64_t width);

/* out[row_ids[i]] += scales[i] * x[i] for i < count (in order of i); row_ids and scales on the host. */
MEMRA_CUDA_API int memra_cuda_scatter_add_rows(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length,
                                               const int32_t * row_ids, const float * scales, int64_t count, int64_t width);

/* ---- sampling ---- */

/* Greedy tokens: out[r] = the first index of the largest value of row r of `logits` [rows, columns]
 * (values compared with >, from index 0: a NaN never wins, ties go to the lower index, and a NaN
 * at index 0 gives 0), as the sampler's argmax. out: [rows], HOST memory; waits for the stream.
 * columns at most 2^31 - 1. */
MEMRA_CUDA_API int memra_cuda_argmax_rows(memra_cuda * cuda, int32_t * out, int64_t out_length, const float * logits, int64_t logits_length, int64_t rows,
                                          int64_t columns);

/* Candidates: ids[r * k + j] and values[r * k + j] for j < k are the k largest values of row r of
 * `logits` [rows, columns] and their indices, in descending order, equal values by ascending index
 * (-0 equal to +0; NaN below -Infinity), as the sampler's top-k orders candidates; values keep
 * their exact bits. k from 1 to min(columns, 1024); columns at most 2^31 - 1. ids, values: [rows * k],
 * HOST memory; waits for the stream. */
MEMRA_CUDA_API int memra_cuda_top_k_rows(memra_cuda * cuda, int32_t * ids, int64_t ids_length, float * values, int64_t values_length, const float * logits,
                                         int64_t logits_length, int64_t rows, int64_t columns, int64_t k);

/* Log-probabilities of given tokens: out[r] = logits[r, targets[r]] − log Σ_c exp(logits[r, c]) for
 * r < rows, in f32 (the row's maximum m subtracted first: (x_t − m) − log Σ exp(x − m)). targets:
 * [rows] HOST memory, each in 0..columns − 1; out: [rows], HOST memory; waits for the stream.
 * columns at most 2^31 − 1. */
MEMRA_CUDA_API int memra_cuda_log_softmax_at(memra_cuda * cuda, float * out, int64_t out_length, const float * logits, int64_t logits_length, int64_t rows,
                                             int64_t columns, const int32_t * targets, int64_t targets_length);

/* ---- graphs: ops captured once, replayed many times (a decode step: one launch) ---- */

typedef struct memra_cuda_graph memra_cuda_graph;

/* Starts capturing: the ops called on `cuda` until memra_cuda_graph_end are recorded, not run.
 * The host index arrays they are given become the graph's inputs (each distinct array once, in
 * order of first use): a replay reads their contents at that time, from the caller's arrays of
 * the same sizes. The ops' checks of those arrays are recorded too and run before every replay.
 * While capturing, ops that make the host wait (download, upload, moe_route, synchronize,
 * dequantize) fail, attention uses its paged kernel throughout, and any op that fails makes
 * memra_cuda_graph_end fail. Workspace taken and given back within the capture stays the graph's. */
MEMRA_CUDA_API int memra_cuda_graph_begin(memra_cuda * cuda);
/* Ends the capture: *graph is ready to replay (NULL on failure). */
MEMRA_CUDA_API int memra_cuda_graph_end(memra_cuda * cuda, memra_cuda_graph ** graph);
/* Ends a capture, if any, discarding it (after an op failed while capturing). */
MEMRA_CUDA_API int memra_cuda_graph_abort(memra_cuda * cuda);
/* The graph's input count, node count (kernels and copies) and workspace bytes; NULL outputs skipped. */
MEMRA_CUDA_API int memra_cuda_graph_info(memra_cuda * cuda, memra_cuda_graph * graph, int64_t * inputs, int64_t * nodes, int64_t * workspace_bytes);
/* Input `index`: the host address it was captured from, and its size in bytes. */
MEMRA_CUDA_API int memra_cuda_graph_input(memra_cuda * cuda, memra_cuda_graph * graph, int64_t index, uint64_t * host, int64_t * bytes);
/* Runs the graph on the stream with `count` inputs (host addresses and sizes, in input order, each
 * the size it was captured with): copies them to the graph's pinned buffers (after the previous
 * replay has read those), checks them as the ops would, then launches the graph. Asynchronous
 * like the ops; a failed check launches nothing. */
MEMRA_CUDA_API int memra_cuda_graph_replay(memra_cuda * cuda, memra_cuda_graph * graph, const uint64_t * hosts, const int64_t * bytes, int64_t count);
/* Waits for the graph's last replay and frees it with its inputs and workspace. NULL is ignored. */
MEMRA_CUDA_API int memra_cuda_graph_destroy(memra_cuda * cuda, memra_cuda_graph * graph);

/* ---- launch plans (pure host arithmetic, no GPU; for tests and tools) ---- */

/* The plan memra_cuda_matmul would use in a context with the default settings (q8_0/q4_0/q5_0
 * prefill: the int8 GEMM's 128 × 128 tiles): plan[0] = kernel (0 none, 1 matrix-vector, 2 tensor-core
 * GEMM), plan[1..3] = grid x, y, z, plan[4] = threads per block, plan[5] = dynamic shared bytes,
 * plan[6] = activation rows per launch. Status as memra_cuda_matmul's shape checks. */
MEMRA_CUDA_API int memra_cuda_plan_matmul(int type, int64_t rows, int64_t n_in, int64_t n_out, int64_t * plan, int64_t plan_length);

#ifdef __cplusplus
}
#endif

#endif
