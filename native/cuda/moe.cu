/*
 * moe.cu — launcher of memra_cuda_moe_route (kernel in kernels/moe.cuh): routes on the device,
 * then copies the [rows, k] ids and weights to the caller's host arrays.
 */
#include "cuda-internal.cuh"
#include "kernels/moe.cuh"

using namespace memra_cuda_kernels;

extern "C" int memra_cuda_moe_route(memra_cuda * cuda, int32_t * ids_out, float * weights_out, int64_t out_length, const float * logits, int64_t logits_length,
                                    int64_t rows, int64_t experts, int64_t k) {
    static const char function[] = "memra_cuda_moe_route";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "routing cannot be read back to the host");
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    memra_cuda_launch launch;
    char message[512];
    const int planned = memra_cuda_plan_moe_route(rows, experts, k, &launch, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t needed = 0, out_needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * experts", rows, experts, &needed));
    CHECK(memra_cuda_check_product(function, "rows * k", rows, k, &out_needed));
    CHECK(memra_cuda_check_buffer(function, "logits", logits, logits_length, needed));
    CHECK(memra_cuda_check_buffer(function, "ids_out", ids_out, out_length, out_needed));
    CHECK(memra_cuda_check_buffer(function, "weights_out", weights_out, out_length, out_needed));
    if (rows == 0) return MEMRA_CUDA_OK;
    uint8_t * scratch = (uint8_t *)memra_cuda_alloc(cuda, out_needed * 8);
    if (!scratch) return memra_cuda_last_status();
    int32_t * ids = (int32_t *)scratch;
    float * weights = (float *)(scratch + out_needed * 4);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, launch.shared_bytes, cuda->stream, moe_route_kernel)(ids, weights, logits, rows, (int)experts, (int)k);
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) error = cudaMemcpyAsync(ids_out, ids, (size_t)out_needed * 4, cudaMemcpyDeviceToHost, cuda->stream);
    if (error == cudaSuccess) error = cudaMemcpyAsync(weights_out, weights, (size_t)out_needed * 4, cudaMemcpyDeviceToHost, cuda->stream);
    const int waited = error == cudaSuccess ? memra_cuda_wait(function, cuda) : MEMRA_CUDA_OK;
    memra_cuda_free(cuda, scratch);
    if (error != cudaSuccess) return memra_cuda_fail_cuda(error, function, "routing");
    return waited;
}
