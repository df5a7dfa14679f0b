/*
 * matmul.cu — launchers of memra_cuda_matmul / memra_cuda_expert_matmul (kernels in
 * kernels/matmul.cuh; the choice of kernel, grid and rows per launch in launch-plan.c).
 */
#include <string.h>

#include "cuda-internal.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/matmul.cuh"
#include "kernels/norm-rounding.cuh"
#include "rounding-launch.cuh"

using namespace memra_cuda_kernels;

template <int TYPE, bool SPLIT>
static void launch_matrix_vector_split(dim3 grid, int threads, cudaStream_t stream, const matrix_segments & segments, const float * x, int64_t row_bytes,
                                       int rows, int64_t n_in, int early, int shift) {
    if (rows <= 1) MEMRA_LAUNCH(grid, threads, 0, stream, matrix_vector_kernel<TYPE, 1, SPLIT>)(segments, x, row_bytes, rows, n_in, early, shift);
    else if (rows <= 2) MEMRA_LAUNCH(grid, threads, 0, stream, matrix_vector_kernel<TYPE, 2, SPLIT>)(segments, x, row_bytes, rows, n_in, early, shift);
    else if (rows <= 4) MEMRA_LAUNCH(grid, threads, 0, stream, matrix_vector_kernel<TYPE, 4, SPLIT>)(segments, x, row_bytes, rows, n_in, early, shift);
    else MEMRA_LAUNCH(grid, threads, 0, stream, matrix_vector_kernel<TYPE, 8, SPLIT>)(segments, x, row_bytes, rows, n_in, early, shift);
}

/* shift: log2 of the warps per output feature (memra_cuda_plan_mmv_split), 0, 1 or 2. */
template <int TYPE>
static void launch_matrix_vector(dim3 grid, int threads, cudaStream_t stream, const matrix_segments & segments, const float * x, int64_t row_bytes, int rows,
                                 int64_t n_in, int early, int shift) {
    if (shift > 0) launch_matrix_vector_split<TYPE, true>(grid, threads, stream, segments, x, row_bytes, rows, n_in, early, shift);
    else launch_matrix_vector_split<TYPE, false>(grid, threads, stream, segments, x, row_bytes, rows, n_in, early, 0);
}

template <bool X8, int STEPS, bool SPLIT, int EPILOGUE = MMV_PLAIN, bool WIDE = false>
static void launch_matrix_vector_q8_0_split(dim3 grid, int threads, cudaStream_t stream, const matrix_segments & segments, const int8_t * codes,
                                            const float * scales, int64_t row_bytes, int rows, int64_t n_in, int early, int shift,
                                            const swiglu_epilogue & epilogue = swiglu_epilogue{}, const norm_tail & tail = norm_tail{}) {
#define MEMRA_Q8_0_MMV(ROWS)                                                                                                                                \
    MEMRA_LAUNCH(grid, threads, 0, stream, matrix_vector_q8_0_kernel<ROWS, STEPS, SPLIT, EPILOGUE, X8, WIDE>)(segments, codes, scales, row_bytes, rows, n_in, early, \
                                                                                                   shift, epilogue, tail)
    if constexpr (EPILOGUE == MMV_NORM_TAIL) {
        /* memra_cuda_matmul_norm_tail_applies: 1 or 2 rows (the tail's one block norms every row) */
        if (rows <= 1) MEMRA_Q8_0_MMV(1);
        else MEMRA_Q8_0_MMV(2);
    } else {
        if (rows <= 1) MEMRA_Q8_0_MMV(1);
        else if (rows <= 2) MEMRA_Q8_0_MMV(2);
        else if (rows <= 4) MEMRA_Q8_0_MMV(4);
        else MEMRA_Q8_0_MMV(8);
    }
#undef MEMRA_Q8_0_MMV
}

template <bool X8, int STEPS>
static void launch_matrix_vector_q8_0_steps(dim3 grid, int threads, cudaStream_t stream, const matrix_segments & segments, const int8_t * codes,
                                            const float * scales, int64_t row_bytes, int rows, int64_t n_in, int early, int shift) {
    if (shift > 0) launch_matrix_vector_q8_0_split<X8, STEPS, true>(grid, threads, stream, segments, codes, scales, row_bytes, rows, n_in, early, shift);
    else launch_matrix_vector_q8_0_split<X8, STEPS, false>(grid, threads, stream, segments, codes, scales, row_bytes, rows, n_in, early, 0);
}

/* X8: the weights in the q8_0_x8 layout (memra_cuda_repack). */
template <bool X8>
static void launch_matrix_vector_q8_0(const memra_cuda * cuda, dim3 grid, int threads, const matrix_segments & segments, const int8_t * codes,
                                      const float * scales, int64_t row_bytes, int rows, int64_t n_in, int shift, const swiglu_epilogue * epilogue,
                                      const norm_tail * tail) {
    if constexpr (X8) {
        /* the q8_0_x8 layout: 16-byte loads (MEMRA_CUDA_MMV_WIDE=0: 8-byte); one warp a feature, 2
         * steps of 16 blocks in flight where nothing follows in the kernel (mmv-lab.cu on the H200:
         * 6,144 features of 4,096 inputs in 9.3 µs, 10.8 with 4 steps; the other unsplit shapes
         * within 3% either way), 4 before an epilogue */
        if (cuda->mmv_wide && shift > 0 && !epilogue && cuda->mmv_steps == 4) {
            /* a feature split over warps: 2 steps of 16 blocks, the 8-byte loop's iteration of 32 */
            if (tail) {
                launch_matrix_vector_q8_0_split<true, 2, true, MMV_NORM_TAIL, true>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in,
                                                                                cuda->early_weights, shift, swiglu_epilogue{}, *tail);
            } else {
                launch_matrix_vector_q8_0_split<true, 2, true, MMV_PLAIN, true>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in,
                                                                            cuda->early_weights, shift);
            }
            return;
        }
        if (cuda->mmv_wide && shift == 0) {
            if (epilogue) {
                launch_matrix_vector_q8_0_split<true, 4, false, MMV_SWIGLU, true>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in,
                                                                              cuda->early_weights, 0, *epilogue);
            } else if (tail) {
                launch_matrix_vector_q8_0_split<true, 4, false, MMV_NORM_TAIL, true>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in,
                                                                                 cuda->early_weights, 0, swiglu_epilogue{}, *tail);
            } else {
                launch_matrix_vector_q8_0_split<true, 2, false, MMV_PLAIN, true>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in,
                                                                             cuda->early_weights, 0);
            }
            return;
        }
    }
    if (epilogue) { /* memra_cuda_norm_swiglu_matmul checked: 4 steps, one warp a feature */
        launch_matrix_vector_q8_0_split<X8, 4, false, MMV_SWIGLU>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in, cuda->early_weights, 0,
                                                              *epilogue);
        return;
    }
    if (tail) { /* memra_cuda_matmul_norm_tail_applies checked: 4 steps, 1 or 2 rows */
        if (shift > 0) {
            launch_matrix_vector_q8_0_split<X8, 4, true, MMV_NORM_TAIL>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in, cuda->early_weights,
                                                                    shift, swiglu_epilogue{}, *tail);
        } else {
            launch_matrix_vector_q8_0_split<X8, 4, false, MMV_NORM_TAIL>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in, cuda->early_weights,
                                                                     0, swiglu_epilogue{}, *tail);
        }
        return;
    }
    if (cuda->mmv_steps == 2) launch_matrix_vector_q8_0_steps<X8, 2>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in, cuda->early_weights, shift);
    else launch_matrix_vector_q8_0_steps<X8, 4>(grid, threads, cuda->stream, segments, codes, scales, row_bytes, rows, n_in, cuda->early_weights, shift);
}

