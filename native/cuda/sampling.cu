/*
 * sampling.cu — launcher of memra_cuda_argmax_rows (kernel in kernels/sampling.cuh): greedy tokens
 * picked on the device, only the [rows] token ids copied back to the host.
 */
#include "cuda-internal.cuh"
#include "kernels/sampling.cuh"

using namespace memra_cuda_kernels;

extern "C" int memra_cuda_argmax_rows(memra_cuda * cuda, int32_t * out, int64_t out_length, const float * logits, int64_t logits_length, int64_t rows,
                                      int64_t columns) {
    static const char function[] = "memra_cuda_argmax_rows";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "tokens cannot be read back to the host");
    memra_cuda_launch launch;
    char message[512];
    const int planned = memra_cuda_plan_argmax(rows, columns, &launch, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * columns", rows, columns, &needed));
    CHECK(memra_cuda_check_buffer(function, "logits", logits, logits_length, needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, rows));
    if (rows == 0) return MEMRA_CUDA_OK;
    int32_t * tokens = (int32_t *)memra_cuda_alloc(cuda, rows * 4);
    if (!tokens) return memra_cuda_last_status();
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, launch.shared_bytes, cuda->stream, argmax_rows_kernel)(tokens, logits, rows, columns);
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) error = cudaMemcpyAsync(out, tokens, (size_t)rows * 4, cudaMemcpyDeviceToHost, cuda->stream);
    const int waited = error == cudaSuccess ? memra_cuda_wait(function, cuda) : MEMRA_CUDA_OK;
    memra_cuda_free(cuda, tokens);
    if (error != cudaSuccess) return memra_cuda_fail_cuda(error, function, "argmax_rows_kernel");
    return waited;
}
