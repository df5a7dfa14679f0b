/*
 * matmul.cu — launchers of memra_cuda_matmul / memra_cuda_expert_matmul (kernels in
 * kernels/matmul.cuh; the choice of kernel, grid and rows per launch in launch-plan.c).
 */
#include "cuda-internal.cuh"
#include "kernels/matmul.cuh"

using namespace memra_cuda_kernels;

template <int TYPE>
static void launch_matrix_vector(const memra_cuda_matmul_plan & plan, cudaStream_t stream, float * out, const float * x, const uint8_t * w, int64_t row_bytes,
                                 int rows, int64_t n_in, int64_t n_out) {
    const dim3 grid = memra_grid(plan.launch);
    if (rows <= 1) MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_kernel<TYPE, 1>)(out, x, w, row_bytes, rows, n_in, n_out);
    else if (rows <= 2) MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_kernel<TYPE, 2>)(out, x, w, row_bytes, rows, n_in, n_out);
    else if (rows <= 4) MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_kernel<TYPE, 4>)(out, x, w, row_bytes, rows, n_in, n_out);
    else MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_kernel<TYPE, 8>)(out, x, w, row_bytes, rows, n_in, n_out);
}

static void launch_matrix_vector_q8_0(const memra_cuda_matmul_plan & plan, cudaStream_t stream, float * out, const int8_t * codes, const float * scales,
                                      const uint8_t * w, int64_t row_bytes, int rows, int64_t n_in, int64_t n_out) {
    const dim3 grid = memra_grid(plan.launch);
    if (rows <= 1) MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_q8_0_kernel<1>)(out, codes, scales, w, row_bytes, rows, n_in, n_out);
    else if (rows <= 2) MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_q8_0_kernel<2>)(out, codes, scales, w, row_bytes, rows, n_in, n_out);
    else if (rows <= 4) MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_q8_0_kernel<4>)(out, codes, scales, w, row_bytes, rows, n_in, n_out);
    else MEMRA_LAUNCH(grid, plan.launch.threads, 0, stream, matrix_vector_q8_0_kernel<8>)(out, codes, scales, w, row_bytes, rows, n_in, n_out);
}

/* round_activations_kernel for a runtime rounding mode: the rounded values (CODES false) or the
 * q8 codes and block scales (CODES true, q8 modes only). */
template <bool CODES>
static void launch_rounding(int rounding, const memra_cuda_launch & launch, cudaStream_t stream, float * rounded, float * corrections, const float * x,
                            int64_t count, int8_t * codes, float * scales) {
    const dim3 grid = memra_grid(launch);
    switch (rounding) {
        case MEMRA_CUDA_ROUND_Q8_0:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_Q8_0, CODES>)(rounded, corrections, x, count, codes, scales);
            break;
        case MEMRA_CUDA_ROUND_Q8_1:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_Q8_1, CODES>)(rounded, corrections, x, count, codes, scales);
            break;
        case MEMRA_CUDA_ROUND_Q8_K:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_Q8_K, CODES>)(rounded, corrections, x, count, codes, scales);
            break;
        case MEMRA_CUDA_ROUND_F16:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_F16, false>)(rounded, corrections, x, count, codes, scales);
            break;
        default:
            MEMRA_LAUNCH(grid, launch.threads, 0, stream, round_activations_kernel<MEMRA_CUDA_ROUND_BF16, false>)(rounded, corrections, x, count, codes, scales);
            break;
    }
}

/* Device memory for the duration of one call: from the caching allocator, back to it on return. */
struct workspace {
    memra_cuda * cuda;
    void * pointer = nullptr;
    explicit workspace(memra_cuda * context) : cuda(context) {}
    workspace(const workspace &) = delete;
    workspace & operator=(const workspace &) = delete;
    int allocate(int64_t bytes) {
        pointer = memra_cuda_alloc(cuda, bytes);
        return pointer ? MEMRA_CUDA_OK : memra_cuda_last_status();
    }
    ~workspace() {
        if (pointer) memra_cuda_free(cuda, pointer);
    }
};