template <int TYPE, bool SPLIT>
static void launch_matrix_vector_codes_split(dim3 grid, int threads, cudaStream_t stream, const matrix_segments & segments, const int8_t * codes,
                                             const float * scales, int64_t row_bytes, int rows, int64_t n_in, int early, int shift) {
#define MEMRA_CODES_MMV(ROWS) \
    MEMRA_LAUNCH(grid, threads, 0, stream, matrix_vector_codes_kernel<TYPE, ROWS, SPLIT>)(segments, codes, scales, row_bytes, rows, n_in, early, shift)
    if (rows <= 1) MEMRA_CODES_MMV(1);
    else if (rows <= 2) MEMRA_CODES_MMV(2);
    else if (rows <= 4) MEMRA_CODES_MMV(4);
    else MEMRA_CODES_MMV(8);
#undef MEMRA_CODES_MMV
}

template <int TYPE>
static void launch_matrix_vector_codes_type(dim3 grid, int threads, cudaStream_t stream, const matrix_segments & segments, const int8_t * codes,
                                              const float * scales, int64_t row_bytes, int rows, int64_t n_in, int early, int shift) {
    if (shift > 0) launch_matrix_vector_codes_split<TYPE, true>(grid, threads, stream, segments, codes, scales, row_bytes, rows, n_in, early, shift);
    else launch_matrix_vector_codes_split<TYPE, false>(grid, threads, stream, segments, codes, scales, row_bytes, rows, n_in, early, 0);
}

static void launch_matrix_vector_codes(const memra_cuda * cuda, int type, dim3 grid, int threads, const matrix_segments & segments, const int8_t * codes,
                                       const float * scales, int64_t row_bytes, int rows, int64_t n_in, int shift) {
    cudaStream_t stream = cuda->stream;
    const int early = cuda->early_weights;
#define MEMRA_CODES_TYPE(T) launch_matrix_vector_codes_type<T>(grid, threads, stream, segments, codes, scales, row_bytes, rows, n_in, early, shift)
    if (type == MEMRA_CUDA_TYPE_Q4_0) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q4_0);
    else if (type == MEMRA_CUDA_TYPE_Q5_0) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q5_0);
    else if (type == MEMRA_CUDA_TYPE_Q4_K) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q4_K);
    else if (type == MEMRA_CUDA_TYPE_Q5_K) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q5_K);
    else if (type == MEMRA_CUDA_TYPE_Q2_K) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q2_K);
    else if (type == MEMRA_CUDA_TYPE_Q3_K) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q3_K);
    else if (type == MEMRA_CUDA_TYPE_IQ4_NL) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ4_NL);
    else if (type == MEMRA_CUDA_TYPE_IQ4_XS) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ4_XS);
    else if (type == MEMRA_CUDA_TYPE_IQ2_XXS) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ2_XXS);
    else if (type == MEMRA_CUDA_TYPE_IQ2_XS) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ2_XS);
    else if (type == MEMRA_CUDA_TYPE_IQ2_S) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ2_S);
    else if (type == MEMRA_CUDA_TYPE_IQ3_XXS) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ3_XXS);
    else if (type == MEMRA_CUDA_TYPE_IQ3_S) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ3_S);
    else if (type == MEMRA_CUDA_TYPE_IQ1_S) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ1_S);
    else if (type == MEMRA_CUDA_TYPE_IQ1_M) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_IQ1_M);
    else if (type == MEMRA_CUDA_TYPE_Q6_K_X8) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q6_K_X8);
    else if (type == MEMRA_CUDA_TYPE_Q4_0_X8) MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q4_0_X8);
    else MEMRA_CODES_TYPE(MEMRA_CUDA_TYPE_Q6_K);
#undef MEMRA_CODES_TYPE
}

/* One weight matrix of a matmul group, checked and planned. */
struct matmul_target {
    float * out;
    int type;
    const uint8_t * w; /* the expert's matrix */
    int64_t row_bytes, n_out;
    memra_cuda_matmul_plan plan;
    int rounding;        /* MEMRA_CUDA_ROUND_* of the weight type (NONE: f32 activations) */
    bool codes;          /* reads the activations' q8 codes and block scales, not rounded values */
    bool integer_gemm;   /* prefill on q8 codes: gemm_int8_kernel (int8_gemm) or gemm_codes_kernel */
    bool int8_gemm;      /* q8_0/q4_0/q5_0 prefill: gemm_int8_kernel, with its own plan */
    int pipe_rows;       /* int8_gemm on gemm_int8_pipe_kernel<pipe_rows> (64 or 128; 0: gemm_int8_kernel) */
    int input;           /* index of its rounded input */
};

/* The row tile of the pipelined int8 GEMM for a launch of `rows` rows of `type` weights, grouped
 * (the expert table's tiles) or not: 64 for at most 64 rows and for grouped rows (moe.cu builds
 * the table with 64-row tiles when the pipeline is on), else 128; 0 where gemm_int8_kernel runs
 * (no pipeline, or not q8_0_x8). */
static int int8_pipe_rows(const memra_cuda * cuda, int type, bool grouped, int64_t rows) {
    if (!cuda->int8_pipeline || type != MEMRA_CUDA_TYPE_Q8_0_X8) return 0;
    return grouped || rows <= MEMRA_CUDA_INT8_PIPE_SMALL_ROWS ? 64 : 128;
}

/* The activations as one rounding mode leaves them: values, or q8 codes and block scales (plus the
 * q8_1 offset corrections), in workspace from the caching allocator, returned when the call has
 * queued its kernels (stream-ordered reuse). */
struct rounded_input {
    int rounding;
    bool codes;
    int block_shift;
    workspace values, corrections, codes_memory, scales;
    const int8_t * code_data;  /* the codes and block scales the kernels read: codes_memory and */
    const float * scale_data;  /* scales, or the caller's (q8_0 codes rounded by the previous op) */
    explicit rounded_input(memra_cuda * cuda)
        : rounding(0), codes(false), block_shift(5), values(cuda), corrections(cuda), codes_memory(cuda), scales(cuda), code_data(nullptr), scale_data(nullptr) {}
};

static const int MAX_GROUP = 8;

/* The RMSNorm that writes a group's input (memra_cuda_norm_matmul_shared): x = RMSNorm(hidden) ·
 * weight, adding delta to hidden first when given. */
struct norm_step {
    float * hidden;
    int64_t hidden_length;
    const float * delta; /* NULL: no residual add */
    int64_t delta_length;
    const float * weight;
    int64_t weight_length;
    float eps;
};

static bool q8_rounding(int rounding) { return rounding == MEMRA_CUDA_ROUND_Q8_0 || rounding == MEMRA_CUDA_ROUND_Q8_1 || rounding == MEMRA_CUDA_ROUND_Q8_K; }

/* Whether a matmul of `type` planned as `kernel` reads its input as q8 codes and block scales
 * rather than rounded values: the integer GEMMs (any q8 rounding), the __dp4a matrix-vector kernel
 * of q8_0 weights, and that of q4_0/q5_0/q4_K/q5_K/q6_K weights where `codes_vector` (the
 * context's codes_mmv). */
