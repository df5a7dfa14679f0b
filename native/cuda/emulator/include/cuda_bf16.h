/* cuda_bf16.h for the emulated build: __nv_bfloat16 and its conversions live in memra-cuda-emulator.h. */
#pragma once
#include "../memra-cuda-emulator.h"
