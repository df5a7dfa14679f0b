/*
 * cuda-internal.cuh — what the launchers of libmemra_cuda share: the context, error reporting
 * (FAIL, CUDA_CHECK: a status and a message, never an abort), argument checks and host-array
 * staging. Kernels live in the kernels/ headers; the .cu files next to this one launch them.
 */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include <functional>
#include <unordered_map>
#include <vector>

#include "launch-plan.h"
#include "memra_cuda.h"

/* Bytes of each of the two pinned halves an upload is staged through. */
#define MEMRA_CUDA_UPLOAD_CHUNK (8LL << 20)

struct memra_cuda_capture; /* graph.cu: what a capture has recorded so far */

/* normed's q8_0 codes that a projection's norm tail rounded (memra_cuda_residual_norm), kept for
 * the next call if it norms the same rows with the same weight (codes NULL: none kept). */
struct memra_cuda_norm_handoff {
    float * hidden;
    float * normed;
    const float * weight;
    float eps;
    int64_t rows, width;
    void * codes;  /* [rows, width] int8, the context's allocation */
    void * scales; /* [rows, width / 32] f32 */
};

struct memra_cuda {
    int device;
    cudaStream_t stream;
    memra_cuda_block_cache cache;                  /* unused allocations by size class */
    std::unordered_map<void *, int64_t> * live;    /* allocation → size class */
    void * upload_pinned[2];                       /* pinned halves for memra_cuda_upload */
    cudaEvent_t upload_done[2];                    /* the copy out of each half has finished */
    memra_cuda_arena arena;                        /* staging of host index arrays */
    void * arena_host;                             /* pinned, arena.capacity bytes */
    void * arena_device;                           /* device, arena.capacity bytes */
    char device_name[256];
    int compute_capability;
    int multiprocessors;
    int gemm;                /* tensor-core GEMM for prefill (MEMRA_CUDA_GEMM=0: off) */
    int int8_gemm;           /* q8_0/q4_0/q5_0 prefill on the int8 GEMM, else the f16-code GEMM (MEMRA_CUDA_INT8_GEMM=0: off) */
    int int8_pipeline;       /* q8_0_x8 prefill on gemm_int8_pipe_kernel (MEMRA_CUDA_INT8_PIPELINE=1, where the device has its shared memory) */
    int activation_rounding; /* activations rounded as ggml's CPU matmul (MEMRA_CUDA_ACTIVATION_ROUNDING=0: off) */
    int flash_attention;     /* tensor-core prefill attention over f16 KV (MEMRA_CUDA_FLASH_ATTENTION=0: off) */
    int mmv_steps;           /* steps of 8 blocks in flight per warp in q8_0 decode: 4, or MEMRA_CUDA_MMV_STEPS=2 */
    int mmv_wide;            /* q8_0_x8 decode with one warp a feature reads 16 bytes of codes a lane: 1, or MEMRA_CUDA_MMV_WIDE=0 (8 bytes) */
    int mmv_split;           /* warps per output feature in decode matrix-vector kernels: 0 (memra_cuda_plan_mmv_split's rule), or MEMRA_CUDA_MMV_SPLIT=1, 2 or 4 */
    int graph_input_copy;    /* a graph's inputs copied in one copy before each replay: 1, or MEMRA_CUDA_GRAPH_INPUT_COPY=0 (a copy node each) */
    int early_weights;       /* decode matrix-vector kernels load their first weights before waiting for the kernel before them: 1, or MEMRA_CUDA_EARLY_WEIGHTS=0 */
    int codes_mmv;           /* q4_0/q5_0/q4_K/q5_K/q6_K decode on q8 codes with __dp4a (MEMRA_CUDA_CODES_DP4A=0: off, f32 kernel) */
    int * attention_counters; /* device, MEMRA_CUDA_ATTENTION_COUNTERS zeros between launches: splits finished per (row, head) */
    int * swiglu_counters;    /* device, MEMRA_CUDA_SWIGLU_COUNTERS zeros between launches: gate/up blocks finished per 32 features */
    int * norm_tail_counter;  /* device, one zero between launches: blocks finished of a matrix-vector launch with a norm tail */
    memra_cuda_norm_handoff norm_handoff; /* dropped (freed) by the next memra_cuda_enter, taken by a norm that matches it */
    memra_cuda_capture * capture;               /* non-NULL between memra_cuda_graph_begin and _end */
    std::vector<memra_cuda_graph *> * graphs;   /* live graphs, destroyed with the context */
};

