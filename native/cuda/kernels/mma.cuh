/*
 * mma.cuh — the tensor-core instructions of the GEMMs and flash attention:
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 and, for the int8 GEMM,
 * mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (on the emulator, their CPU implementations by the
 * PTX fragment layouts), ldmatrix and cp.async for the pipelined int8 GEMM, and packing f32 values
 * into f16 pairs.
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

/* ldmatrix.sync.aligned.m8n8.x4.shared.b16: lanes 8i .. 8i + 7 give the addresses of matrix i's 8
 * rows (16 bytes each, in shared memory, 16-byte aligned); lane l gets word l & 3 of row l >> 2 of
 * matrix i in r[i]. For int8 operands, the A fragment of an m16n8k32 tile is the 4 matrices (rows
 * 0-7, bytes 0-15), (8-15, 0-15), (0-7, 16-31), (8-15, 16-31); a B fragment is 2 of them. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void * row) {
#ifdef MEMRA_CUDA_EMULATED
    memra_emu::ldmatrix_x4(r, row);
#else
    const uint32_t address = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#endif
}

/* cp.async of BYTES (4, 8 or 16) from global to shared memory, both aligned to BYTES: the source's
 * bytes where `present`, else zeros (the source is not read). 16 bytes go through L2 only (.cg),
 * smaller copies through L1 (.ca, the only form they have). Complete once a cp_async_wait lets its
 * group (cp_async_commit) finish; then a barrier shows them to the block. */
template <int BYTES>
__device__ __forceinline__ void cp_async(void * shared, const void * global, bool present) {
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
#ifdef MEMRA_CUDA_EMULATED
    memra_emu::cp_async(shared, global, BYTES, present ? BYTES : 0);
#else
    const uint32_t address = (uint32_t)__cvta_generic_to_shared(shared);
    const int source_bytes = present ? BYTES : 0;
    if constexpr (BYTES == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(source_bytes));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(address), "l"(global), "n"(BYTES), "r"(source_bytes));
    }
#endif
}

/* cp.async.commit_group: the thread's cp.async issued since the last commit become one group. */
__device__ __forceinline__ void cp_async_commit() {
#ifdef MEMRA_CUDA_EMULATED
    memra_emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* cp.async.wait_group PENDING: all but the thread's newest PENDING groups have landed. */
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
#ifdef MEMRA_CUDA_EMULATED
    memra_emu::cp_async_wait(PENDING);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
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
