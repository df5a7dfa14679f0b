/*
 * mma.cuh — the tensor-core instruction the GEMMs and flash attention share:
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (on the emulator, its CPU implementation by the
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
