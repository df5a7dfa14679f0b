/*
 * sampling.cu — launchers of memra_cuda_argmax_rows, memra_cuda_top_k_rows and
 * memra_cuda_log_softmax_at (kernels in kernels/sampling.cuh): greedy tokens picked on the device,
 * only the [rows] token ids copied back to the host; each row's k best candidates, [rows, k] ids and
 * values; or one log-probability per row; instead of the vocabulary's logits.
 */
#include <memory>
#include <new>

#include "cuda-internal.cuh"
#include "kernels/sampling.cuh"

using namespace memra_cuda_kernels;

typedef int (*row_plan)(int64_t rows, int64_t columns, memra_cuda_launch * launch, char * message, size_t message_bytes);

/* What the readers of logits rows check first: the context, no capture (they wait for the stream),
 * the launch `plan` gives, logits [rows, columns] and out [rows]. */
static int enter_row_reader(const char * function, memra_cuda * cuda, const char * what, row_plan plan, const void * out, int64_t out_length,
                            const float * logits, int64_t logits_length, int64_t rows, int64_t columns, memra_cuda_launch * launch) {
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, what);
    char message[512];
    const int planned = plan(rows, columns, launch, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * columns", rows, columns, &needed));
    CHECK(memra_cuda_check_buffer(function, "logits", logits, logits_length, needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, rows));
    return MEMRA_CUDA_OK;
}

/* After a reader's launches (`error`: the first failure): copies `count` device → host pairs, waits
 * for the stream and gives `workspace` back. */
static int read_back(const char * function, memra_cuda * cuda, cudaError_t error, const char * kernel, void * workspace, int count, void * const * hosts,
                     const void * const * devices, const int64_t * bytes) {
    for (int i = 0; i < count && error == cudaSuccess; i++) error = cudaMemcpyAsync(hosts[i], devices[i], (size_t)bytes[i], cudaMemcpyDeviceToHost, cuda->stream);
    const int waited = error == cudaSuccess ? memra_cuda_wait(function, cuda) : MEMRA_CUDA_OK;
    memra_cuda_free(cuda, workspace);
    if (error != cudaSuccess) return memra_cuda_fail_cuda(error, function, kernel);
    return waited;
}

