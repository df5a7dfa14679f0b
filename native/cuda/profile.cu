/*
 * profile.cu — memra_cuda_profile_begin / _end: a CUDA event after every kernel launch of one
 * context (LAUNCH_CHECK calls memra_cuda_profile_mark), and the GPU time between consecutive ones.
 */
#include <stdio.h>
#include <string.h>

#include "cuda-internal.cuh"
#include "kernels/device.cuh"

int memra_cuda_profiling = 0;

namespace {

struct profile {
    memra_cuda * cuda = nullptr;
    std::vector<cudaEvent_t> events; /* events[0]: after the hold; events[i + 1]: after launch i */
    std::vector<const char *> names;
    int64_t count = 0;
    bool overflow = false;
};

profile * active = nullptr;

void destroy(profile * p) {
    for (cudaEvent_t event : p->events)
        if (event) cudaEventDestroy(event);
    delete p;
}

}  // namespace

/* Holds the stream for `nanoseconds` of the GPU's global timer (nothing on the emulator, which
 * runs each launch when it is made). */
static __global__ void profile_hold_kernel(unsigned long long nanoseconds) {
    memra_grid_dependencies();
#ifndef MEMRA_CUDA_EMULATED
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
#else
    (void)nanoseconds;
#endif
}

void memra_cuda_profile_mark(const char * kernel) {
    profile * p = active;
    if (!p) return;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(p->cuda->stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone) return;
    if (p->count + 1 >= (int64_t)p->events.size()) {
        p->overflow = true;
        return;
    }
    if (cudaEventRecord(p->events[p->count + 1], p->cuda->stream) == cudaSuccess) p->names[p->count++] = kernel;
}

void memra_cuda_profile_release(memra_cuda * cuda) {
    if (!active || active->cuda != cuda) return;
    memra_cuda_profiling = 0;
    destroy(active);
    active = nullptr;
}

extern "C" int memra_cuda_profile_begin(memra_cuda * cuda, int64_t capacity, int64_t hold_microseconds) {
    static const char function[] = "memra_cuda_profile_begin";
    CHECK(memra_cuda_enter(function, cuda));
    if (capacity < 1 || capacity > (1 << 20)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: capacity %lld (1 to 1048576 launches)", function, (long long)capacity);
    if (hold_microseconds < 0 || hold_microseconds > 10000000) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: hold of %lld µs (0 to 10 s)", function, (long long)hold_microseconds);
    }
    if (cuda->capture) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the context is capturing a graph", function);
    if (active) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: a context of this process is already profiling", function);
    profile * p = new (std::nothrow) profile();
    if (!p) FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    try {
        p->events.assign((size_t)capacity + 1, nullptr);
        p->names.assign((size_t)capacity, nullptr);
    } catch (...) {
        delete p;
        FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld events", function, (long long)capacity);
    }
    p->cuda = cuda;
    for (cudaEvent_t & event : p->events) {
        const cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDefault);
        if (error != cudaSuccess) {
            event = nullptr;
            destroy(p);
            return memra_cuda_fail_cuda(error, function, "cudaEventCreateWithFlags");
        }
    }
    MEMRA_LAUNCH(1, 32, 0, cuda->stream, profile_hold_kernel)((unsigned long long)hold_microseconds * 1000ull);
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) error = cudaEventRecord(p->events[0], cuda->stream);
    if (error != cudaSuccess) {
        destroy(p);
        return memra_cuda_fail_cuda(error, function, "launching profile_hold_kernel");
    }
    active = p;
    memra_cuda_profiling = 1;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_profile_end(memra_cuda * cuda, char * names, int64_t names_bytes, float * microseconds, int64_t capacity, int64_t * count) {
    static const char function[] = "memra_cuda_profile_end";
    CHECK(memra_cuda_enter(function, cuda));
    if (!active || active->cuda != cuda) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the context is not profiling", function);
    if (!count || (capacity > 0 && (!microseconds || !names)) || capacity < 0 || names_bytes < 0) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: no place for the results", function);
    }
    profile * p = active;
    active = nullptr;
    memra_cuda_profiling = 0;
    struct ended {
        profile * p;
        ~ended() { destroy(p); }
    } guard{p};
    CUDA_CHECK(function, cudaStreamSynchronize(cuda->stream));
    *count = p->count;
    int64_t used = 0;
    for (int64_t i = 0; i < p->count && i < capacity; i++) {
        float ms = 0.0f;
        CUDA_CHECK(function, cudaEventElapsedTime(&ms, p->events[(size_t)i], p->events[(size_t)i + 1]));
        microseconds[i] = ms * 1000.0f;
        const int64_t length = (int64_t)strlen(p->names[(size_t)i]);
        if (used + length + 1 >= names_bytes) FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: %lld bytes hold the names of %lld launches", function, (long long)names_bytes, (long long)i);
        memcpy(names + used, p->names[(size_t)i], (size_t)length);
        names[used + length] = '\n';
        used += length + 1;
    }
    if (names_bytes > 0) names[used < names_bytes ? used : names_bytes - 1] = '\0';
    if (p->overflow || p->count > capacity) {
        FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: more kernels launched than the profile's capacity of %lld (the first ones written)", function,
             (long long)(capacity < (int64_t)p->names.size() ? capacity : (int64_t)p->names.size()));
    }
    return MEMRA_CUDA_OK;
}