/* Raises gemm_int8_pipe_kernel's dynamic shared memory limit to what it needs (matmul.cu); a CUDA error status where the device refuses. */
int memra_cuda_prepare_int8_pipeline(void);

int memra_cuda_fail(int status, const char * format, ...) __attribute__((format(printf, 2, 3)));
/* A failed CUDA call: MEMRA_CUDA_ERROR_OUT_OF_MEMORY for cudaErrorMemoryAllocation, NO_DEVICE for
 * driver/device errors, else MEMRA_CUDA_ERROR_CUDA; the message names the function, the call and
 * the runtime's description. */
int memra_cuda_fail_cuda(cudaError_t error, const char * function, const char * call);

#define FAIL(status, ...) return memra_cuda_fail(status, __VA_ARGS__)
#define CHECK(call)                           \
    do {                                      \
        const int status_ = (call);           \
        if (status_ != MEMRA_CUDA_OK) return status_; \
    } while (0)
#define CUDA_CHECK(function, call)                                              \
    do {                                                                        \
        const cudaError_t error_ = (call);                                      \
        if (error_ != cudaSuccess) return memra_cuda_fail_cuda(error_, function, #call); \
    } while (0)
/* After a kernel launch: a launch error (bad configuration, no device) becomes a status. */
#define LAUNCH_CHECK(function, kernel)                                                      \
    do {                                                                                    \
        const cudaError_t error_ = cudaGetLastError();                                      \
        if (error_ != cudaSuccess) return memra_cuda_fail_cuda(error_, function, "launching " kernel); \
        if (memra_cuda_profiling) memra_cuda_profile_mark(kernel);                          \
    } while (0)

/* ---- kernel timings (profile.cu: memra_cuda_profile_begin / _end) ---- */
/* Non-zero while a context profiles: LAUNCH_CHECK then records an event after each launch. */
extern int memra_cuda_profiling;
/* An event on the profiled context's stream after the launch of `kernel` (a string literal). */
void memra_cuda_profile_mark(const char * kernel);
/* memra_cuda_profile_mark where a launcher checks its launch itself (not with LAUNCH_CHECK). */
#define PROFILE_MARK(kernel)                                  \
    do {                                                      \
        if (memra_cuda_profiling) memra_cuda_profile_mark(kernel); \
    } while (0)
/* Ends the profile of `cuda` if it has one (memra_cuda_destroy). */
void memra_cuda_profile_release(memra_cuda * cuda);

/* ---- capture (graph.cu) ---- */
/* A failure while this thread's context captures: remembered, and memra_cuda_graph_end fails. */
void memra_cuda_capture_note_failure(int status, const char * message);
/* memra_cuda_stage_many while capturing: the arrays become the graph's inputs. */
int memra_cuda_capture_stage(const char * function, memra_cuda * cuda, int count, const void * const * hosts, const int64_t * bytes, const void ** devices);
/* The pinned copy of a staged array (device pointer from the stage), refreshed before each replay. */
const void * memra_cuda_capture_host_copy(memra_cuda * cuda, const void * device);
/* A check to run again before each replay (on the pinned copies); returns a status. */
int memra_cuda_capture_check(const char * function, memra_cuda * cuda, std::function<int()> check);
/* The capture's allocator pool: reuse a block given back within it; track a new block; give one back (1 when it was the pool's). */
void * memra_cuda_capture_reuse(memra_cuda * cuda, int64_t size_class);
int memra_cuda_capture_track(memra_cuda * cuda, void * pointer, int64_t size_class);
int memra_cuda_capture_give_back(memra_cuda * cuda, void * pointer);
/* Ends a capture and destroys every graph (context destruction). */
void memra_cuda_graphs_release(memra_cuda * cuda);
/* Ops that make the host wait for the device fail while capturing. */
#define REFUSE_WHILE_CAPTURING(function, cuda, what)                                                                                   \
    do {                                                                                                                               \
        if ((cuda)->capture) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %s while capturing a graph (the host would wait for the device)", function, what); \
    } while (0)

/* Makes the context's device current; fails on a NULL context. */
int memra_cuda_enter(const char * function, memra_cuda * cuda);
/* `length` elements at `pointer` hold at least `needed`; pointer non-NULL when needed > 0. */
int memra_cuda_check_buffer(const char * function, const char * name, const void * pointer, int64_t length, int64_t needed);
int memra_cuda_check_size(const char * function, const char * name, int64_t value, int64_t minimum);
int memra_cuda_check_product(const char * function, const char * what, int64_t a, int64_t b, int64_t * product);
/* The checks memra_cuda_qk_norm_rope and memra_cuda_qk_norm_rope_kv share (sizes, head_dim, eps,
 * freq_base, q / k / weight buffers, q not overlapping k); warps_per_row: the launch's warps per row. */
int memra_cuda_check_qk_norm_rope(const char * function, const float * q, int64_t q_length, const float * k, int64_t k_length, const float * q_weight,
                                  const float * k_weight, int64_t weight_length, const int32_t * positions, int64_t rows, int64_t heads, int64_t kv_heads,
                                  int64_t head_dim, float eps, float freq_base, int64_t warps_per_row);
/* RoPE scaling given as 5 host floats (freq_scale, ext_factor, magnitude, corr_low, corr_high; NULL:
 * plain RoPE, { 1, 0, 1, 0, 0 }), checked as memra_cuda_rope_neox_scaled checks them, into out. */
int memra_cuda_check_rope_scaling(const char * function, const float * values, float out[5]);
/* Copies `bytes` of host memory into the context's device staging arena (stream-ordered); *device
 * points at the copy, valid for ops queued before the next synchronisation. */
int memra_cuda_stage(const char * function, memra_cuda * cuda, const void * host, int64_t bytes, const void ** device);
/* Several arrays in one reservation (so that staging the second cannot recycle the first's space). */
int memra_cuda_stage_many(const char * function, memra_cuda * cuda, int count, const void * const * hosts, const int64_t * bytes, const void ** devices);
/* Weight checks shared by the launchers (elementwise.cu). */
int memra_cuda_check_weight_type(const char * function, int type);
int memra_cuda_check_weight(const char * function, const char * name, int type, const void * data, int64_t bytes, int64_t rows, int64_t n,
                            int64_t * row_bytes);
/* Waits for the stream and resets the staging arena. */
int memra_cuda_wait(const char * function, memra_cuda * cuda);
/* The grouped MoE GEMMs' row tiles on the device (moe_group_kernel): a table for the int8 GEMMs'
 * tiles (int8_rows: 128, or 64 with the pipelined int8 GEMM, whose 64-row kernel then takes the
 * q8_0_x8 experts; gemm_int8_kernel's 128-row tiles cover a 64-row entry, half empty) and one for
 * the other GEMMs' 64-row tiles, {expert, first row, end row} per entry, and their entries
 * (memra_cuda_moe_tile_bound). */
struct memra_cuda_moe_tiles {
    const int32_t * int8_tiles;
    int64_t int8_bound;
    int64_t int8_rows;
    const int32_t * gemm_tiles;
    int64_t gemm_bound;
};
/* matmul.cu: count projections of the same rows x (sorted by expert), each row by its expert's
 * matrix as `tiles` say, as memra_cuda_matmul_shared (or, with up, memra_cuda_swiglu_matmul)
 * otherwise does; every weight must have a GEMM for `rows` rows and no q8_1 activations. */
int memra_cuda_grouped_matmul(const char * function, memra_cuda * cuda, int count, float * const * outs, const int64_t * out_lengths, const float * x,
                              int64_t x_length, int64_t rows, const int32_t * types, const void * const * weights, const int64_t * weight_bytes, int64_t n_in,
                              const int64_t * n_outs, int64_t experts, const float * up, int64_t up_length, const memra_cuda_moe_tiles & tiles);
/* q8_0 codes and block scales of a matmul's input, rounded by the op that wrote the input. */
struct memra_cuda_q8_0_codes {
    const int8_t * codes;
    const float * scales;
};
/* 1 where memra_cuda_matmul of `type` over `rows` rows reads its input as q8_0 codes and block
 * scales (the integer GEMMs, the q8_0 matrix-vector kernel); the codes memra_cuda_matmul_with_codes
 * then takes instead of rounding x. */
int memra_cuda_matmul_reads_q8_0_codes(memra_cuda * cuda, int type, int64_t rows, int64_t n_in, int64_t n_out);
/* memra_cuda_matmul of x, whose q8_0 codes are `codes` (used where the kernel reads codes; null
 * codes: rounded here as memra_cuda_matmul does). */
int memra_cuda_matmul_with_codes(const char * function, memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows,
                                 int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, const memra_cuda_q8_0_codes & codes,
                                 const memra_cuda_residual_norm * then = nullptr);
/* A memra_cuda_residual_norm (NULL: nothing to check) after a projection `out` of rows × n_out by
 * a `type` weight of n_in inputs: one the norm tail takes (memra_cuda_matmul_norm_tail_applies), its
 * buffers large enough and apart from each other and from out. */
int memra_cuda_check_residual_norm(const char * function, memra_cuda * cuda, const memra_cuda_residual_norm * then, const float * out, int type, int64_t rows,
                                   int64_t n_in, int64_t n_out);
/* Frees the context's kept norm codes, if any (memra_cuda_enter, the end of a capture). */
void memra_cuda_drop_norm_handoff(memra_cuda * cuda);
/* The kept norm codes where they are those of RMSNorm(hidden) · weight in `normed` (rows of width,
 * eps): true and *codes set, the caller then owning both allocations (memra_cuda_free them after
 * queuing their readers); else false (and whatever was kept is freed). Call before the op's
 * memra_cuda_enter, which would drop them. */
bool memra_cuda_take_norm_handoff(memra_cuda * cuda, const float * normed, const float * hidden, const float * weight, float eps, int64_t rows, int64_t width,
                                  memra_cuda_q8_0_codes * codes);
/* Whether the kept norm codes are those of RMSNorm(hidden) · weight in `normed` (rows of width,
 * eps), leaving them kept: a norm that finds its result made launches nothing and leaves the codes
 * to the matmul of normed that follows it. Call before memra_cuda_enter. */
bool memra_cuda_norm_handoff_holds(memra_cuda * cuda, const float * normed, const float * hidden, const float * weight, float eps, int64_t rows, int64_t width);
/* The kept norm codes where x is their normed and a matmul of its first `rows` rows (of width)
 * can read them: true and *codes set (the caller owning them, as memra_cuda_take_norm_handoff's);
 * else false (and whatever was kept is freed). Call before memra_cuda_enter. */
bool memra_cuda_take_codes_of(memra_cuda * cuda, const float * x, int64_t rows, int64_t width, memra_cuda_q8_0_codes * codes);
/* Norm codes a consumer took (memra_cuda_take_norm_handoff), freed when it has queued its kernels. */
struct memra_cuda_kept_codes {
    memra_cuda * cuda;
    memra_cuda_q8_0_codes codes = {nullptr, nullptr};
    explicit memra_cuda_kept_codes(memra_cuda * context) : cuda(context) {}
    memra_cuda_kept_codes(const memra_cuda_kept_codes &) = delete;
    memra_cuda_kept_codes & operator=(const memra_cuda_kept_codes &) = delete;
    bool take(const float * normed, const float * hidden, const float * weight, float eps, int64_t rows, int64_t width) {
        return memra_cuda_take_norm_handoff(cuda, normed, hidden, weight, eps, rows, width, &codes);
    }
    bool take_of(const float * x, int64_t rows, int64_t width) { return memra_cuda_take_codes_of(cuda, x, rows, width, &codes); }
    ~memra_cuda_kept_codes() {
        if (codes.codes) memra_cuda_free(cuda, (void *)codes.codes);
        if (codes.scales) memra_cuda_free(cuda, (void *)codes.scales);
    }
};
/* A dim3 from a planned launch. */
static inline dim3 memra_grid(const memra_cuda_launch & launch) { return dim3((unsigned)launch.grid_x, (unsigned)launch.grid_y, (unsigned)launch.grid_z); }
