/*
 * device.cuh — what every kernel header includes: the CUDA headers, or in the emulated build
 * (-DMEMRA_CUDA_EMULATED, native/cuda/emulator) their CPU implementation; and the two spellings
 * the emulated build needs in place of CUDA syntax a C++ compiler cannot parse:
 *   MEMRA_LAUNCH(grid, block, shared, stream, kernel)(arguments)   kernel<<<grid, block, shared, stream>>>(arguments)
 *                                                                  (on a GPU: cudaLaunchKernelEx, below)
 *   MEMRA_DYNAMIC_SHARED(T, name);                                  extern __shared__ T name[];
 */
#pragma once

#ifdef MEMRA_CUDA_EMULATED
#include "../emulator/memra-cuda-emulator.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <utility>

/* 1 where launches allow programmatic dependent launch (context.cu: sm_90 and newer, unless
 * MEMRA_CUDA_PDL=0, and only once a probe launch and graph capture with it have worked). */
extern int memra_cuda_pdl;

/* kernel<<<grid, block, shared, stream>>>(arguments) through cudaLaunchKernelEx, with
 * cudaLaunchAttributeProgrammaticStreamSerialization where memra_cuda_pdl: the kernel may be
 * launched while the previous one in the stream finishes; memra_grid_dependencies(), every
 * kernel's first statement, waits for that one to complete before anything touches memory. */
template <typename... Parameters>
struct memra_launch {
    void (*kernel)(Parameters...);
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    template <typename... Arguments>
    void operator()(Arguments &&... arguments) const {
        cudaLaunchAttribute attribute[1];
        attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config = {};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = shared;
        config.stream = stream;
        config.attrs = attribute;
        config.numAttrs = memra_cuda_pdl ? 1 : 0;
        (void)cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(arguments)...); /* errors: cudaGetLastError (LAUNCH_CHECK) */
    }
};
template <typename... Parameters>
static inline memra_launch<Parameters...> memra_make_launch(void (*kernel)(Parameters...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream) {
    return memra_launch<Parameters...>{kernel, grid, block, shared, stream};
}
#define MEMRA_LAUNCH(grid, block, shared, stream, ...) memra_make_launch(__VA_ARGS__, dim3(grid), dim3(block), (size_t)(shared), stream)
#define MEMRA_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

#include <math.h>
#include <stdint.h>

/* Every kernel's first statement (programmatic dependent launch, sm_90): wait until the kernel
 * before it in the stream has completed and its writes are visible (griddepcontrol.wait; at once
 * when it was not launched as a dependent), then let the next kernel begin launching
 * (griddepcontrol.launch_dependents), so that its launch overlaps this one's run; that kernel
 * in turn waits for this one's completion before it touches memory. Nothing before the wait may
 * read or write memory (native/cuda/tests checks that every kernel starts with this call). No-op
 * before sm_90 and on the emulator, which runs launches one after another. */
__device__ __forceinline__ void memra_grid_dependencies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
