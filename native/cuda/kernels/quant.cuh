/*
 * quant.cuh — device dequantization of ggml weight blocks, 8 consecutive values at a time (one
 * "group": the unit every matrix kernel reads). Layouts and formulas as native/cpu/dequantize.c
 * (bit-exact with ggml): products and sums are written with __fmul_rn / __fadd_rn where the C code
 * multiplies then adds, so that the compiler cannot contract them into an FMA and the values equal
 * the CPU's.
 *
 * dequantize_group<TYPE>(row, group, v): v[0..8) = values [group * 8, group * 8 + 8) of a row that
 * starts at `row` (a row starts at a block boundary).
 */
#pragma once

#include "device.cuh"

#include "../launch-plan.h"

/* The i-quants' grids and sign table (ggml-common.h's), in device memory: read through L1 with
 * per-lane indices (a __constant__ table would serialize a warp's distinct addresses). */
#define MEMRA_IQ_TABLE static __device__ const
#include "../../common/iq-grids.h"
#undef MEMRA_IQ_TABLE

namespace memra_cuda_kernels {

/* (float)v for |v| < 2^22, exactly, without I2F (a quarter-rate instruction on sm_80/90, which
 * would bound the kernels that convert every weight code, and the int8 GEMM's per-block scaling):
 * the bits of 2^23 + 2^22 + v, a float whose integer part is that sum, minus 2^23 + 2^22: an IADD
 * and an FADD, both full rate. native/cuda/tests checks every such v. */
__device__ __forceinline__ float small_int_to_float(int32_t v) { return __fsub_rn(__int_as_float(0x4B400000 + v), 12582912.0f); }

__device__ __forceinline__ float half_at(const uint8_t * p) {
    return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short *>(p)));
}

/* 8 bytes from a 2-byte aligned address. */
__device__ __forceinline__ void load8(const uint8_t * p, uint8_t b[8]) {
    const unsigned short * s = reinterpret_cast<const unsigned short *>(p);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const unsigned short v = s[i];
        b[2 * i] = (uint8_t)(v & 0xff);
        b[2 * i + 1] = (uint8_t)(v >> 8);
    }
}

/* Where the 8 values of `group` of a q4_K / q5_K row (super-blocks of block_bytes) are: their
 * super-block, its 32-value sub-block j and their offset l in it; and the sub-block's scale
 * s = d · sc and offset o = −dmin · m. The super-block's first 16 bytes (d, dmin and the 12 bytes
 * q that pack the 6-bit sc and m of its 8 sub-blocks, as ggml's get_scale_min_k4) are one 16-byte
 * load: 144- and 176-byte super-blocks of 16-byte aligned rows (memra_cuda_check_weight). For
 * j < 4: sc = q[j] & 63, m = q[j + 4] & 63; else sc = (q[j + 4] & 15) | (q[j − 4] >> 6) << 4,
 * m = (q[j + 4] >> 4) | (q[j] >> 6) << 4: bytes j & 3 of q's three words. */
struct k4_group {
    const uint8_t * block;
    int j, l;
};
__device__ __forceinline__ k4_group k4_group_of(const uint8_t * row, int64_t group, int block_bytes, float & s, float & o) {
    const uint8_t * block = row + (group >> 5) * block_bytes;
    const int first = (int)(group & 31) * 8;
    const int j = first >> 5, shift = 8 * (j & 3);
    const uint4 head = __ldg(reinterpret_cast<const uint4 *>(block));
    const uint32_t q0 = (head.y >> shift) & 0xffu, q4 = (head.z >> shift) & 0xffu, q8 = (head.w >> shift) & 0xffu;
    const int sc = (int)(j < 4 ? q0 & 63u : (q8 & 15u) | ((q0 >> 6) << 4));
    const int m = (int)(j < 4 ? q4 & 63u : (q8 >> 4) | ((q4 >> 6) << 4));
    s = __fmul_rn(__half2float(__ushort_as_half((unsigned short)(head.x & 0xffffu))), (float)sc);
    o = -__fmul_rn(__half2float(__ushort_as_half((unsigned short)(head.x >> 16))), (float)m);
    return k4_group{block, j, first & 31};
}

/* Where the 8 values of `group` of a q6_K row are: their low-nibble and high-bit bytes (ql, qh,
 * 2-byte aligned; 8-byte aligned in the q6_K_x8 layout, X8), the shifts that take them out, and
 * their 16-value chunk's scale. A block's ql, qh, scales and d are at 0, 128, 192 and 208 of its
 * 210 bytes; with X8 at 144 + 128 k, 1,168 + 64 k, 16 + 16 k and 2 k of its 1,680-byte group of 8
 * (k: the block in the group). */