static int matmul_checked(const char * function, memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type,
                          const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, int64_t experts, int64_t expert) {
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "n_in", n_in, 1));
    CHECK(memra_cuda_check_size(function, "n_out", n_out, 1));
    CHECK(memra_cuda_check_size(function, "experts", experts, 1));
    if (expert < 0 || expert >= experts) FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: expert %lld is outside 0..%lld", function, (long long)expert, (long long)experts - 1);
    int64_t row_bytes = 0, matrices_rows = 0, x_needed = 0, out_needed = 0;
    CHECK(memra_cuda_check_product(function, "experts * n_out", experts, n_out, &matrices_rows));
    CHECK(memra_cuda_check_weight(function, "weight", type, weight, weight_bytes, matrices_rows, n_in, &row_bytes));
    CHECK(memra_cuda_check_product(function, "rows * n_in", rows, n_in, &x_needed));
    CHECK(memra_cuda_check_product(function, "rows * n_out", rows, n_out, &out_needed));
    CHECK(memra_cuda_check_buffer(function, "x", x, x_length, x_needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, out_needed));
    const uintptr_t o = (uintptr_t)out, i = (uintptr_t)x;
    if (rows > 0 && o < i + (uintptr_t)x_needed * 4 && i < o + (uintptr_t)out_needed * 4) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    if ((uintptr_t)x % 16 != 0 || (uintptr_t)weight % 16 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: x and weight must be 16-byte aligned", function);
    memra_cuda_matmul_plan plan;
    char message[512];
    const int status = memra_cuda_plan_matmul_with(type, rows, n_in, n_out, cuda->gemm, &plan, message, sizeof message);
    if (status != MEMRA_CUDA_OK) FAIL(status, "%s: %s", function, message);
    if (plan.kernel == MEMRA_CUDA_MATMUL_NONE) return MEMRA_CUDA_OK;
    const uint8_t * w = (const uint8_t *)weight + expert * n_out * row_bytes;

    /* The activations as ggml's CPU matmul rounds them for this weight type, in workspace from the
     * caching allocator (returned when this call has queued its kernels: stream-ordered reuse). */
    const int rounding = cuda->activation_rounding ? memra_cuda_activation_rounding(type) : MEMRA_CUDA_ROUND_NONE;
    /* With q8 rounding, the integer kernels take the activations' codes and block scales: the
     * integer GEMM for prefill, the __dp4a matrix-vector kernel for q8_0 decode. */
    const bool integer_gemm = plan.kernel == MEMRA_CUDA_MATMUL_GEMM &&
                              (rounding == MEMRA_CUDA_ROUND_Q8_0 || rounding == MEMRA_CUDA_ROUND_Q8_1 || rounding == MEMRA_CUDA_ROUND_Q8_K);
    const bool integer_vector = plan.kernel == MEMRA_CUDA_MATMUL_VECTOR && type == MEMRA_CUDA_TYPE_Q8_0 && rounding == MEMRA_CUDA_ROUND_Q8_0;
    const bool use_codes = integer_gemm || integer_vector;
    const int block_shift = rounding == MEMRA_CUDA_ROUND_Q8_K ? 8 : 5;
    workspace rounded(cuda), corrections(cuda), codes(cuda), scales(cuda);
    const float * source = x;
    if (rounding != MEMRA_CUDA_ROUND_NONE) {
        if (use_codes) {
            CHECK(codes.allocate(x_needed));
            CHECK(scales.allocate((x_needed >> block_shift) * 4));
        } else {
            CHECK(rounded.allocate(x_needed * 4));
            source = (const float *)rounded.pointer;
        }
        if (rounding == MEMRA_CUDA_ROUND_Q8_1) CHECK(corrections.allocate(x_needed / 32 * 4));
        const memra_cuda_launch launch = memra_cuda_plan_rounding(rounding, rows, n_in);
        if (use_codes) launch_rounding<true>(rounding, launch, cuda->stream, nullptr, (float *)corrections.pointer, x, x_needed, (int8_t *)codes.pointer, (float *)scales.pointer);
        else launch_rounding<false>(rounding, launch, cuda->stream, (float *)rounded.pointer, (float *)corrections.pointer, x, x_needed, nullptr, nullptr);
        LAUNCH_CHECK(function, "round_activations_kernel");
    }
    for (int64_t first = 0; first < rows; first += plan.rows_per_launch) {
        const int64_t count = rows - first < plan.rows_per_launch ? rows - first : plan.rows_per_launch;
        const float * xs = source + first * n_in;
        float * os = out + first * n_out;
        if (plan.kernel == MEMRA_CUDA_MATMUL_GEMM) {
            dim3 grid = memra_grid(plan.launch);
            grid.y = (unsigned)((count + MEMRA_CUDA_GEMM_TILE_M - 1) / MEMRA_CUDA_GEMM_TILE_M);
            if (integer_gemm) {
                const int8_t * q = (const int8_t *)codes.pointer + first * n_in;
                const float * d = (const float *)scales.pointer + ((first * n_in) >> block_shift);
                MEMRA_CUDA_DISPATCH_QUANTIZED_TYPE(type, (MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_codes_kernel<T>)(
                                                             os, q, d, block_shift, w, row_bytes, count, n_in, n_out)));
                LAUNCH_CHECK(function, "gemm_codes_kernel");
            } else {
                MEMRA_CUDA_DISPATCH_TYPE(type, (MEMRA_LAUNCH(grid, plan.launch.threads, 0, cuda->stream, gemm_kernel<T>)(os, xs, w, row_bytes, count, n_in, n_out)));
                LAUNCH_CHECK(function, "gemm_kernel");
            }
        } else if (integer_vector) {
            const int8_t * q = (const int8_t *)codes.pointer + first * n_in;
            const float * d = (const float *)scales.pointer + first * n_in / 32;
            launch_matrix_vector_q8_0(plan, cuda->stream, os, q, d, w, row_bytes, (int)count, n_in, n_out);
            LAUNCH_CHECK(function, "matrix_vector_q8_0_kernel");
        } else {
            MEMRA_CUDA_DISPATCH_TYPE(type, (launch_matrix_vector<T>(plan, cuda->stream, os, xs, w, row_bytes, (int)count, n_in, n_out)));
            LAUNCH_CHECK(function, "matrix_vector_kernel");
        }
    }
    if (rounding == MEMRA_CUDA_ROUND_Q8_1) {
        const memra_cuda_launch launch = memra_cuda_plan_elementwise(rows * n_out);
        MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, offset_correction_kernel)(out, (const float *)corrections.pointer, w, row_bytes,
                                                                                                  memra_cuda_type_block_bytes(type), rows, n_in / 32, n_out);
        LAUNCH_CHECK(function, "offset_correction_kernel");
    }
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type,
                                 const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out) {
    return matmul_checked("memra_cuda_matmul", cuda, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out, 1, 0);
}

extern "C" int memra_cuda_expert_matmul(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type,
                                        const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, int64_t experts, int64_t expert) {
    return matmul_checked("memra_cuda_expert_matmul", cuda, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out, experts, expert);
}
