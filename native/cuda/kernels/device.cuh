/*
 * device.cuh — what every kernel header includes: the CUDA headers, or in the emulated build
 * (-DMEMRA_CUDA_EMULATED, native/cuda/emulator) their CPU implementation; and the two spellings
 * the emulated build needs in place of CUDA syntax a C++ compiler cannot parse:
 *   MEMRA_LAUNCH(grid, block, shared, stream, kernel)(arguments)   kernel<<<grid, block, shared, stream>>>(arguments)
 *   MEMRA_DYNAMIC_SHARED(T, name);                                  extern __shared__ T name[];
 */
#pragma once

#ifdef MEMRA_CUDA_EMULATED
#include "../emulator/memra-cuda-emulator.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define MEMRA_LAUNCH(grid, block, shared, stream, ...) __VA_ARGS__<<<grid, block, shared, stream>>>
#define MEMRA_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

#include <math.h>
#include <stdint.h>