struct q6_k_group {
    const uint8_t * ql;
    const uint8_t * qh;
    int low_shift, high_shift;
    float scale;
};
template <bool X8 = false>
__device__ __forceinline__ q6_k_group q6_k_group_of(const uint8_t * row, int64_t group) {
    const int64_t b = group >> 5;
    const int k = (int)(b & 7);
    const uint8_t * block = X8 ? row + (b >> 3) * 1680 : row + b * 210;
    const uint8_t * ql = X8 ? block + 144 + 128 * k : block;
    const uint8_t * qh = X8 ? block + 1168 + 64 * k : block + 128;
    const uint8_t * scales = X8 ? block + 16 + 16 * k : block + 192;
    const uint8_t * d = X8 ? block + 2 * k : block + 208;
    const int first = (int)(group & 31) * 8;
    const int half = first >> 7, quarter = (first & 127) >> 5, l = first & 31;
    return q6_k_group{ql + half * 64 + (quarter & 1) * 32 + l, qh + half * 32 + l, (quarter >> 1) * 4, quarter * 2,
                      __fmul_rn(half_at(d), (float)(int8_t)scales[half * 8 + (l >> 4) + quarter * 2])};
}

template <int TYPE>
__device__ __forceinline__ void dequantize_group(const uint8_t * row, int64_t group, float v[8]);