static bool reads_codes(int kernel, int type, int rounding, bool codes_vector) {
    return (kernel == MEMRA_CUDA_MATMUL_GEMM && q8_rounding(rounding)) ||
           (kernel == MEMRA_CUDA_MATMUL_VECTOR && memra_cuda_type_is_q8_0(type) && rounding == MEMRA_CUDA_ROUND_Q8_0) ||
           (kernel == MEMRA_CUDA_MATMUL_VECTOR && codes_vector && codes_matrix_vector_type(type) && q8_rounding(rounding));
}

/* norm_round_kernel for a runtime q8 rounding mode and output form. */
static void launch_norm_round(int rounding, bool codes, const memra_cuda_launch & launch, cudaStream_t stream, float * out, const norm_step & norm, int64_t rows,
                              int64_t width, float * rounded, float * corrections, int8_t * code_out, float * scales) {
    const dim3 grid = memra_grid(launch);
#define MEMRA_NORM_ROUND(MODE, CODES, ...)                                                                                                              \
    MEMRA_LAUNCH(grid, launch.threads, 0, stream, norm_round_kernel<MODE, CODES, ##__VA_ARGS__>)(out, norm.hidden, norm.delta, norm.weight, rows, width,      \
                                                                                                norm.eps, rounded, corrections, code_out, scales)
    if (rounding == MEMRA_CUDA_ROUND_Q8_0) {
        /* a decode step's few rows: each row's values held in registers from load to rounding */
        if (codes && rows <= MEMRA_CUDA_NORM_REGISTER_ROWS) MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_0, true, true);
        else if (codes) MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_0, true);
        else MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_0, false);
    } else if (rounding == MEMRA_CUDA_ROUND_Q8_1) {
        if (codes) MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_1, true);
        else MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_1, false);
    } else {
        if (codes) MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_K, true);
        else MEMRA_NORM_ROUND(MEMRA_CUDA_ROUND_Q8_K, false);
    }
#undef MEMRA_NORM_ROUND
}

/*
 * out[t] = x · W[t] for `count` weights of `n_in` inputs (a group: Q/K/V, gate/up; one weight for
 * memra_cuda_matmul). The activations are rounded once per rounding mode the group needs; decode
 * matrices of one type go through one matrix-vector launch (up to MEMRA_CUDA_MMV_SEGMENTS at a
 * time). Every matrix's result is the same as its own memra_cuda_matmul's, bit for bit. With `up`,
 * the activations are SwiGLU's silu(x) · up, computed as the rounding reads them (materialized
 * only for weights whose activations are not rounded).
 */
