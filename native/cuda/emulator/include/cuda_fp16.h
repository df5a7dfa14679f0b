/* cuda_fp16.h for the emulated build: __half and its conversions live in memra-cuda-emulator.h. */
#pragma once
#include "../memra-cuda-emulator.h"