template <>
__device__ __forceinline__ void dequantize_group<MEMRA_CUDA_TYPE_F32>(const uint8_t * row, int64_t group, float v[8]) {
    const float4 * p = reinterpret_cast<const float4 *>(row) + group * 2;
    const float4 a = p[0], b = p[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

template <>
__device__ __forceinline__ void dequantize_group<MEMRA_CUDA_TYPE_F16>(const uint8_t * row, int64_t group, float v[8]) {
    const uint4 raw = reinterpret_cast<const uint4 *>(row)[group];
    const __half2 * h = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __half22float2(h[i]);
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
    }
}

template <>
__device__ __forceinline__ void dequantize_group<MEMRA_CUDA_TYPE_BF16>(const uint8_t * row, int64_t group, float v[8]) {
    const uint4 raw = reinterpret_cast<const uint4 *>(row)[group];
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ uint32_t load_qh(const uint8_t * p) { /* 2-byte aligned */
    const unsigned short * s = reinterpret_cast<const unsigned short *>(p);
    return (uint32_t)s[0] | ((uint32_t)s[1] << 16);
}

/* codes_group<TYPE>(row, group, c, s, o): the 8 values of dequantize_group as s · c[i] + o, with
 * integer codes c (exact in f16: |c| ≤ 128) and the scale s and offset o of the group's 16-value
 * chunk (the same for both groups of a chunk). The integer GEMM multiplies the codes with the
 * activations' q8 codes exactly and applies s and o per chunk. Quantized types only. */
template <int TYPE>
__device__ __forceinline__ void codes_group(const uint8_t * row, int64_t group, float c[8], float & s, float & o);

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q8_0>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const uint8_t * block = row + (group >> 2) * 34;
    s = half_at(block);
    o = 0.0f;
    uint8_t b[8];
    load8(block + 2 + (group & 3) * 8, b);
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((int8_t)b[i]);
}

/* The repacked layout of blocks that are an f16 scale and P payload bytes (launch-plan.h's q8_0_x8,
 * P = 32 codes, and q4_0_x8, P = 16 nibble bytes): a group of 8 blocks is their 8 scales (16
 * bytes), then their 8 payloads. Block b of a row's scale and payload, and the byte of the file's 8
 * blocks that byte o of their group is (memra_cuda_repack). */
template <int P>
struct scale_first_x8 {
    static constexpr int BLOCK = 2 + P, GROUP = 16 + 8 * P;
    static __device__ __forceinline__ const uint8_t * scale(const uint8_t * row, int64_t b) { return row + (b >> 3) * GROUP + 2 * (b & 7); }
    static __device__ __forceinline__ const uint8_t * payload(const uint8_t * row, int64_t b) { return row + (b >> 3) * GROUP + 16 + P * (b & 7); }
    static __device__ __forceinline__ int source(int o) { return o < 16 ? BLOCK * (o >> 1) + (o & 1) : BLOCK * ((o - 16) / P) + 2 + (o - 16) % P; }
};
using q8_0_x8 = scale_first_x8<32>;
using q4_0_x8 = scale_first_x8<16>;

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q8_0_X8>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    s = half_at(q8_0_x8::scale(row, group >> 2));
    o = 0.0f;
    const uint2 w = *reinterpret_cast<const uint2 *>(q8_0_x8::payload(row, group >> 2) + (group & 3) * 8); /* 8-byte aligned */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        c[i] = small_int_to_float((int8_t)(w.x >> (8 * i)));
        c[4 + i] = small_int_to_float((int8_t)(w.y >> (8 * i)));
    }
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q4_0>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const uint8_t * block = row + (group >> 2) * 18;
    const int part = (int)(group & 3);
    s = half_at(block);
    o = 0.0f;
    uint8_t b[8];
    load8(block + 2 + (part & 1) * 8, b);
    const int shift = part >= 2 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((((b[i] >> shift) & 0x0f) - 8));
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q4_0_X8>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const int part = (int)(group & 3);
    s = half_at(q4_0_x8::scale(row, group >> 2));
    o = 0.0f;
    const uint2 w = *reinterpret_cast<const uint2 *>(q4_0_x8::payload(row, group >> 2) + (part & 1) * 8); /* 8-byte aligned */
    const int shift = part >= 2 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((int)((((i < 4 ? w.x : w.y) >> (8 * (i & 3) + shift)) & 0x0f)) - 8);
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q4_1>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const uint8_t * block = row + (group >> 2) * 20;
    const int part = (int)(group & 3);
    s = half_at(block);
    o = half_at(block + 2);
    uint8_t b[8];
    load8(block + 4 + (part & 1) * 8, b);
    const int shift = part >= 2 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float(((b[i] >> shift) & 0x0f));
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q5_0>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const uint8_t * block = row + (group >> 2) * 22;
    const int part = (int)(group & 3);
    s = half_at(block);
    o = 0.0f;
    const uint32_t qh = load_qh(block + 2);
    uint8_t b[8];
    load8(block + 6 + (part & 1) * 8, b);
    const int shift = part >= 2 ? 4 : 0;
    const int first = (part & 1) * 8 + (part >= 2 ? 16 : 0);
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float(((int)(((b[i] >> shift) & 0x0f) | (((qh >> (first + i)) & 1) << 4)) - 16)); /* int: qh is unsigned */
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q5_1>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const uint8_t * block = row + (group >> 2) * 24;
    const int part = (int)(group & 3);
    s = half_at(block);
    o = half_at(block + 2);
    const uint32_t qh = load_qh(block + 4);
    uint8_t b[8];
    load8(block + 8 + (part & 1) * 8, b);
    const int shift = part >= 2 ? 4 : 0;
    const int first = (part & 1) * 8 + (part >= 2 ? 16 : 0);
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((((b[i] >> shift) & 0x0f) | (((qh >> (first + i)) & 1) << 4)));
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q4_K>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const k4_group at = k4_group_of(row, group, 144, s, o);
    const uint8_t * block = at.block;
    const int j = at.j, l = at.l;
    uint8_t b[8];
    load8(block + 16 + (j >> 1) * 32 + l, b);
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float(((b[i] >> shift) & 0xf));
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q5_K>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const k4_group at = k4_group_of(row, group, 176, s, o);
    const uint8_t * block = at.block;
    const int j = at.j, l = at.l;
    uint8_t ql[8], qh[8];
    load8(block + 48 + (j >> 1) * 32 + l, ql);
    load8(block + 16 + l, qh);
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((((ql[i] >> shift) & 0xf) + ((qh[i] >> j) & 1 ? 16 : 0)));
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q6_K>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const q6_k_group at = q6_k_group_of(row, group);
    uint8_t ql[8], qh[8];
    load8(at.ql, ql);
    load8(at.qh, qh);
    s = at.scale;
    o = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float(((((ql[i] >> at.low_shift) & 0xf) | (((qh[i] >> at.high_shift) & 3) << 4)) - 32));
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q6_K_X8>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const q6_k_group at = q6_k_group_of<true>(row, group);
    const uint2 ql = *reinterpret_cast<const uint2 *>(at.ql), qh = *reinterpret_cast<const uint2 *>(at.qh); /* 8-byte aligned */
    s = at.scale;
    o = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const uint32_t low = (i < 4 ? ql.x : ql.y) >> (8 * (i & 3)), high = (i < 4 ? qh.x : qh.y) >> (8 * (i & 3));
        c[i] = small_int_to_float((int)(((low >> at.low_shift) & 0xf) | (((high >> at.high_shift) & 3) << 4)) - 32);
    }
}

/* Where the 8 values of `group` of a q2_K row are (84-byte super-blocks: 16 scale/minimum bytes,
 * 64 bytes of 2-bit codes, d, dmin): value v of a super-block is bits 2·j of byte
 * 16 + 32·(v / 128) + v % 32 (j = v % 128 / 32), in the 16-value chunk v / 16 with scale
 * d · (sc & 15) and offset −dmin · (sc >> 4). `q`: the group's 8 code bytes (2-byte aligned). */
struct k2_group {
    const uint8_t * q;
    int shift;
};
__device__ __forceinline__ k2_group q2_k_group_of(const uint8_t * row, int64_t group, float & s, float & o) {
    const uint8_t * block = row + (group >> 5) * 84;
    const int first = (int)(group & 31) * 8;
    const int sc = block[first >> 4];
    s = __fmul_rn(half_at(block + 80), (float)(sc & 0xf));
    o = -__fmul_rn(half_at(block + 82), (float)(sc >> 4));
    return k2_group{block + 16 + (first >> 7) * 32 + (first & 31), ((first & 127) >> 5) * 2};
}