static int matmul_group(const char * function, memra_cuda * cuda, int count, float * const * outs, const int64_t * out_lengths, const float * x,
                        int64_t x_length, int64_t rows, const int32_t * types, const void * const * weights, const int64_t * weight_bytes, int64_t n_in,
                        const int64_t * n_outs, int64_t experts, int64_t expert, const float * up = nullptr, int64_t up_length = 0,
                        const norm_step * norm = nullptr, const memra_cuda_moe_tiles * groups = nullptr, const memra_cuda_q8_0_codes * given = nullptr,
                        const swiglu_epilogue * epilogue = nullptr, const norm_tail * tail = nullptr) {
    CHECK(memra_cuda_enter(function, cuda));
    bool epilogue_launched = false, tail_launched = false;
    if (count < 1 || count > MAX_GROUP) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %d weights (1..%d)", function, count, MAX_GROUP);
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "n_in", n_in, 1));
    CHECK(memra_cuda_check_size(function, "experts", experts, 1));
    if (expert < 0 || expert >= experts) FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: expert %lld is outside 0..%lld", function, (long long)expert, (long long)experts - 1);
    int64_t x_needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * n_in", rows, n_in, &x_needed));
    CHECK(memra_cuda_check_buffer(function, "x", x, x_length, x_needed));
    if ((uintptr_t)x % 16 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: x must be 16-byte aligned", function);
    if (up) CHECK(memra_cuda_check_buffer(function, "up", up, up_length, x_needed));
    if (norm) {
        if (up) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: a normed group takes no up", function);
        CHECK(memra_cuda_check_buffer(function, "hidden", norm->hidden, norm->hidden_length, x_needed));
        if (norm->delta) CHECK(memra_cuda_check_buffer(function, "delta", norm->delta, norm->delta_length, x_needed));
        CHECK(memra_cuda_check_buffer(function, "norm_weight", norm->weight, norm->weight_length, n_in));
        if (!(norm->eps >= 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: eps must be non-negative", function);
        const uintptr_t o = (uintptr_t)x, h = (uintptr_t)norm->hidden, d = (uintptr_t)norm->delta, bytes = (uintptr_t)x_needed * 4;
        if (rows > 0 && ((o < h + bytes && h < o + bytes) || (d && ((o < d + bytes && d < o + bytes) || (h < d + bytes && d < h + bytes))))) {
            FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: normed, hidden and delta must not overlap", function);
        }
    }
    matmul_target targets[MAX_GROUP];
    for (int t = 0; t < count; t++) {
        matmul_target & target = targets[t];
        target.out = outs[t];
        target.type = types[t];
        target.n_out = n_outs[t];
        CHECK(memra_cuda_check_size(function, "n_out", target.n_out, 1));
        int64_t matrices_rows = 0, out_needed = 0;
        CHECK(memra_cuda_check_product(function, "experts * n_out", experts, target.n_out, &matrices_rows));
        CHECK(memra_cuda_check_weight(function, "weight", target.type, weights[t], weight_bytes[t], matrices_rows, n_in, &target.row_bytes));
        CHECK(memra_cuda_check_product(function, "rows * n_out", rows, target.n_out, &out_needed));
        CHECK(memra_cuda_check_buffer(function, "out", target.out, out_lengths[t], out_needed));
        const uintptr_t o = (uintptr_t)target.out, i = (uintptr_t)x;
        if (rows > 0 && o < i + (uintptr_t)x_needed * 4 && i < o + (uintptr_t)out_needed * 4) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
        const uintptr_t u = (uintptr_t)up;
        if (up && rows > 0 && o < u + (uintptr_t)x_needed * 4 && u < o + (uintptr_t)out_needed * 4) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps up", function);
        if (norm) {
            const uintptr_t h = (uintptr_t)norm->hidden, d = (uintptr_t)norm->delta, x_bytes = (uintptr_t)x_needed * 4, out_bytes = (uintptr_t)out_needed * 4;
            if (rows > 0 && ((o < h + x_bytes && h < o + out_bytes) || (d && o < d + x_bytes && d < o + out_bytes)))
                FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps hidden or delta", function);
        }
        for (int u = 0; u < t; u++) {
            const uintptr_t p = (uintptr_t)targets[u].out;
            if (rows > 0 && o < p + (uintptr_t)(rows * targets[u].n_out) * 4 && p < o + (uintptr_t)out_needed * 4)
                FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the outputs of weights %d and %d overlap", function, u, t);
        }
        if ((uintptr_t)weights[t] % 16 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: weights must be 16-byte aligned", function);
        char message[512];
        const int status = memra_cuda_plan_matmul_with(target.type, rows, n_in, target.n_out, cuda->gemm, &target.plan, message, sizeof message);
        if (status != MEMRA_CUDA_OK) FAIL(status, "%s: %s", function, message);
        target.w = (const uint8_t *)weights[t] + expert * target.n_out * target.row_bytes;
        target.rounding = cuda->activation_rounding ? memra_cuda_activation_rounding(target.type) : MEMRA_CUDA_ROUND_NONE;
        const bool q8 = q8_rounding(target.rounding);
        /* With q8 rounding, the integer kernels take the activations' codes and block scales: the
         * integer GEMM for prefill, the __dp4a matrix-vector kernel for q8_0 decode. */
        target.integer_gemm = target.plan.kernel == MEMRA_CUDA_MATMUL_GEMM && q8;
        /* Weights with int8 codes and 32-value scales on q8_0 codes: the int8 GEMM, 128 × 128 tiles. */
        target.int8_gemm = target.integer_gemm && cuda->int8_gemm && target.rounding == MEMRA_CUDA_ROUND_Q8_0 && memra_cuda_int8_gemm_supports(target.type);
        /* The int8 GEMM's blocks that run at once, for its split-K: one an SM, two for the pipelined
         * kernel's 64-row tiles. (rows ≤ 64 is one launch: rows_per_launch holds whole 128-row tiles.) */
        target.pipe_rows = target.int8_gemm ? int8_pipe_rows(cuda, target.type, groups != nullptr, rows) : 0;
        const int64_t slots = (int64_t)cuda->multiprocessors * (target.pipe_rows == 64 ? 2 : 1);
        if (target.int8_gemm) {
            const int replanned = memra_cuda_plan_int8_gemm(target.type, rows, n_in, target.n_out, slots, &target.plan, message, sizeof message);
            if (replanned != MEMRA_CUDA_OK) FAIL(replanned, "%s: %s", function, message);
        }
        target.codes = reads_codes(target.plan.kernel, target.type, target.rounding, cuda->codes_mmv != 0);
        if (groups) {
            /* Grouped experts: the GEMM over the tile table's row tiles, every expert's matrix from weights[t]. */
            if (target.plan.kernel != MEMRA_CUDA_MATMUL_GEMM || target.rounding == MEMRA_CUDA_ROUND_Q8_1)
                FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: weight type %d has no grouped GEMM for %lld rows", function, target.type, (long long)rows);
            const int64_t bound = target.int8_gemm ? groups->int8_bound : groups->gemm_bound;
            /* (the int8 plan's grid y counts 128-row tiles: bound of them, whatever the table's tile rows) */
            const int64_t tile_rows = target.int8_gemm ? MEMRA_CUDA_INT8_GEMM_TILE_M : MEMRA_CUDA_GEMM_TILE_M;
            if (bound > MEMRA_CUDA_MAX_GRID_YZ) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %lld row tiles in one grouped GEMM", function, (long long)bound);
            const int replanned = target.int8_gemm ? memra_cuda_plan_int8_gemm(target.type, bound * tile_rows, n_in, target.n_out, slots, &target.plan, message, sizeof message)
                                                   : memra_cuda_plan_matmul_with(target.type, bound * tile_rows, n_in, target.n_out, 1, &target.plan, message, sizeof message);
            if (replanned != MEMRA_CUDA_OK) FAIL(replanned, "%s: %s", function, message);
            if (target.plan.kernel != MEMRA_CUDA_MATMUL_GEMM || target.plan.launch.grid_y != bound)
                FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: the grouped GEMM's plan has %lld row tiles, not %lld", function, (long long)target.plan.launch.grid_y,
                     (long long)bound);
        }
    }
    if (rows == 0) return MEMRA_CUDA_OK;

    /* SwiGLU's product for weights that read unrounded activations. */
    workspace product(cuda);
    const float * plain = x;
    if (up) {
        bool needed = false;
        for (int t = 0; t < count; t++) needed = needed || targets[t].rounding == MEMRA_CUDA_ROUND_NONE;
        if (needed) {
            CHECK(product.allocate(x_needed * 4));
            const memra_cuda_launch launch = memra_cuda_plan_elementwise(x_needed);
            MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, swiglu_kernel)((float *)product.pointer, x, up, x_needed);
            LAUNCH_CHECK(function, "swiglu_kernel");
            plain = (const float *)product.pointer;
        }
    }

    /* The norm first: fused with the first rounding when that is a q8 one (the first input rounded
     * below), else on its own. */
    bool fuse_norm = false;
    if (norm) {
        for (int t = 0; t < count; t++) {
            if (targets[t].rounding == MEMRA_CUDA_ROUND_NONE) continue;
            fuse_norm = q8_rounding(targets[t].rounding);
            break;
        }
        if (!fuse_norm) {
            const memra_cuda_launch launch = memra_cuda_plan_rows(rows, n_in);
            if (norm->delta) {
                MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, add_rms_norm_kernel)((float *)x, norm->hidden, norm->delta, norm->weight, rows, n_in, norm->eps);
            } else {
                MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, rms_norm_kernel)((float *)x, norm->hidden, norm->weight, rows, n_in, norm->eps);
            }
            LAUNCH_CHECK(function, "rms_norm_kernel");
        }
    }

    /* Each distinct (rounding, codes) the group needs, rounded once. */
    /* at most one per weight (up to six distinct: q8_0 codes and values, q8_1, q8_K, f16, bf16) */
    rounded_input inputs[MAX_GROUP] = {rounded_input(cuda), rounded_input(cuda), rounded_input(cuda), rounded_input(cuda),
                                       rounded_input(cuda), rounded_input(cuda), rounded_input(cuda), rounded_input(cuda)};
    static_assert(MAX_GROUP == 8, "one rounded input per weight of a group");
    int input_count = 0;
    for (int t = 0; t < count; t++) {
        matmul_target & target = targets[t];
        target.input = -1;
        if (target.rounding == MEMRA_CUDA_ROUND_NONE) continue;
        for (int k = 0; k < input_count; k++) {
            if (inputs[k].rounding == target.rounding && inputs[k].codes == target.codes) target.input = k;
        }
        if (target.input >= 0) continue;
        rounded_input & input = inputs[input_count];
        target.input = input_count++;
        input.rounding = target.rounding;
        input.codes = target.codes;
        input.block_shift = target.rounding == MEMRA_CUDA_ROUND_Q8_K ? 8 : 5;
        if (given && input.codes && input.rounding == MEMRA_CUDA_ROUND_Q8_0 && !fuse_norm) {
            /* x's q8_0 codes, already rounded by the op that wrote x */
            input.code_data = given->codes;
            input.scale_data = given->scales;
            continue;
        }
        if (input.codes) {
            CHECK(input.codes_memory.allocate(x_needed));
            CHECK(input.scales.allocate((x_needed >> input.block_shift) * 4));
            input.code_data = (const int8_t *)input.codes_memory.pointer;
            input.scale_data = (const float *)input.scales.pointer;
        } else {
            CHECK(input.values.allocate(x_needed * 4));
        }
        if (input.rounding == MEMRA_CUDA_ROUND_Q8_1) CHECK(input.corrections.allocate(x_needed / 32 * 4));
        if (fuse_norm && target.input == 0) {
            launch_norm_round(input.rounding, input.codes, memra_cuda_plan_rows(rows, n_in), cuda->stream, (float *)x, *norm, rows, n_in, (float *)input.values.pointer,
                              (float *)input.corrections.pointer, (int8_t *)input.codes_memory.pointer, (float *)input.scales.pointer);
            LAUNCH_CHECK(function, "norm_round_kernel");
            continue;
        }
        const memra_cuda_launch launch = memra_cuda_plan_rounding(input.rounding, rows, n_in);
        if (input.codes) {
            launch_rounding<true>(input.rounding, launch, cuda->stream, nullptr, (float *)input.corrections.pointer, x, x_needed, (int8_t *)input.codes_memory.pointer,
                                  (float *)input.scales.pointer, up);
        } else {
            launch_rounding<false>(input.rounding, launch, cuda->stream, (float *)input.values.pointer, (float *)input.corrections.pointer, x, x_needed, nullptr,
                                   nullptr, up);
        }
        LAUNCH_CHECK(function, "round_activations_kernel");
    }

    for (int t = 0; t < count;) {
        const matmul_target & first_target = targets[t];
        if (first_target.plan.kernel == MEMRA_CUDA_MATMUL_NONE) {
            t++;
            continue;
        }
        const rounded_input * input = first_target.input >= 0 ? &inputs[first_target.input] : nullptr;
        const float * source = input && !input->codes ? (const float *)input->values.pointer : plain;
        /* Matrix-vector: the next matrices of the same type and input join this launch. */
        int group = 1;
        if (first_target.plan.kernel == MEMRA_CUDA_MATMUL_VECTOR) {
            while (group < MEMRA_CUDA_MMV_SEGMENTS && t + group < count && targets[t + group].plan.kernel == MEMRA_CUDA_MATMUL_VECTOR &&
                   targets[t + group].type == first_target.type && targets[t + group].input == first_target.input)
                group++;
        }
        const memra_cuda_matmul_plan & plan = first_target.plan;
        for (int64_t first = 0; first < rows; first += plan.rows_per_launch) {
            const int64_t chunk = rows - first < plan.rows_per_launch ? rows - first : plan.rows_per_launch;
            if (plan.kernel == MEMRA_CUDA_MATMUL_GEMM) {
                float * os = first_target.out + first * first_target.n_out;
                dim3 grid = memra_grid(plan.launch);
                const int64_t tile_rows = first_target.int8_gemm ? MEMRA_CUDA_INT8_GEMM_TILE_M : MEMRA_CUDA_GEMM_TILE_M;
                /* grouped: one block row per table entry (the plan's grid); else the chunk's tiles */
                if (!groups) grid.y = (unsigned)((chunk + tile_rows - 1) / tile_rows);
                const gemm_groups tiles = {groups ? (first_target.int8_gemm ? groups->int8_tiles : groups->gemm_tiles) : nullptr,
                                           first_target.n_out * first_target.row_bytes};
                /* split-K: the parts' sums in workspace, then added in part order */
                const int splits = (int)plan.launch.grid_z;
                workspace partials(cuda);
                if (splits > 1) CHECK(partials.allocate(splits * chunk * first_target.n_out * 4));
                float * target = splits > 1 ? (float *)partials.pointer : os;
                if (first_target.int8_gemm) {
                    const int8_t * q = input->code_data + first * n_in;
                    const float * d = input->scale_data + first * n_in / 32;
                    const int64_t per_split = memra_cuda_int8_gemm_split_tiles(&plan, n_in);
                    switch (first_target.type) {
                        case MEMRA_CUDA_TYPE_Q8_0:
                            MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_int8_kernel<MEMRA_CUDA_TYPE_Q8_0>)(
                                target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            break;
                        case MEMRA_CUDA_TYPE_Q8_0_X8:
                            /* (64: at most 64 rows, one row tile as the plan's 128, or the table's 64-row tiles) */
                            if (first_target.pipe_rows == 64)
                                MEMRA_LAUNCH(grid, plan.launch.threads, memra_cuda_int8_pipe_shared_bytes(64), cuda->stream, gemm_int8_pipe_kernel<64>)(
                                    target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            else if (first_target.pipe_rows == 128)
                                MEMRA_LAUNCH(grid, plan.launch.threads, memra_cuda_int8_pipe_shared_bytes(128), cuda->stream, gemm_int8_pipe_kernel<128>)(
                                    target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            else
                                MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_int8_kernel<MEMRA_CUDA_TYPE_Q8_0_X8>)(
                                    target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            break;
                        case MEMRA_CUDA_TYPE_Q4_0_X8:
                            MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_int8_kernel<MEMRA_CUDA_TYPE_Q4_0_X8>)(
                                target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            break;
                        case MEMRA_CUDA_TYPE_Q4_0:
                            MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_int8_kernel<MEMRA_CUDA_TYPE_Q4_0>)(
                                target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            break;
                        default:
                            MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_int8_kernel<MEMRA_CUDA_TYPE_Q5_0>)(
                                target, q, d, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out, per_split, tiles);
                            break;
                    }
                    LAUNCH_CHECK(function, "gemm_int8_kernel");
                } else if (first_target.integer_gemm) {
                    const int8_t * q = input->code_data + first * n_in;
                    const float * d = input->scale_data + ((first * n_in) >> input->block_shift);
                    const int64_t k_per_split = memra_cuda_gemm_split_inputs(&plan, n_in);
                    MEMRA_CUDA_DISPATCH_QUANTIZED_TYPE(first_target.type, (MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_codes_kernel<T>)(
                                                                               target, q, d, input->block_shift, first_target.w, first_target.row_bytes, chunk, n_in,
                                                                               first_target.n_out, k_per_split, tiles)));
                    LAUNCH_CHECK(function, "gemm_codes_kernel");
                } else {
                    const float * xs = source + first * n_in;
                    const int64_t k_per_split = memra_cuda_gemm_split_inputs(&plan, n_in);
                    MEMRA_CUDA_DISPATCH_TYPE(first_target.type, (MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_kernel<T>)(
                                                                     target, xs, first_target.w, first_target.row_bytes, chunk, n_in, first_target.n_out,
                                                                     k_per_split, tiles)));
                    LAUNCH_CHECK(function, "gemm_kernel");
                }
                if (splits > 1) {
                    const memra_cuda_launch sum = memra_cuda_plan_elementwise(chunk * first_target.n_out);
                    MEMRA_LAUNCH(memra_grid(sum), sum.threads, 0, cuda->stream, split_sum_kernel)(os, target, chunk * first_target.n_out, splits);
                    LAUNCH_CHECK(function, "split_sum_kernel");
                }
                continue;
            }
            matrix_segments segments;
            memset(&segments, 0, sizeof segments);
            segments.count = group;
            /* Warps per output feature for the launch's features (one but where they are too few,
             * memra_cuda_plan_mmv_split), so MEMRA_CUDA_MMV_WARPS / split a block. An iteration of
             * a warp: the q8_0 kernel's STEPS × 8 blocks, the others' 32 lanes × UNROLL groups of 8. */
            const bool q8_0_codes = first_target.codes && memra_cuda_type_is_q8_0(first_target.type);
            int64_t features = 0;
            for (int g = 0; g < group; g++) features += targets[t + g].n_out;
            const int64_t iteration_blocks = q8_0_codes ? 8 * cuda->mmv_steps : 8 * (chunk <= 2 ? 4 : 2);
            const int split = memra_cuda_plan_mmv_split(features, (n_in + 31) / 32, iteration_blocks, cuda->multiprocessors, cuda->mmv_split);
            const int shift = split == 4 ? 2 : split == 2 ? 1 : 0;
            int64_t blocks = 0;
            for (int g = 0; g < group; g++) {
                const matmul_target & target = targets[t + g];
                segments.out[g] = target.out + first * target.n_out;
                segments.weight[g] = target.w;
                segments.n_out[g] = target.n_out;
                segments.first_block[g] = blocks;
                blocks += split == 1 ? target.plan.launch.grid_x : (target.n_out + MEMRA_CUDA_MMV_WARPS / split - 1) / (MEMRA_CUDA_MMV_WARPS / split);
            }
            if (blocks > MEMRA_CUDA_MAX_GRID_X) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %lld blocks in one launch", function, (long long)blocks);
            const dim3 grid((unsigned)blocks, 1, 1);
            if (q8_0_codes) {
                const int8_t * q = input->code_data + first * n_in;
                const float * d = input->scale_data + first * n_in / 32;
                /* the SwiGLU epilogue: the gate/up launch, checked by memra_cuda_norm_swiglu_matmul to be this one */
                const bool with_epilogue = epilogue && t == 0 && group == 2 && shift == 0 && chunk == rows;
                /* the norm tail: the whole of one matrix in this launch (memra_cuda_matmul_with_codes checked the rest) */
                const bool with_tail = tail && count == 1 && chunk == rows && rows <= 2 && first_target.n_out == tail->width && cuda->mmv_steps == 4;
                const auto launch = first_target.type == MEMRA_CUDA_TYPE_Q8_0_X8 ? launch_matrix_vector_q8_0<true> : launch_matrix_vector_q8_0<false>;
                launch(cuda, grid, plan.launch.threads, segments, q, d, first_target.row_bytes, (int)chunk, n_in, shift, with_epilogue ? epilogue : nullptr,
                       with_tail ? tail : nullptr);
                epilogue_launched = epilogue_launched || with_epilogue;
                tail_launched = tail_launched || with_tail;
                LAUNCH_CHECK(function, "matrix_vector_q8_0_kernel");
            } else if (first_target.codes) {
                const int8_t * q = input->code_data + first * n_in;
                const float * d = input->scale_data + ((first * n_in) >> input->block_shift);
                launch_matrix_vector_codes(cuda, first_target.type, grid, plan.launch.threads, segments, q, d, first_target.row_bytes, (int)chunk, n_in, shift);
                LAUNCH_CHECK(function, "matrix_vector_codes_kernel");
            } else {
                const float * xs = source + first * n_in;
                MEMRA_CUDA_DISPATCH_TYPE(first_target.type, (launch_matrix_vector<T>(grid, plan.launch.threads, cuda->stream, segments, xs, first_target.row_bytes,
                                                                                     (int)chunk, n_in, cuda->early_weights, shift)));
                LAUNCH_CHECK(function, "matrix_vector_kernel");
            }
        }
        t += group;
    }
    /* q8_1: each matrix's offset correction (ggml's q4_1/q5_1 dot product), after its matmul. */
    for (int t = 0; t < count; t++) {
        const matmul_target & target = targets[t];
        if (target.rounding != MEMRA_CUDA_ROUND_Q8_1 || target.plan.kernel == MEMRA_CUDA_MATMUL_NONE) continue;
        const memra_cuda_launch launch = memra_cuda_plan_elementwise(rows * target.n_out);
        MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, offset_correction_kernel)(
            target.out, (const float *)inputs[target.input].corrections.pointer, target.w, target.row_bytes, memra_cuda_type_block_bytes(target.type), rows,
            n_in / 32, target.n_out);
        LAUNCH_CHECK(function, "offset_correction_kernel");
    }
    if (epilogue && rows > 0 && !epilogue_launched) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: no gate/up matrix-vector launch took the SwiGLU epilogue", function);
    if (tail && !tail_launched) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: no matrix-vector launch took the norm tail", function);
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type,
                                 const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out) {
    const int32_t type32 = type;
    /* x's q8_0 codes where a norm tail rounded x just before (the final norm, then the LM head) */
    memra_cuda_kept_codes kept(cuda);
    const bool rounded = kept.take_of(x, rows, n_in);
    return matmul_group("memra_cuda_matmul", cuda, 1, &out, &out_length, x, x_length, rows, &type32, &weight, &weight_bytes, n_in, &n_out, 1, 0, nullptr, 0, nullptr,
                        nullptr, rounded ? &kept.codes : nullptr);
}

