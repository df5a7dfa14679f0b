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
    case MEMRA_CUDA_TYPE_IQ4_XS: { constexpr int T = MEMRA_CUDA_TYPE_IQ4_XS; CALL; } break;

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