/* Where the 8 values of `group` of a q3_K row are (110-byte super-blocks: 32 high-bit bytes, 64
 * bytes of 2-bit codes, 12 bytes of 6-bit scales, d): value v's low bits as in q2_K (bytes from 32
 * on), its high bit is bit 4·(v / 128) + j of byte v % 32 (code − 4 where it is clear); chunk
 * v / 16's scale d · (sc − 32), sc's low 4 bits from the low (chunks 0-7) or high (8-15) nibble of
 * byte chunk % 8, its high 2 from byte 8 + chunk % 4. `q`, `h`: the group's 8 low-bit and high-bit
 * bytes (2-byte aligned). */
struct k3_group {
    const uint8_t * q;
    const uint8_t * h;
    int shift, bit;
};
__device__ __forceinline__ k3_group q3_k_group_of(const uint8_t * row, int64_t group, float & s) {
    const uint8_t * block = row + (group >> 5) * 110;
    const int first = (int)(group & 31) * 8;
    const int chunk = first >> 4;
    const uint8_t * scales = block + 96;
    const int sc = ((scales[chunk & 7] >> ((chunk >> 3) * 4)) & 0xf) | (((scales[8 + (chunk & 3)] >> ((chunk >> 2) * 2)) & 3) << 4);
    s = __fmul_rn(half_at(block + 108), (float)(sc - 32));
    const int j = (first & 127) >> 5;
    return k3_group{block + 32 + (first >> 7) * 32 + (first & 31), block + (first & 31), 2 * j, (first >> 7) * 4 + j};
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q2_K>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const k2_group at = q2_k_group_of(row, group, s, o);
    uint8_t q[8];
    load8(at.q, q);
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((q[i] >> at.shift) & 3);
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_Q3_K>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const k3_group at = q3_k_group_of(row, group, s);
    o = 0.0f;
    uint8_t q[8], h[8];
    load8(at.q, q);
    load8(at.h, h);
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float(((q[i] >> at.shift) & 3) - ((h[i] >> at.bit) & 1 ? 0 : 4));
}

/* ggml's kvalues_iq4nl (−127, −104, ..., 113) as the bytes of 4 words, and the bytes of 4 of them
 * at once: byte n of the result is value (byte n of `indices`), each index 0..15. __byte_perm picks
 * from values 0-7 and from 8-15 with the indices' low 3 bits; bit 3 chooses between the two. */
__device__ __forceinline__ uint32_t iq4_nl_bytes(uint32_t indices) {
    const uint32_t selector = (indices & 0x7u) | ((indices >> 4) & 0x70u) | ((indices >> 8) & 0x700u) | ((indices >> 12) & 0x7000u);
    const uint32_t low = __byte_perm(0xbfad9881u, 0xf6eaddcfu, selector);
    const uint32_t high = __byte_perm(0x26190d01u, 0x71594535u, selector);
    const uint32_t upper = ((indices >> 3) & 0x01010101u) * 0xffu;
    return (low & ~upper) | (high & upper);
}

/* The 8 codes of 8 4-bit indices (the low or high nibbles of `q`'s 8 bytes, by `shift`). */
__device__ __forceinline__ void iq4_codes(const uint8_t * q, int shift, float c[8]) {
    uint8_t b[8];
    load8(q, b);
    uint32_t words[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; i++) words[i >> 2] |= (uint32_t)((b[i] >> shift) & 0x0f) << (8 * (i & 3));
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint32_t values = iq4_nl_bytes(words[i]);
#pragma unroll
        for (int j = 0; j < 4; j++) c[4 * i + j] = small_int_to_float((int8_t)(values >> (8 * j)));
    }
}

/* Where the 8 values of `group` of an iq4_nl row are (18-byte blocks of 32: d, 16 bytes of 4-bit
 * indices, low nibbles first as q4_0): their 8 index bytes (2-byte aligned) and nibble; scale d. */
struct iq4_group {
    const uint8_t * q;
    int shift;
};
__device__ __forceinline__ iq4_group iq4_nl_group_of(const uint8_t * row, int64_t group, float & s) {
    const uint8_t * block = row + (group >> 2) * 18;
    const int part = (int)(group & 3);
    s = half_at(block);
    return iq4_group{block + 2 + (part & 1) * 8, part >= 2 ? 4 : 0};
}

/* The same for iq4_xs (136-byte super-blocks: d, 2 bytes of high scale bits, 4 of low, 128 bytes of
 * indices, 16 per 32-value sub-block as iq4_nl): sub-block b's scale d · (ls − 32), ls's low 4 bits
 * from nibble b % 2 of byte 4 + b / 2, its high 2 from bits 2·b of the 16-bit word at 2. */