extern "C" int memra_cuda_expert_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type,
                                        const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, int64_t experts, int64_t expert) {
    const int32_t type32 = type;
    return matmul_group("memra_cuda_expert_matmul", cuda, 1, &out, &out_length, x, x_length, rows, &type32, &weight, &weight_bytes, n_in, &n_out, experts, expert);
}

/* A group's pointer arrays (64-bit integers from JS) as pointers, checked. */
static int group_pointers(const char * function, int64_t count, const uint64_t * outs, const int64_t * out_lengths, const int32_t * types, const uint64_t * weights,
                          const int64_t * weight_bytes, const int64_t * n_outs, float ** out_pointers, const void ** weight_pointers) {
    if (count < 1 || count > MAX_GROUP) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %lld weights (1..%d)", function, (long long)count, MAX_GROUP);
    if (!outs || !out_lengths || !types || !weights || !weight_bytes || !n_outs) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: an array argument is NULL", function);
    for (int64_t t = 0; t < count; t++) {
        out_pointers[t] = (float *)(uintptr_t)outs[t];
        weight_pointers[t] = (const void *)(uintptr_t)weights[t];
    }
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_matmul_shared(memra_cuda * cuda, int64_t count, const uint64_t * outs, const int64_t * out_lengths, const float * x, int64_t x_length,
                                        int64_t rows, const int32_t * types, const uint64_t * weights, const int64_t * weight_bytes, int64_t n_in,
                                        const int64_t * n_outs) {
    static const char function[] = "memra_cuda_matmul_shared";
    float * out_pointers[MAX_GROUP];
    const void * weight_pointers[MAX_GROUP];
    CHECK(group_pointers(function, count, outs, out_lengths, types, weights, weight_bytes, n_outs, out_pointers, weight_pointers));
    return matmul_group(function, cuda, (int)count, out_pointers, out_lengths, x, x_length, rows, types, weight_pointers, weight_bytes, n_in, n_outs, 1, 0);
}

extern "C" int memra_cuda_norm_matmul_shared(memra_cuda * cuda, float * normed, int64_t normed_length, float * hidden, int64_t hidden_length, const float * delta,
                                             int64_t delta_length, const float * norm_weight, int64_t norm_weight_length, float eps, int64_t count,
                                             const uint64_t * outs, const int64_t * out_lengths, int64_t rows, const int32_t * types, const uint64_t * weights,
                                             const int64_t * weight_bytes, int64_t n_in, const int64_t * n_outs) {
    static const char function[] = "memra_cuda_norm_matmul_shared";
    float * out_pointers[MAX_GROUP];
    const void * weight_pointers[MAX_GROUP];
    /* normed and its q8_0 codes already made by the projection before (its norm tail): the matmuls alone */
    memra_cuda_kept_codes kept(cuda);
    if (!delta && kept.take(normed, hidden, norm_weight, eps, rows, n_in)) {
        CHECK(group_pointers(function, count, outs, out_lengths, types, weights, weight_bytes, n_outs, out_pointers, weight_pointers));
        return matmul_group(function, cuda, (int)count, out_pointers, out_lengths, normed, normed_length, rows, types, weight_pointers, weight_bytes, n_in, n_outs,
                            1, 0, nullptr, 0, nullptr, nullptr, &kept.codes);
    }
    CHECK(group_pointers(function, count, outs, out_lengths, types, weights, weight_bytes, n_outs, out_pointers, weight_pointers));
    const norm_step norm{hidden, hidden_length, delta, delta_length, norm_weight, norm_weight_length, eps};
    return matmul_group(function, cuda, (int)count, out_pointers, out_lengths, normed, normed_length, rows, types, weight_pointers, weight_bytes, n_in, n_outs, 1,
                        0, nullptr, 0, &norm);
}

/* Where memra_cuda_norm_swiglu_matmul's epilogue applies: q8_0 gate and up read as q8_0 codes by
 * one matrix-vector launch of one warp a feature and 4 steps, every 32 features one group (and
 * counters for them), and a down projection that reads q8_0 codes too. */
static bool norm_swiglu_applies(memra_cuda * cuda, int64_t rows, int gate_type, int up_type, int64_t n_in, int64_t ffn, int down_type, int64_t n_out) {
    return memra_cuda_type_is_q8_0(gate_type) && up_type == gate_type && rows >= 1 && rows <= MEMRA_CUDA_MMV_MAX_ROWS && ffn > 0 && ffn % 32 == 0 &&
           ffn / 32 <= MEMRA_CUDA_SWIGLU_COUNTERS && n_in > 0 && n_out > 0 && cuda->mmv_steps == 4 &&
           memra_cuda_matmul_reads_q8_0_codes(cuda, gate_type, rows, n_in, ffn) &&
           memra_cuda_plan_mmv_split(2 * ffn, n_in / 32, 32, cuda->multiprocessors, cuda->mmv_split) == 1 &&
           memra_cuda_matmul_reads_q8_0_codes(cuda, down_type, rows, ffn, n_out);
}

extern "C" int memra_cuda_norm_swiglu_matmul_applies(memra_cuda * cuda, int64_t rows, int gate_type, int up_type, int64_t n_in, int64_t ffn, int down_type,
                                                     int64_t n_out) {
    if (!cuda) return 0;
    return norm_swiglu_applies(cuda, rows, gate_type, up_type, n_in, ffn, down_type, n_out) ? 1 : 0;
}

extern "C" int memra_cuda_norm_swiglu_matmul(memra_cuda * cuda, float * normed, int64_t normed_length, float * hidden, int64_t hidden_length, const float * delta,
                                             int64_t delta_length, const float * norm_weight, int64_t norm_weight_length, float eps, const uint64_t * outs,
                                             const int64_t * out_lengths, int64_t rows, const int32_t * types, const uint64_t * weights, const int64_t * weight_bytes,
                                             int64_t n_in, int64_t ffn, float * projected, int64_t projected_length, int down_type, const void * down_weight,
                                             int64_t down_weight_bytes, int64_t n_out, const memra_cuda_residual_norm * then) {
    static const char function[] = "memra_cuda_norm_swiglu_matmul";
    /* normed and its q8_0 codes already made by the projection before (its norm tail): no norm here */
    memra_cuda_kept_codes kept(cuda);
    const bool normed_before = !delta && kept.take(normed, hidden, norm_weight, eps, rows, n_in);
    CHECK(memra_cuda_enter(function, cuda));
    const int64_t n_outs[2] = {ffn, ffn};
    float * out_pointers[MAX_GROUP];
    const void * weight_pointers[MAX_GROUP];
    CHECK(group_pointers(function, 2, outs, out_lengths, types, weights, weight_bytes, n_outs, out_pointers, weight_pointers));
    CHECK(memra_cuda_check_size(function, "rows", rows, 1));
    CHECK(memra_cuda_check_size(function, "ffn", ffn, 1));
    if (!norm_swiglu_applies(cuda, rows, types[0], types[1], n_in, ffn, down_type, n_out)) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %lld rows of q8_0 gate/up (types %d, %d) of %lld features into a type-%d down projection: not one the epilogue takes", function,
             (long long)rows, types[0], types[1], (long long)ffn, down_type);
    }
    CHECK(memra_cuda_check_residual_norm(function, cuda, then, projected, down_type, rows, ffn, n_out));
    int64_t values = 0;
    CHECK(memra_cuda_check_product(function, "rows * ffn", rows, ffn, &values));
    workspace codes(cuda), scales(cuda);
    CHECK(codes.allocate(values));
    CHECK(scales.allocate(values / 32 * 4));
    const swiglu_epilogue epilogue{(int8_t *)codes.pointer, (float *)scales.pointer, cuda->swiglu_counters, ffn};
    const norm_step norm{hidden, hidden_length, delta, delta_length, norm_weight, norm_weight_length, eps};
    CHECK(matmul_group(function, cuda, 2, out_pointers, out_lengths, normed, normed_length, rows, types, weight_pointers, weight_bytes, n_in, n_outs, 1, 0, nullptr,
                       0, normed_before ? nullptr : &norm, nullptr, normed_before ? &kept.codes : nullptr, &epilogue));
    const memra_cuda_q8_0_codes rounded = {(const int8_t *)codes.pointer, (const float *)scales.pointer};
    return memra_cuda_matmul_with_codes(function, cuda, projected, projected_length, out_pointers[0], out_lengths[0], rows, down_type, down_weight, down_weight_bytes,
                                        ffn, n_out, rounded, then);
}