extern "C" int memra_cuda_argmax_rows(memra_cuda * cuda, int32_t * out, int64_t out_length, const float * logits, int64_t logits_length, int64_t rows,
                                      int64_t columns) {
    static const char function[] = "memra_cuda_argmax_rows";
    memra_cuda_launch launch;
    CHECK(enter_row_reader(function, cuda, "tokens cannot be read back to the host", memra_cuda_plan_argmax, out, out_length, logits, logits_length, rows,
                           columns, &launch));
    if (rows == 0) return MEMRA_CUDA_OK;
    // The rows' keys (kernels/sampling.cuh) come back, to be turned into indices here.
    std::unique_ptr<unsigned long long[]> host(new (std::nothrow) unsigned long long[rows]);
    if (!host) FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: no host memory for %lld keys", function, (long long)rows);
    unsigned long long * keys = (unsigned long long *)memra_cuda_alloc(cuda, rows * 8);
    if (!keys) return memra_cuda_last_status();
    cudaError_t error = cudaMemsetAsync(keys, 0, (size_t)rows * 8, cuda->stream);
    if (error == cudaSuccess) {
        MEMRA_LAUNCH(memra_grid(launch), launch.threads, launch.shared_bytes, cuda->stream, argmax_rows_kernel)(keys, logits, rows, columns);
        error = cudaGetLastError();
        if (error == cudaSuccess) PROFILE_MARK("argmax_rows_kernel");
    }
    void * hosts[1] = {host.get()};
    const void * devices[1] = {keys};
    const int64_t bytes[1] = {rows * 8};
    CHECK(read_back(function, cuda, error, "argmax_rows_kernel", keys, 1, hosts, devices, bytes));
    for (int64_t r = 0; r < rows; r++) out[r] = (int32_t)top_k_index(host[r]);
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_top_k_rows(memra_cuda * cuda, int32_t * ids, int64_t ids_length, float * values, int64_t values_length, const float * logits,
                                     int64_t logits_length, int64_t rows, int64_t columns, int64_t k) {
    static const char function[] = "memra_cuda_top_k_rows";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "candidates cannot be read back to the host");
    memra_cuda_top_k_plan plan;
    char message[512];
    const int planned = memra_cuda_plan_top_k(rows, columns, k, &plan, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t needed = 0, out_needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * columns", rows, columns, &needed));
    CHECK(memra_cuda_check_buffer(function, "logits", logits, logits_length, needed));
    CHECK(memra_cuda_check_product(function, "rows * k", rows, k, &out_needed));
    CHECK(memra_cuda_check_buffer(function, "ids", ids, ids_length, out_needed));
    CHECK(memra_cuda_check_buffer(function, "values", values, values_length, out_needed));
    if (rows == 0) return MEMRA_CUDA_OK;
    // One allocation: the two key buffers, then the [rows, k] ids and values.
    const int64_t key_bytes = (plan.buffer_keys[0] + plan.buffer_keys[1]) * 8;
    char * workspace = (char *)memra_cuda_alloc(cuda, key_bytes + out_needed * 8);
    if (!workspace) return memra_cuda_last_status();
    uint64_t * buffers[2] = {(uint64_t *)workspace, (uint64_t *)workspace + plan.buffer_keys[0]};
    int32_t * device_ids = (int32_t *)(workspace + key_bytes);
    float * device_values = (float *)(device_ids + out_needed);
    cudaError_t error = cudaSuccess;
    for (int pass = 0; pass < plan.passes && error == cudaSuccess; pass++) {
        const memra_cuda_launch launch = plan.launch[pass];
        const bool last = pass == plan.passes - 1;
        const uint64_t * lists_in = pass == 0 ? nullptr : buffers[(pass - 1) % 2];
        const int64_t inputs = pass == 0 ? columns : plan.lists[pass - 1];
        uint64_t * lists_out = last ? nullptr : buffers[pass % 2];
        MEMRA_LAUNCH(memra_grid(launch), launch.threads, launch.shared_bytes, cuda->stream, top_k_sort_kernel)(
            logits, columns, lists_in, inputs, plan.inputs[pass], (int32_t)k, plan.sort_size[pass], lists_out, device_ids, device_values, rows);
        error = cudaGetLastError();
        if (error == cudaSuccess) PROFILE_MARK("top_k_sort_kernel");
    }
    void * hosts[2] = {ids, values};
    const void * devices[2] = {device_ids, device_values};
    const int64_t bytes[2] = {out_needed * 4, out_needed * 4};
    return read_back(function, cuda, error, "top_k_sort_kernel", workspace, 2, hosts, devices, bytes);
}

extern "C" int memra_cuda_log_softmax_at(memra_cuda * cuda, float * out, int64_t out_length, const float * logits, int64_t logits_length, int64_t rows,
                                         int64_t columns, const int32_t * targets, int64_t targets_length) {
    static const char function[] = "memra_cuda_log_softmax_at";
    memra_cuda_launch launch[2];
    CHECK(enter_row_reader(function, cuda, "log-probabilities cannot be read back to the host", memra_cuda_plan_log_softmax, out, out_length, logits,
                           logits_length, rows, columns, launch));
    if (rows > 0 && (!targets || targets_length < rows)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %lld targets for %lld rows", function, (long long)targets_length, (long long)rows);
    for (int64_t r = 0; r < rows; r++) {
        if (targets[r] < 0 || targets[r] >= columns) {
            FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: target %d of row %lld is outside 0..%lld", function, targets[r], (long long)r, (long long)columns - 1);
        }
    }
    if (rows == 0) return MEMRA_CUDA_OK;
    const void * device_targets = nullptr;
    CHECK(memra_cuda_stage(function, cuda, targets, rows * 4, &device_targets));
    // One allocation: the [rows] results, then the [rows, chunks] partials (8-byte aligned: rows * 4 rounded up).
    const int64_t chunks = launch[0].grid_x, out_bytes = (rows * 4 + 7) / 8 * 8;
    char * workspace = (char *)memra_cuda_alloc(cuda, out_bytes + rows * chunks * 8);
    if (!workspace) return memra_cuda_last_status();
    float * device_out = (float *)workspace;
    float2 * partials = (float2 *)(workspace + out_bytes);
    MEMRA_LAUNCH(memra_grid(launch[0]), launch[0].threads, launch[0].shared_bytes, cuda->stream, log_softmax_partial_kernel)(partials, logits, rows, columns);
    cudaError_t error = cudaGetLastError();
    const char * kernel = "log_softmax_partial_kernel";
    if (error == cudaSuccess) {
        PROFILE_MARK("log_softmax_partial_kernel");
        MEMRA_LAUNCH(memra_grid(launch[1]), launch[1].threads, launch[1].shared_bytes, cuda->stream, log_softmax_combine_kernel)(
            device_out, partials, chunks, logits, (const int32_t *)device_targets, rows, columns);
        error = cudaGetLastError();
        kernel = "log_softmax_combine_kernel";
        if (error == cudaSuccess) PROFILE_MARK("log_softmax_combine_kernel");
    }
    void * hosts[1] = {out};
    const void * devices[1] = {device_out};
    const int64_t bytes[1] = {rows * 4};
    return read_back(function, cuda, error, kernel, workspace, 1, hosts, devices, bytes);
}