__device__ __forceinline__ iq4_group iq4_xs_group_of(const uint8_t * row, int64_t group, float & s) {
    const uint8_t * block = row + (group >> 5) * 136;
    const int first = (int)(group & 31) * 8;
    const int sub = first >> 5;
    const int high = block[2] | (block[3] << 8);
    const int ls = ((block[4 + (sub >> 1)] >> ((sub & 1) * 4)) & 0xf) | (((high >> (2 * sub)) & 3) << 4);
    s = __fmul_rn(half_at(block), (float)(ls - 32));
    return iq4_group{block + 8 + sub * 16 + (first & 15), (first & 16) ? 4 : 0};
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_IQ4_NL>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const iq4_group at = iq4_nl_group_of(row, group, s);
    o = 0.0f;
    iq4_codes(at.q, at.shift, c);
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_IQ4_XS>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    const iq4_group at = iq4_xs_group_of(row, group, s);
    o = 0.0f;
    iq4_codes(at.q, at.shift, c);
}

/*
 * The i-quants (super-blocks of 256 values, 32 of whose 8-value groups fill a warp). A group is one
 * entry of a lookup grid (8 magnitudes for iq2 and iq1, 4 for iq3: two entries) with signs from a
 * 7-bit index into ksigns_iq2xs (its 8th bit the parity of the 7) or from a sign byte, scaled by
 * its 16- or 32-value sub-block's scale. The `*_words` functions give a group's 8 codes as the
 * signed bytes of two words (value i in byte i % 4 of word i / 4) and its scale s, value i =
 * s · code i exactly as ggml's dequantize_row_* computes it (s = d · (0.5 + ls) · 0.25 and the like,
 * rounded where ggml rounds; s · code is ggml's product, its sign exact). The codes are the
 * __dp4a operands of code_words and, as floats, codes_group's. Blocks are 2-byte aligned
 * (66, 74, 82, 98, 110, 50 bytes; iq1_m's 56: 8-byte aligned), so multi-byte fields are read 16
 * bits at a time.
 */

/* A byte, and a 2-byte aligned little-endian u16 and u32, of the weights (which no kernel writes:
 * through the read-only cache). */
__device__ __forceinline__ uint32_t u8_at(const uint8_t * p) { return __ldg(p); }
__device__ __forceinline__ uint32_t u16_at(const uint8_t * p) { return __ldg(reinterpret_cast<const unsigned short *>(p)); }
__device__ __forceinline__ uint32_t u32_at(const uint8_t * p) { return u16_at(p) | (u16_at(p + 2) << 16); }

/* Bytes 1..127 of `grid` negated where bit i (i < 4) of `signs` is set: −g = ~g + 1 in each byte
 * (no carry into the next byte, as ~g ≤ 254). */
__device__ __forceinline__ uint32_t signed_grid_bytes(uint32_t grid, uint32_t signs) {
    const uint32_t ones = ((signs & 0xfu) * 0x00204081u) & 0x01010101u; /* bit i to bit 0 of byte i */
    return (grid ^ (ones * 0xffu)) + ones;
}

/* An 8-value grid entry (iq2) with 8 sign bits. */
__device__ __forceinline__ void signed_grid_words(uint64_t grid, uint32_t signs, uint32_t w[2]) {
    w[0] = signed_grid_bytes((uint32_t)grid, signs);
    w[1] = signed_grid_bytes((uint32_t)(grid >> 32), signs >> 4);
}

/* d · (0.5 + ls) · factor (0.25 or 0.5) as ggml's float products (d · (0.5 + ls) is exact). */
__device__ __forceinline__ float iq_half_scale(const uint8_t * d, int ls, float factor) {
    return __fmul_rn(__fmul_rn(half_at(d), __fadd_rn(0.5f, small_int_to_float(ls))), factor);
}

/* iq2_xxs (66 bytes: d, then per 32-value sub-block 4 grid indices and a u32 of 4 × 7 sign bits
 * and the 4-bit scale ls in its top bits): group l of sub-block b is iq2xxs_grid[byte l], signs
 * ksigns[(u32 >> 7l) & 127], s = d · (0.5 + ls) · 0.25. */
__device__ __forceinline__ void iq2_xxs_words(const uint8_t * row, int64_t group, uint32_t w[2], float & s) {
    const uint8_t * block = row + (group >> 5) * 66;
    const int g = (int)(group & 31), l = g & 3;
    const uint8_t * q = block + 2 + 8 * (g >> 2);
    const uint32_t aux = u32_at(q + 4);
    s = iq_half_scale(block, (int)(aux >> 28), 0.25f);
    signed_grid_words(memra_iq2xxs_grid[u8_at(q + l)], memra_ksigns_iq2xs[(aux >> (7 * l)) & 127], w);
}

/* iq2_xs (74 bytes: d, 32 u16 of a 9-bit grid index and a 7-bit sign index, 8 scale bytes): group
 * g's u16 is g; sub-block b's byte holds the scales of its two 16-value halves (low nibble first),
 * s = d · (0.5 + ls) · 0.25. */