extern "C" int memra_cuda_swiglu_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * gate, int64_t gate_length, const float * up,
                                        int64_t up_length, int64_t rows, int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out) {
    const int32_t type32 = type;
    if (!up) return memra_cuda_fail(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "memra_cuda_swiglu_matmul: up is NULL");
    return matmul_group("memra_cuda_swiglu_matmul", cuda, 1, &out, &out_length, gate, gate_length, rows, &type32, &weight, &weight_bytes, n_in, &n_out, 1, 0, up,
                        up_length);
}

int memra_cuda_prepare_int8_pipeline(void) {
    CUDA_CHECK("memra_cuda_create", cudaFuncSetAttribute(reinterpret_cast<const void *>(gemm_int8_pipe_kernel<128>), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                         memra_cuda_int8_pipe_shared_bytes(128)));
    CUDA_CHECK("memra_cuda_create", cudaFuncSetAttribute(reinterpret_cast<const void *>(gemm_int8_pipe_kernel<64>), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                         memra_cuda_int8_pipe_shared_bytes(64)));
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_repacked_type_of(int type, int64_t n) { return memra_cuda_repacked_type(type, n); }

extern "C" int memra_cuda_repack(memra_cuda * cuda, int type, void * data, int64_t data_bytes, int64_t rows, int64_t n) {
    static const char function[] = "memra_cuda_repack";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "weights are not repacked");
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_weight_type(function, type));
    const int repacked = memra_cuda_repacked_type(type, n);
    if (repacked == type) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: rows of %lld values of type %d have no repacked layout (q8_0, q4_0: a multiple of 256 values, q6_K: of 2,048)", function,
             (long long)n, type);
    }
    int64_t row_bytes = 0;
    CHECK(memra_cuda_check_weight(function, "data", type, data, data_bytes, rows, n, &row_bytes));
    if ((uintptr_t)data % 16 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: data must be 16-byte aligned", function);
    const int64_t group_bytes = memra_cuda_type_block_bytes(repacked); /* a repacked "block" is a group of 8 */
    const int64_t groups = rows * row_bytes / group_bytes;
    if (groups == 0) return MEMRA_CUDA_OK;
    const dim3 grid((unsigned)((groups + 7) / 8 < 65535LL * 16 ? (groups + 7) / 8 : 65535LL * 16));
    if (type == MEMRA_CUDA_TYPE_Q8_0) MEMRA_LAUNCH(grid, 256, 0, cuda->stream, repack_kernel<MEMRA_CUDA_TYPE_Q8_0, q8_0_x8::GROUP>)((uint8_t *)data, groups);
    else if (type == MEMRA_CUDA_TYPE_Q4_0) MEMRA_LAUNCH(grid, 256, 0, cuda->stream, repack_kernel<MEMRA_CUDA_TYPE_Q4_0, q4_0_x8::GROUP>)((uint8_t *)data, groups);
    else MEMRA_LAUNCH(grid, 256, 0, cuda->stream, repack_kernel<MEMRA_CUDA_TYPE_Q6_K, 1680>)((uint8_t *)data, groups);
    LAUNCH_CHECK(function, "repack_kernel");
    CUDA_CHECK(function, cudaStreamSynchronize(cuda->stream));
    return MEMRA_CUDA_OK;
}

