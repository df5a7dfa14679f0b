/*
 * mma.cuh — the tensor-core instructions of the GEMMs and flash attention:
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 and, for the int8 GEMM,
 * mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (on the emulator, their CPU implementations by the
 * PTX fragment layouts), and packing f32 values into f16 pairs.
 */
#pragma once

#include "device.cuh"

namespace memra_cuda_kernels {

__device__ __forceinline__ void mma_m16n8k16(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#ifdef MEMRA_CUDA_EMULATED
    memra_emu::mma_m16n8k16_f16_f32(c, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (sm_80+): c += a · b on int8 codes, exact in s32
 * (32 products of at most 2^14 each). Fragments: emulator/memra-cuda-emulator.h. */
__device__ __forceinline__ void mma_m16n8k32_s8(int32_t c[4], const uint32_t a[4], const uint32_t b[2]) {
#ifdef MEMRA_CUDA_EMULATED
    memra_emu::mma_m16n8k32_s8_s32(c, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ uint4 pack_half8(const float v[8]) {
    uint4 packed;
    uint32_t * word = reinterpret_cast<uint32_t *>(&packed);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        word[i] = *reinterpret_cast<const uint32_t *>(&h);
    }
    return packed;
}

}  // namespace memra_cuda_kernels