__device__ __forceinline__ void iq2_xs_words(const uint8_t * row, int64_t group, uint32_t w[2], float & s) {
    const uint8_t * block = row + (group >> 5) * 74;
    const int g = (int)(group & 31);
    const uint32_t q = u16_at(block + 2 + 2 * g);
    s = iq_half_scale(block, (u8_at(block + 66 + (g >> 2)) >> ((g & 2) * 2)) & 15, 0.25f);
    signed_grid_words(memra_iq2xs_grid[q & 511], memra_ksigns_iq2xs[q >> 9], w);
}

/* iq2_s (82 bytes: d, 32 low index bytes, 32 sign bytes, 8 bytes of high index bits (2 per group),
 * 8 scale bytes as iq2_xs's): group g's index is byte g | bits 2l..2l+1 of qh[b] << 8, its signs
 * byte 32 + g of the payload. */
__device__ __forceinline__ void iq2_s_words(const uint8_t * row, int64_t group, uint32_t w[2], float & s) {
    const uint8_t * block = row + (group >> 5) * 82;
    const int g = (int)(group & 31), b = g >> 2, l = g & 3;
    s = iq_half_scale(block, (u8_at(block + 74 + b) >> ((g & 2) * 2)) & 15, 0.25f);
    const int index = u8_at(block + 2 + g) | (((u8_at(block + 66 + b) >> (2 * l)) & 3) << 8);
    signed_grid_words(memra_iq2s_grid[index], u8_at(block + 34 + g), w);
}

/* iq3_xxs (98 bytes: d, 64 grid indices of 4 values each, then per sub-block a u32 as iq2_xxs's):
 * group g is the entries of index bytes 2g and 2g + 1, s = d · (0.5 + ls) · 0.5. */
__device__ __forceinline__ void iq3_xxs_words(const uint8_t * row, int64_t group, uint32_t w[2], float & s) {
    const uint8_t * block = row + (group >> 5) * 98;
    const int g = (int)(group & 31);
    const uint32_t aux = u32_at(block + 66 + 4 * (g >> 2));
    s = iq_half_scale(block, (int)(aux >> 28), 0.5f);
    const uint32_t indices = u16_at(block + 2 + 2 * g);
    const uint32_t signs = memra_ksigns_iq2xs[(aux >> (7 * (g & 3))) & 127];
    w[0] = signed_grid_bytes(memra_iq3xxs_grid[indices & 0xff], signs);
    w[1] = signed_grid_bytes(memra_iq3xxs_grid[indices >> 8], signs >> 4);
}

/* iq3_s (110 bytes: d, 64 low index bytes, 8 bytes of 9th index bits, 32 sign bytes, 4 scale
 * bytes): group g's indices are bytes 2g, 2g + 1 with bits 2l, 2l + 1 of qh[b] as their 9th, signs
 * byte g; sub-block b's scale is nibble b % 2 of byte b / 2, s = d · (1 + 2 · ls). */
__device__ __forceinline__ void iq3_s_words(const uint8_t * row, int64_t group, uint32_t w[2], float & s) {
    const uint8_t * block = row + (group >> 5) * 110;
    const int g = (int)(group & 31), b = g >> 2, l = g & 3;
    s = __fmul_rn(half_at(block), small_int_to_float(1 + 2 * ((u8_at(block + 106 + (b >> 1)) >> (4 * (b & 1))) & 15)));
    const uint32_t indices = u16_at(block + 2 + 2 * g), high = u8_at(block + 66 + b) >> (2 * l);
    const uint32_t signs = u8_at(block + 74 + g);
    w[0] = signed_grid_bytes(memra_iq3s_grid[(indices & 0xff) | ((high & 1) << 8)], signs);
    w[1] = signed_grid_bytes(memra_iq3s_grid[(indices >> 8) | ((high & 2) << 7)], signs >> 4);
}

/* iq1_s and iq1_m: value = dl · (grid + delta), grid ∈ {−1, 0, 1} (iq1s_grid's int8 bytes), delta =
 * ±1/8. An iq1_group is the group's grid entry as two words of those bytes, its dl and whether
 * its delta is negative. iq1_s (50 bytes: d, 32 low index bytes, 8 u16 of 4 × 3 high index bits, a 3-bit
 * scale and the delta's sign per sub-block): dl = d · (2 · ls + 1). iq1_m (56 bytes: 32 low index
 * bytes, 16 bytes of a nibble per group (3 high index bits, the delta's sign), 4 u16 of two 3-bit
 * scales per sub-block (one per 16 values) whose top nibbles are d's 16 bits). */