int memra_cuda_matmul_reads_q8_0_codes(memra_cuda * cuda, int type, int64_t rows, int64_t n_in, int64_t n_out) {
    if (!cuda->activation_rounding || memra_cuda_activation_rounding(type) != MEMRA_CUDA_ROUND_Q8_0 || n_in % 32 != 0) return 0;
    memra_cuda_matmul_plan plan;
    char message[256];
    if (memra_cuda_plan_matmul_with(type, rows, n_in, n_out, cuda->gemm, &plan, message, sizeof message) != MEMRA_CUDA_OK) return 0;
    return reads_codes(plan.kernel, type, MEMRA_CUDA_ROUND_Q8_0, cuda->codes_mmv != 0);
}

static bool norm_tail_applies(memra_cuda * cuda, int type, int64_t rows, int64_t n_in, int64_t n_out) {
    if (!memra_cuda_type_is_q8_0(type) || rows < 1 || rows > 2 || n_in <= 0 || n_out <= 0 || n_out % 32 != 0 || cuda->mmv_steps != 4) return false;
    memra_cuda_matmul_plan plan;
    char message[256];
    if (memra_cuda_plan_matmul_with(type, rows, n_in, n_out, cuda->gemm, &plan, message, sizeof message) != MEMRA_CUDA_OK) return false;
    return plan.kernel == MEMRA_CUDA_MATMUL_VECTOR && plan.rows_per_launch >= rows && memra_cuda_matmul_reads_q8_0_codes(cuda, type, rows, n_in, n_out);
}