struct iq1_group {
    uint32_t grid[2];
    float dl;
    bool negative;
};
__device__ __forceinline__ iq1_group iq1_group_of(const uint64_t entry, float dl, bool negative) {
    return iq1_group{{(uint32_t)entry, (uint32_t)(entry >> 32)}, dl, negative};
}
__device__ __forceinline__ iq1_group iq1_s_group_of(const uint8_t * row, int64_t group) {
    const uint8_t * block = row + (group >> 5) * 50;
    const int g = (int)(group & 31);
    const uint32_t qh = u16_at(block + 34 + 2 * (g >> 2));
    const float dl = __fmul_rn(half_at(block), small_int_to_float(2 * (int)((qh >> 12) & 7) + 1));
    return iq1_group_of(memra_iq1s_grid[u8_at(block + 2 + g) | (((qh >> (3 * (g & 3))) & 7) << 8)], dl, (qh & 0x8000) != 0);
}
__device__ __forceinline__ iq1_group iq1_m_group_of(const uint8_t * row, int64_t group) {
    const uint8_t * block = row + (group >> 5) * 56;
    const int g = (int)(group & 31), b = g >> 2, l = g & 3;
    const uint2 sc = __ldg(reinterpret_cast<const uint2 *>(block + 48)); /* 8-byte aligned: 56-byte blocks of 16-byte aligned rows */
    const uint32_t d = ((sc.x >> 12) & 0xfu) | ((sc.x >> 24) & 0xf0u) | ((sc.y >> 4) & 0xf00u) | ((sc.y >> 16) & 0xf000u);
    const uint32_t scales = ((b & 4) ? sc.y : sc.x) >> (8 * (b & 2)); /* u16 b / 2 (bits above its 12 unused) */
    const int ls = (int)((scales >> (6 * (b & 1) + 3 * (l >> 1))) & 7);
    const float dl = __fmul_rn(__half2float(__ushort_as_half((unsigned short)d)), small_int_to_float(2 * ls + 1));
    const uint32_t qh = u8_at(block + 32 + 2 * b + (l >> 1)) >> (4 * (l & 1)); /* the group's nibble */
    return iq1_group_of(memra_iq1s_grid[u8_at(block + g) | ((qh & 7) << 8)], dl, (qh & 8) != 0);
}

/* The 8 codes of an iq2 / iq3 group as floats. */
__device__ __forceinline__ void signed_byte_codes(const uint32_t w[2], float c[8]) {
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float((int8_t)(w[i >> 2] >> (8 * (i & 3))));
}

/* An iq1 group's codes for codes_group: 8 · grid ± 1 with s = dl / 8 and no offset (iq1_m's delta
 * changes every 8 values, more often than the integer GEMM's 16-value chunks take an offset):
 * s · code = dl · (grid ± 1/8) exactly, one rounding as ggml's dl · (grid + delta). */
__device__ __forceinline__ void iq1_codes(const iq1_group & at, float c[8], float & s, float & o) {
    s = __fmul_rn(at.dl, 0.125f);
    o = 0.0f;
    const int delta = at.negative ? -1 : 1;
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = small_int_to_float(8 * (int)(int8_t)(at.grid[i >> 2] >> (8 * (i & 3))) + delta);
}

#define MEMRA_CUDA_IQ_CODES_GROUP(TYPE_ID, WORDS)                                                                                 \
    template <>                                                                                                                \
    __device__ __forceinline__ void codes_group<TYPE_ID>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) { \
        uint32_t w[2];                                                                                                         \
        WORDS(row, group, w, s);                                                                                               \
        o = 0.0f;                                                                                                              \
        signed_byte_codes(w, c);                                                                                               \
    }
MEMRA_CUDA_IQ_CODES_GROUP(MEMRA_CUDA_TYPE_IQ2_XXS, iq2_xxs_words)
MEMRA_CUDA_IQ_CODES_GROUP(MEMRA_CUDA_TYPE_IQ2_XS, iq2_xs_words)
MEMRA_CUDA_IQ_CODES_GROUP(MEMRA_CUDA_TYPE_IQ2_S, iq2_s_words)
MEMRA_CUDA_IQ_CODES_GROUP(MEMRA_CUDA_TYPE_IQ3_XXS, iq3_xxs_words)
MEMRA_CUDA_IQ_CODES_GROUP(MEMRA_CUDA_TYPE_IQ3_S, iq3_s_words)
#undef MEMRA_CUDA_IQ_CODES_GROUP

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_IQ1_S>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    iq1_codes(iq1_s_group_of(row, group), c, s, o);
}

template <>
__device__ __forceinline__ void codes_group<MEMRA_CUDA_TYPE_IQ1_M>(const uint8_t * row, int64_t group, float c[8], float & s, float & o) {
    iq1_codes(iq1_m_group_of(row, group), c, s, o);
}

/* The quantized types' dequantization is their codes: v = s · c (+ o), with the products and the
 * sum rounded separately as native/cpu/dequantize.c does (s · c − m₁ = s · c + (−m₁) exactly). */