extern "C" int memra_cuda_matmul_norm_tail_applies(memra_cuda * cuda, int type, int64_t rows, int64_t n_in, int64_t n_out) {
    if (!cuda) return 0;
    return norm_tail_applies(cuda, type, rows, n_in, n_out) ? 1 : 0;
}

int memra_cuda_check_residual_norm(const char * function, memra_cuda * cuda, const memra_cuda_residual_norm * then, const float * out, int type, int64_t rows,
                                   int64_t n_in, int64_t n_out) {
    if (!then) return MEMRA_CUDA_OK;
    if (!norm_tail_applies(cuda, type, rows, n_in, n_out)) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: a residual norm after a projection of %lld rows by a type-%d weight of %lld × %lld: not one the norm tail takes", function,
             (long long)rows, type, (long long)n_in, (long long)n_out);
    }
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * n_out", rows, n_out, &needed));
    CHECK(memra_cuda_check_buffer(function, "then->hidden", then->hidden, then->hidden_length, needed));
    CHECK(memra_cuda_check_buffer(function, "then->normed", then->normed, then->normed_length, needed));
    CHECK(memra_cuda_check_buffer(function, "then->weight", then->weight, then->weight_length, n_out));
    if (!(then->eps >= 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: then->eps must be non-negative", function);
    const uintptr_t o = (uintptr_t)out, h = (uintptr_t)then->hidden, n = (uintptr_t)then->normed, bytes = (uintptr_t)needed * 4;
    if ((o < h + bytes && h < o + bytes) || (o < n + bytes && n < o + bytes) || (h < n + bytes && n < h + bytes)) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the projection, then->hidden and then->normed must not overlap", function);
    }
    return MEMRA_CUDA_OK;
}

int memra_cuda_matmul_with_codes(const char * function, memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows,
                                 int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, const memra_cuda_q8_0_codes & codes,
                                 const memra_cuda_residual_norm * then) {
    const int32_t type32 = type;
    const memra_cuda_q8_0_codes * given = codes.codes ? &codes : nullptr;
    if (!then) return matmul_group(function, cuda, 1, &out, &out_length, x, x_length, rows, &type32, &weight, &weight_bytes, n_in, &n_out, 1, 0, nullptr, 0, nullptr, nullptr, given);
    CHECK(memra_cuda_check_residual_norm(function, cuda, then, out, type, rows, n_in, n_out));
    /* normed's codes outlive this call (the next op takes them): the context's allocations, not workspace */
    void * tail_codes = memra_cuda_alloc(cuda, rows * n_out);
    if (!tail_codes) return memra_cuda_last_status();
    void * tail_scales = memra_cuda_alloc(cuda, rows * n_out / 32 * 4);
    if (!tail_scales) {
        const int status = memra_cuda_last_status();
        memra_cuda_free(cuda, tail_codes);
        return status;
    }
    const norm_tail tail{then->hidden, then->normed, then->weight, (int8_t *)tail_codes, (float *)tail_scales, cuda->norm_tail_counter, n_out,
                         (int)memra_cuda_plan_rows(rows, n_out).threads, then->eps};
    const int status = matmul_group(function, cuda, 1, &out, &out_length, x, x_length, rows, &type32, &weight, &weight_bytes, n_in, &n_out, 1, 0, nullptr, 0, nullptr,
                                    nullptr, given, nullptr, &tail);
    if (status != MEMRA_CUDA_OK) {
        memra_cuda_free(cuda, tail_codes);
        memra_cuda_free(cuda, tail_scales);
        return status;
    }
    /* after the last memra_cuda_enter of this call: kept for the next call */
    cuda->norm_handoff = memra_cuda_norm_handoff{then->hidden, then->normed, then->weight, then->eps, rows, n_out, tail_codes, tail_scales};
    return MEMRA_CUDA_OK;
}

int memra_cuda_grouped_matmul(const char * function, memra_cuda * cuda, int count, float * const * outs, const int64_t * out_lengths, const float * x,
                              int64_t x_length, int64_t rows, const int32_t * types, const void * const * weights, const int64_t * weight_bytes, int64_t n_in,
                              const int64_t * n_outs, int64_t experts, const float * up, int64_t up_length, const memra_cuda_moe_tiles & tiles) {
    return matmul_group(function, cuda, count, outs, out_lengths, x, x_length, rows, types, weights, weight_bytes, n_in, n_outs, experts, 0, up, up_length, nullptr,
                        &tiles);
}