#define MEMRA_CUDA_DEQUANTIZE_FROM_CODES(TYPE_ID, OFFSET)                                                            \
    template <>                                                                                                     \
    __device__ __forceinline__ void dequantize_group<TYPE_ID>(const uint8_t * row, int64_t group, float v[8]) {     \
        float c[8], s, o;                                                                                           \
        codes_group<TYPE_ID>(row, group, c, s, o);                                                                  \
        _Pragma("unroll") for (int i = 0; i < 8; i++) v[i] = OFFSET ? __fadd_rn(__fmul_rn(s, c[i]), o) : __fmul_rn(s, c[i]); \
    }
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q8_0, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q8_0_X8, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q4_0, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q4_0_X8, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q4_1, true)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q5_0, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q5_1, true)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q4_K, true)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q5_K, true)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q6_K, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q6_K_X8, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q2_K, true)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_Q3_K, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ4_NL, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ4_XS, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ2_XXS, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ2_XS, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ2_S, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ3_XXS, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ3_S, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ1_S, false)
MEMRA_CUDA_DEQUANTIZE_FROM_CODES(MEMRA_CUDA_TYPE_IQ1_M, false)
#undef MEMRA_CUDA_DEQUANTIZE_FROM_CODES

}  // namespace memra_cuda_kernels

/* `case` labels running CALL with `constexpr int T` = the type, for the quantized types (codes_group). */
#define MEMRA_CUDA_QUANTIZED_TYPE_CASES(CALL)                                               \
    case MEMRA_CUDA_TYPE_Q8_0: { constexpr int T = MEMRA_CUDA_TYPE_Q8_0; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q8_0_X8: { constexpr int T = MEMRA_CUDA_TYPE_Q8_0_X8; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q4_0: { constexpr int T = MEMRA_CUDA_TYPE_Q4_0; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q4_0_X8: { constexpr int T = MEMRA_CUDA_TYPE_Q4_0_X8; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q4_1: { constexpr int T = MEMRA_CUDA_TYPE_Q4_1; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q5_0: { constexpr int T = MEMRA_CUDA_TYPE_Q5_0; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q5_1: { constexpr int T = MEMRA_CUDA_TYPE_Q5_1; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q4_K: { constexpr int T = MEMRA_CUDA_TYPE_Q4_K; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q5_K: { constexpr int T = MEMRA_CUDA_TYPE_Q5_K; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q6_K: { constexpr int T = MEMRA_CUDA_TYPE_Q6_K; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q6_K_X8: { constexpr int T = MEMRA_CUDA_TYPE_Q6_K_X8; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q2_K: { constexpr int T = MEMRA_CUDA_TYPE_Q2_K; CALL; } break; \
    case MEMRA_CUDA_TYPE_Q3_K: { constexpr int T = MEMRA_CUDA_TYPE_Q3_K; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ4_NL: { constexpr int T = MEMRA_CUDA_TYPE_IQ4_NL; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ4_XS: { constexpr int T = MEMRA_CUDA_TYPE_IQ4_XS; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ2_XXS: { constexpr int T = MEMRA_CUDA_TYPE_IQ2_XXS; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ2_XS: { constexpr int T = MEMRA_CUDA_TYPE_IQ2_XS; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ2_S: { constexpr int T = MEMRA_CUDA_TYPE_IQ2_S; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ3_XXS: { constexpr int T = MEMRA_CUDA_TYPE_IQ3_XXS; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ3_S: { constexpr int T = MEMRA_CUDA_TYPE_IQ3_S; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ1_S: { constexpr int T = MEMRA_CUDA_TYPE_IQ1_S; CALL; } break; \
    case MEMRA_CUDA_TYPE_IQ1_M: { constexpr int T = MEMRA_CUDA_TYPE_IQ1_M; CALL; } break;

/* Runs CALL with `constexpr int T` = the runtime type, for every supported type; nothing for others. */
#define MEMRA_CUDA_DISPATCH_TYPE(type, CALL)                                                  \
    switch (type) {                                                                           \
        case MEMRA_CUDA_TYPE_F32: { constexpr int T = MEMRA_CUDA_TYPE_F32; CALL; } break;   \
        case MEMRA_CUDA_TYPE_F16: { constexpr int T = MEMRA_CUDA_TYPE_F16; CALL; } break;   \
        case MEMRA_CUDA_TYPE_BF16: { constexpr int T = MEMRA_CUDA_TYPE_BF16; CALL; } break; \
        MEMRA_CUDA_QUANTIZED_TYPE_CASES(CALL)                                                 \
        default: break;                                                                       \
    }

/* The same over the quantized types only. */
#define MEMRA_CUDA_DISPATCH_QUANTIZED_TYPE(type, CALL) \
    switch (type) {                                    \
        MEMRA_CUDA_QUANTIZED_TYPE_CASES(CALL)          \
        default: break;                                \
    }
