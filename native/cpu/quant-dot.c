/*
 * Quantized dot products and activation conversion for the CPU backend (see quant-dot.h).
 *
 * Layout of this file:
 *   1. byte access, f16/bf16 conversion, rounding helpers
 *   2. type table (block sizes, row bytes, activation types)
 *   3. scalar activation conversion (the definition of the roundings; SIMD paths reproduce it bit for bit)
 *   4. scalar dot products, one function per block ("blk_*"): the per-block formula of ggml; the
 *      i-quants' decoders and the decoded-rows route of matrix-matrix products
 *   5. x86 AVX2 (+FMA, F16C) kernels
 *   6. x86 AVX-512 (F, BW, VL, DQ, VNNI) kernels
 *   6b. ARM NEON (AArch64) kernels, baseline and with the dotprod extension
 *   7. per-ISA kernel tables, run-time selection, public entry points
 *
 * Every SIMD kernel that needs more than the baseline ISA is compiled with __attribute__((target(...))),
 * so the file builds with plain -O3 (no -march) and the path is chosen at first use: on x86 from CPUID
 * ("avx2", "avx512vnni"), on AArch64 Linux from getauxval(AT_HWCAP) ("neon", "neondot" with sdot).
 * Override: MEMRA_CPU_ISA=scalar|avx2|avx512vnni|neon|neondot (ignored if this build or CPU lacks it).
 *
 * Integer dot products: the weight's quant values are brought to unsigned bytes u = q + offset
 * (q4_0: +8, q5_0: +16, K-quants: their natural unsigned codes; with VNNI also q8_0 and iq4: +128),
 * multiplied with the signed activation bytes (vpdpbusd, or vpmaddubsw), and the offset is taken back
 * exactly with the activation's per-block sums (q8_0/q8_1: computed once per activation block and shared
 * by the rows, q8_K: its bsums). AVX2 multiplies the signed types (q8_0, iq4) as |w| * sign(a, w), as
 * ggml does. NEON multiplies signed by signed bytes, so there the offsets are subtracted from the weight
 * bytes instead (see section 6b). All integer sums are exact, so every path differs from ggml's per-block
 * formula only in the order of the float additions.
 *
 * The i-quants below iq4 (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s) index lookup tables
 * (../common/iq-grids.h): each group of 8 (iq3: 4) values is a grid entry of unsigned magnitudes, loaded
 * one by one, with 8 sign bits that negate the activations instead; see section 4 for iq1's delta.
 * Decoding costs more than the products there, so matrix-matrix products decode four weight rows once
 * for all activation rows (memra_dot_decode_rows4). There are x86 and NEON kernels for them (NEON:
 * quant-dot-iq-neon.h, which negates the weights instead). On x86 iq4_xs and iq4_nl take that route
 * too (their nibbles, level lookups and scales cost about what their products do), the AVX-512 kernels
 * with activation rows prepared once for it (memra_dot_decoded_prepare).
 *
 * Each multi-row kernel ("rows4") runs exactly the per-row instruction sequence of the one-row kernel,
 * so memra_dot_rows4 returns bit for bit what four memra_dot_row calls return on the same path. The
 * SIMD rows4 kernels also prefetch the next four rows (see prefetch_next_rows).
 *
 * Build switch: -DMEMRA_NO_SIMD compiles the portable path only.
 */
#include "quant-dot.h"

#include <stdlib.h>
#include <string.h>

/* (each file that includes the grids uses only some of them) */
#define MEMRA_IQ_TABLE static const __attribute__((unused))
#include "../common/iq-grids.h"

/* ============================================================================================== */
/* 1. Byte access and number formats                                                              */
/* ============================================================================================== */

/* Blocks are byte arrays (little-endian fields, no alignment assumed): fields are read with memcpy. */
static inline uint16_t ld_u16(const uint8_t * p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline int16_t  ld_i16(const uint8_t * p) { int16_t v;  memcpy(&v, p, 2); return v; }
static inline uint32_t ld_u32(const uint8_t * p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t ld_u64(const uint8_t * p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline float    ld_f32(const uint8_t * p) { float v;    memcpy(&v, p, 4); return v; }
static inline void st_u16(uint8_t * p, uint16_t v) { memcpy(p, &v, 2); }
static inline void st_f32(uint8_t * p, float v)    { memcpy(p, &v, 4); }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline float abs_f32(float f) { return bits_f32(f32_bits(f) & 0x7fffffffu); }

/* binary16 -> binary32, exact (subnormals included; NaNs come out quiet with their payload, as F16C).
 * Branch-free so that loops over it vectorize. */
static inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t em = h & 0x7fffu;
    /* normal, infinity, NaN: the 5-bit exponent lands in the f32 exponent field, +224 maps 31 to 255
     * (infinity/NaN) and the product with 2^-112 rebiases the others (15 -> 127) */
    const float normal = bits_f32((em << 13) + (224u << 23)) * 0x1p-112f;
    /* subnormal or zero: m * 2^-24 = (0.5 + m * 2^-24) - 0.5, exactly */
    const float subnormal = bits_f32((126u << 23) | em) - 0.5f;
    const uint32_t is_subnormal = 0u - (uint32_t)(em < 0x400u); /* all ones or zero: a select, not a branch */
    return bits_f32(sign | (f32_bits(subnormal) & is_subnormal) | (f32_bits(normal) & ~is_subnormal));
}

/* binary32 -> binary16, round to nearest even, as F16C vcvtps2ph with imm 0 (and ggml's converters):
 * subnormal halves, overflow to infinity from 65520 up, NaN kept quiet with the top of its payload. */
static inline uint16_t f32_to_f16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and infinity) */
    if (a >= 0x38800000u) {                                   /* normal half: [2^-14, 65520) */
        const uint32_t r = a - 0x38000000u;                   /* rebias 127 -> 15 (in the top bits) */
        return (uint16_t)(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u) return sign;                         /* below 2^-25: rounds to zero */
    /* subnormal half: the value in units of 2^-24, rounded to an integer, ties to even */
    const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (a >> 23);                  /* 14 .. 24 */
    const uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t midpoint = 1u << (shift - 1u);
    return (uint16_t)(sign | (half + (rest > midpoint || (rest == midpoint && (half & 1u)))));
}

/* binary32 -> bfloat16 as ggml_compute_fp32_to_bf16: round to nearest even (no flush of subnormals),
 * a NaN keeps its top 16 bits and is forced quiet. */
static inline uint16_t f32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* v rounded to an integer, ties to even, for |v| < 2^22 (the default rounding mode, like ggml's
 * nearest_int and _mm256_round_ps(_MM_ROUND_NEAREST)). */
static inline float round_even(float v) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it leaves no fraction bits */
    return (v + magic) - magic;
}

/* float -> int8 as cvtps_epi32 then signed saturation (NaN -> -128). */
static inline int8_t sat_i8(float v) {
    if (!(v >= -128.0f)) return -128;
    if (v > 127.0f) return 127;
    return (int8_t)(int)v;
}

/* ============================================================================================== */
/* 2. Types                                                                                       */
/* ============================================================================================== */

#define TYPE_SLOTS 31 /* type ids 0..30 */

/* Block layouts (bytes, little-endian):
 *   q4_0   18 B / 32: d f16 | qs[16]            w[j] = d*((qs[j]&15)-8), w[j+16] = d*((qs[j]>>4)-8)
 *   q4_1   20 B / 32: d f16 | m f16 | qs[16]    w = d*q + m (q the unsigned nibble)
 *   q5_0   22 B / 32: d f16 | qh u32 | qs[16]   5th bit of w[j] = qh bit j; w = d*(q-16)
 *   q5_1   24 B / 32: d f16 | m f16 | qh u32 | qs[16]           w = d*q + m
 *   q8_0   34 B / 32: d f16 | qs[32] int8
 *   q8_1   36 B / 32: d f16 | s f16 | qs[32] int8           s = f16(d * sum(qs))
 *   iq4_nl 18 B / 32: d f16 | qs[16]            w[j] = d*kvalues[qs[j]&15], w[j+16] = d*kvalues[qs[j]>>4]
 *   q2_K   84 B /256: scales[16] (lo nibble scale, hi nibble min) | qs[64] | d f16 | dmin f16
 *   q3_K  110 B /256: hmask[32] | qs[64] | scales[12] (16 x 6 bits, offset 32) | d f16
 *   q4_K  144 B /256: d f16 | dmin f16 | scales[12] (8 scales + 8 mins, 6 bits) | qs[128]
 *   q5_K  176 B /256: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]
 *   q6_K  210 B /256: ql[128] | qh[64] | scales[16] int8 | d f16
 *   iq4_xs 136 B/256: d f16 | scales_h u16 | scales_l[4] | qs[128]
 *   q8_K  292 B /256: d f32 | qs[256] int8 | bsums[16] int16 (sum of each 16 qs)
 * The i-quants (256 values; groups of 8 values are entries of the grids of ../common/iq-grids.h):
 *   iq2_xxs  66 B: d f16 | 8 x (4 grid bytes | u32: 4 x 7 sign bits, 4-bit scale at bit 28)
 *   iq2_xs   74 B: d f16 | qs[32] u16 (9-bit grid index, 7 sign bits) | scales[8] (a nibble per 16 values)
 *   iq2_s    82 B: d f16 | qs[32] (grid index low 8 bits) | signs[32] | qh[8] (2 bits per index) | scales[8]
 *   iq3_xxs  98 B: d f16 | qs[64] (grid of 4 values) | 8 x u32 (4 x 7 sign bits, 4-bit scale at bit 28)
 *   iq3_s   110 B: d f16 | qs[64] (grid of 4, low 8 bits) | qh[8] (9th bits) | signs[32] | scales[4] (nibbles)
 *   iq1_s    50 B: d f16 | qs[32] (grid index low 8 bits) | qh[8] u16 (3 x 3 index bits, 3-bit scale, delta sign)
 *   iq1_m    56 B: qs[32] | qh[16] (3 index bits + delta sign per 8 values) | scales 4 x u16 (3-bit scales
 *                  per 16 values; the block's f16 d in the top nibbles)
 * The per-type sections below describe where each value's bits are. */
enum {
    Q4_0_BYTES = 18, Q4_1_BYTES = 20, Q5_0_BYTES = 22, Q5_1_BYTES = 24, Q8_0_BYTES = 34, Q8_1_BYTES = 36,
    IQ4_NL_BYTES = 18, Q2_K_BYTES = 84, Q3_K_BYTES = 110, Q4_K_BYTES = 144, Q5_K_BYTES = 176,
    Q6_K_BYTES = 210, IQ4_XS_BYTES = 136, Q8_K_BYTES = 292,
    IQ2_XXS_BYTES = 66, IQ2_XS_BYTES = 74, IQ2_S_BYTES = 82, IQ3_XXS_BYTES = 98, IQ3_S_BYTES = 110,
    IQ1_S_BYTES = 50, IQ1_M_BYTES = 56,
};
/* q8_K field offsets */
enum { Q8K_QS = 4, Q8K_BSUMS = 260 };

/* ggml's kvalues_iq4nl: the 16 levels of iq4_nl / iq4_xs. */
static const int8_t iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

static int block_values(int type) {
    switch (type) {
    case MEMRA_TYPE_F32: case MEMRA_TYPE_F16: case MEMRA_TYPE_BF16: return 1;
    case MEMRA_TYPE_Q4_0: case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_0: case MEMRA_TYPE_Q5_1:
    case MEMRA_TYPE_Q8_0: case MEMRA_TYPE_Q8_1: case MEMRA_TYPE_IQ4_NL: return 32;
    case MEMRA_TYPE_Q2_K: case MEMRA_TYPE_Q3_K: case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K:
    case MEMRA_TYPE_Q6_K: case MEMRA_TYPE_Q8_K: case MEMRA_TYPE_IQ4_XS: return 256;
    case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ2_XS: case MEMRA_TYPE_IQ2_S: case MEMRA_TYPE_IQ3_XXS:
    case MEMRA_TYPE_IQ3_S: case MEMRA_TYPE_IQ1_S: case MEMRA_TYPE_IQ1_M: return 256;
    default: return 0;
    }
}

static int block_bytes(int type) {
    switch (type) {
    case MEMRA_TYPE_F32: return 4;
    case MEMRA_TYPE_F16: case MEMRA_TYPE_BF16: return 2;
    case MEMRA_TYPE_Q4_0: return Q4_0_BYTES;
    case MEMRA_TYPE_Q4_1: return Q4_1_BYTES;
    case MEMRA_TYPE_Q5_0: return Q5_0_BYTES;
    case MEMRA_TYPE_Q5_1: return Q5_1_BYTES;
    case MEMRA_TYPE_Q8_0: return Q8_0_BYTES;
    case MEMRA_TYPE_Q8_1: return Q8_1_BYTES;
    case MEMRA_TYPE_IQ4_NL: return IQ4_NL_BYTES;
    case MEMRA_TYPE_Q2_K: return Q2_K_BYTES;
    case MEMRA_TYPE_Q3_K: return Q3_K_BYTES;
    case MEMRA_TYPE_Q4_K: return Q4_K_BYTES;
    case MEMRA_TYPE_Q5_K: return Q5_K_BYTES;
    case MEMRA_TYPE_Q6_K: return Q6_K_BYTES;
    case MEMRA_TYPE_Q8_K: return Q8_K_BYTES;
    case MEMRA_TYPE_IQ4_XS: return IQ4_XS_BYTES;
    case MEMRA_TYPE_IQ2_XXS: return IQ2_XXS_BYTES;
    case MEMRA_TYPE_IQ2_XS: return IQ2_XS_BYTES;
    case MEMRA_TYPE_IQ2_S: return IQ2_S_BYTES;
    case MEMRA_TYPE_IQ3_XXS: return IQ3_XXS_BYTES;
    case MEMRA_TYPE_IQ3_S: return IQ3_S_BYTES;
    case MEMRA_TYPE_IQ1_S: return IQ1_S_BYTES;
    case MEMRA_TYPE_IQ1_M: return IQ1_M_BYTES;
    default: return 0;
    }
}

size_t memra_row_bytes(int type, int64_t n) {
    const int values = block_values(type);
    if (values == 0 || n < 0 || n % values != 0) return 0;
    return (size_t)(n / values) * (size_t)block_bytes(type);
}

int memra_dot_activation_type(int type) {
    switch (type) {
    case MEMRA_TYPE_Q4_0: case MEMRA_TYPE_Q5_0: case MEMRA_TYPE_Q8_0: case MEMRA_TYPE_IQ4_NL: return MEMRA_TYPE_Q8_0;
    case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_1: return MEMRA_TYPE_Q8_1;
    case MEMRA_TYPE_Q2_K: case MEMRA_TYPE_Q3_K: case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K:
    case MEMRA_TYPE_Q6_K: case MEMRA_TYPE_IQ4_XS: case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ2_XS:
    case MEMRA_TYPE_IQ2_S: case MEMRA_TYPE_IQ3_XXS: case MEMRA_TYPE_IQ3_S: case MEMRA_TYPE_IQ1_S:
    case MEMRA_TYPE_IQ1_M: return MEMRA_TYPE_Q8_K;
    case MEMRA_TYPE_F16: return MEMRA_TYPE_F16;
    case MEMRA_TYPE_BF16: return MEMRA_TYPE_BF16;
    case MEMRA_TYPE_F32: return MEMRA_TYPE_F32;
    default: return -1;
    }
}

int memra_dot_supported(int type) { return memra_dot_activation_type(type) >= 0; }

/* ============================================================================================== */
/* 3. Scalar activation conversion                                                                */
/* ============================================================================================== */

/* q8_0 / q8_1 per 32 values, as ggml's AVX quantize_row_q8_0/q8_1: amax = max|x|, d = amax/127 (f32,
 * stored f16), id = 127/amax (0 if amax is 0), q = round_even(x*id); q8_1 adds s = f16(d * sum(q)). */
static void to_q8_0_or_1_scalar(const float * x, uint8_t * y, int64_t n, int with_sum) {
    const int bytes = with_sum ? Q8_1_BYTES : Q8_0_BYTES;
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32, y += bytes) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = abs_f32(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int8_t * qs = (int8_t *)(y + (with_sum ? 4 : 2));
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            qs[j] = sat_i8(round_even(x[j] * id));
            sum += qs[j];
        }
        st_u16(y, f32_to_f16(d));
        if (with_sum) st_u16(y + 2, f32_to_f16(d * (float)sum));
    }
}

/* q8_K per 256 values, as ggml's quantize_row_q8_K_ref: max = the first value of largest magnitude
 * (signed), iscale = -127/max, q = min(127, round_even(iscale*x)), d = 1/iscale, bsums = sums of 16. */
static void to_q8_K_scalar(const float * x, uint8_t * y, int64_t n) {
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256, y += Q8_K_BYTES) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++) {
            const float a = abs_f32(x[j]);
            if (a > amax) { amax = a; max = x[j]; }
        }
        int8_t * qs = (int8_t *)(y + Q8K_QS);
        if (amax == 0.0f) {
            st_f32(y, 0.0f);
            memset(y + Q8K_QS, 0, 256 + 32);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            const int8_t q = sat_i8(round_even(iscale * x[j]));
            qs[j] = q;
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += qs[16 * j + l];
            const int16_t s16 = (int16_t)sum;
            memcpy(y + Q8K_BSUMS + 2 * j, &s16, 2);
        }
        st_f32(y, 1.0f / iscale);
    }
}

/* A SIMD path's q8_K scale for the 256 values at x, given their largest magnitude amax: as the scalar
 * path, -127 / (the first value of that magnitude, signed); 0 for an all-zero block, which is then
 * written whole. */
static inline float q8_K_iscale(const float * x, float amax, uint8_t * y) {
    if (amax == 0.0f) {
        st_f32(y, 0.0f);
        memset(y + Q8K_QS, 0, 256 + 32);
        return 0.0f;
    }
    int first = 0;
    while (first < 255 && abs_f32(x[first]) != amax) first++; /* (bounded: NaN inputs) */
    return -127.0f / x[first];
}

static void to_f16_scalar(const float * x, uint8_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) st_u16(y + 2 * i, f32_to_f16(x[i]));
}

static void to_bf16_scalar(const float * x, uint8_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) st_u16(y + 2 * i, f32_to_bf16(x[i]));
}

static void to_q8_0_scalar(const float * x, uint8_t * y, int64_t n) { to_q8_0_or_1_scalar(x, y, n, 0); }
static void to_q8_1_scalar(const float * x, uint8_t * y, int64_t n) { to_q8_0_or_1_scalar(x, y, n, 1); }

/* ============================================================================================== */
/* 4. Scalar dot products: one block of weights with one block of activations                     */
/* ============================================================================================== */

static inline float fp16_at(const uint8_t * p) { return f16_to_f32(ld_u16(p)); }
static inline int bsum_at(const uint8_t * q8k, int j) { return ld_i16(q8k + Q8K_BSUMS + 2 * j); }

/* Decodes q4_K/q5_K's 12 scale bytes into 8 six-bit scales and 8 six-bit mins:
 * j < 4: scale = s[j] & 63, min = s[j+4] & 63;
 * j >= 4: scale = (s[j+4] & 15) | (s[j-4] >> 6) << 4, min = (s[j+4] >> 4) | (s[j] >> 6) << 4. */
static inline void q4k_scales_mins(const uint8_t * s, uint64_t * scales, uint64_t * mins) {
    const uint32_t a0 = ld_u32(s), a1 = ld_u32(s + 4), a2 = ld_u32(s + 8);
    const uint32_t sc_lo = a0 & 0x3f3f3f3fu, mn_lo = a1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | ((a0 >> 6) & 0x03030303u) << 4;
    const uint32_t mn_hi = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 6) & 0x03030303u) << 4;
    *scales = sc_lo | (uint64_t)sc_hi << 32;
    *mins = mn_lo | (uint64_t)mn_hi << 32;
}

/* Decodes q3_K's 12 scale bytes into 16 six-bit codes (the scale is code - 32):
 * low 4 bits: j < 8: s[j] & 15, j >= 8: s[j-8] >> 4; high 2 bits: (s[8 + j%4] >> 2*(j/4)) & 3. */
static inline void q3k_scales(const uint8_t * s, uint8_t out[16]) {
    const uint32_t a0 = ld_u32(s), a1 = ld_u32(s + 4), t = ld_u32(s + 8);
    const uint32_t v[4] = {
        (a0 & 0x0f0f0f0fu) | ((t >> 0) & 0x03030303u) << 4,
        (a1 & 0x0f0f0f0fu) | ((t >> 2) & 0x03030303u) << 4,
        ((a0 >> 4) & 0x0f0f0f0fu) | ((t >> 4) & 0x03030303u) << 4,
        ((a1 >> 4) & 0x0f0f0f0fu) | ((t >> 6) & 0x03030303u) << 4,
    };
    memcpy(out, v, 16);
}

/* iq4_xs sub-block scale code (scale = code - 32) of sub-block ib (0..7). */
static inline int iq4xs_scale(const uint8_t * x, int ib) {
    const int low = (x[4 + ib / 2] >> (4 * (ib % 2))) & 15;
    const int high = (ld_u16(x + 2) >> (2 * ib)) & 3;
    return low | high << 4;
}

/* The scalar kernels decode a block into small arrays of codes and take integer dot products over
 * them: loops of that shape are vectorized by compilers (SSE2 at plain -O3 on x86-64, NEON on aarch64),
 * which keeps the portable path usable where no hand-written SIMD path exists. */

static inline int dot_u8_i8(const uint8_t * u, const int8_t * a, int len) {
    int s = 0;
    for (int i = 0; i < len; i++) s += u[i] * a[i];
    return s;
}

static inline int dot_i8_i8(const int8_t * v, const int8_t * a, int len) {
    int s = 0;
    for (int i = 0; i < len; i++) s += v[i] * a[i];
    return s;
}

static inline int sum_i8(const int8_t * a, int len) {
    int s = 0;
    for (int i = 0; i < len; i++) s += a[i];
    return s;
}

/* 16 packed nibbles -> 32 codes: the low nibbles are values 0..15, the high nibbles values 16..31. */
static inline void unpack_nibbles(const uint8_t * qs, uint8_t u[32]) {
    for (int j = 0; j < 16; j++) {
        u[j] = qs[j] & 15;
        u[j + 16] = qs[j] >> 4;
    }
}

/* q5_0/q5_1: bit j of qh is the fifth bit of value j. */
static inline void add_fifth_bits(uint32_t qh, uint8_t u[32]) {
    for (int j = 0; j < 32; j++) u[j] |= (uint8_t)(((qh >> j) & 1u) << 4);
}

/* --- 32-value blocks with q8_0 / q8_1 activations: d_w*d_a*sum(q_w*q_a) (+ m_w*s_a) --- */

static inline float blk_q8_0(const uint8_t * x, const uint8_t * y) {
    const int isum = dot_i8_i8((const int8_t *)(x + 2), (const int8_t *)(y + 2), 32);
    return (float)isum * (fp16_at(x) * fp16_at(y));
}

/* q4_0: sum((u - 8) * a) = sum(u * a) - 8 * sum(a), u the nibble */
static inline float blk_q4_0(const uint8_t * x, const uint8_t * y) {
    const int8_t * qy = (const int8_t *)(y + 2);
    uint8_t u[32];
    unpack_nibbles(x + 2, u);
    const int isum = dot_u8_i8(u, qy, 32) - 8 * sum_i8(qy, 32);
    return (float)isum * (fp16_at(x) * fp16_at(y));
}

static inline float blk_q4_1(const uint8_t * x, const uint8_t * y) {
    uint8_t u[32];
    unpack_nibbles(x + 4, u);
    const int isum = dot_u8_i8(u, (const int8_t *)(y + 4), 32);
    return (float)isum * (fp16_at(x) * fp16_at(y)) + fp16_at(x + 2) * fp16_at(y + 2);
}

static inline float blk_q5_0(const uint8_t * x, const uint8_t * y) {
    const int8_t * qy = (const int8_t *)(y + 2);
    uint8_t u[32];
    unpack_nibbles(x + 6, u);
    add_fifth_bits(ld_u32(x + 2), u);
    const int isum = dot_u8_i8(u, qy, 32) - 16 * sum_i8(qy, 32);
    return (float)isum * (fp16_at(x) * fp16_at(y));
}

static inline float blk_q5_1(const uint8_t * x, const uint8_t * y) {
    uint8_t u[32];
    unpack_nibbles(x + 8, u);
    add_fifth_bits(ld_u32(x + 4), u);
    const int isum = dot_u8_i8(u, (const int8_t *)(y + 4), 32);
    return (float)isum * (fp16_at(x) * fp16_at(y)) + fp16_at(x + 2) * fp16_at(y + 2);
}

static inline float blk_iq4_nl(const uint8_t * x, const uint8_t * y) {
    uint8_t u[32];
    int8_t v[32];
    unpack_nibbles(x + 2, u);
    for (int j = 0; j < 32; j++) v[j] = iq4nl_values[u[j]];
    const int isum = dot_i8_i8(v, (const int8_t *)(y + 2), 32);
    return (float)isum * (fp16_at(x) * fp16_at(y));
}

/* --- 256-value super-blocks with q8_K activations --- */

/* q2_K: value at k*128 + 32*j + l (k < 2, j < 4, l < 32) is (qs[32k+l] >> 2j) & 3, in sub-block
 * (k*128 + 32j + l)/16 with scale = scales[sb] & 15, min = scales[sb] >> 4; w = d*scale*q - dmin*min. */
static inline float blk_q2_K(const uint8_t * x, const uint8_t * y) {
    const uint8_t * sc = x, * qs = x + 16;
    const int8_t * q8 = (const int8_t *)(y + Q8K_QS);
    uint8_t u[256];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) u[128 * k + 32 * j + l] = (qs[32 * k + l] >> (2 * j)) & 3;
    int isum = 0, msum = 0;
    for (int sb = 0; sb < 16; sb++) {
        isum += (sc[sb] & 15) * dot_u8_i8(u + 16 * sb, q8 + 16 * sb, 16);
        msum += (sc[sb] >> 4) * bsum_at(y, sb);
    }
    const float da = ld_f32(y);
    return fp16_at(x + 80) * da * (float)isum - fp16_at(x + 82) * da * (float)msum;
}

/* q3_K: value at k*128 + 32*j + l is ((qs[32k+l] >> 2j) & 3) - (hmask[l] bit (4k+j) ? 0 : 4), sub-block
 * of 16 with scale code c (scale c - 32); w = d*(c-32)*q. Computed as sum((c-32)*(sum(u*a) - 4*bsum)) with
 * u = q + 4 in 0..7. */
static inline float blk_q3_K(const uint8_t * x, const uint8_t * y) {
    uint8_t sc[16], u[256];
    q3k_scales(x + 96, sc);
    const uint8_t * hm = x, * qs = x + 32;
    const int8_t * q8 = (const int8_t *)(y + Q8K_QS);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                u[128 * k + 32 * j + l] = (uint8_t)(((qs[32 * k + l] >> (2 * j)) & 3) | ((hm[l] >> (4 * k + j)) & 1) << 2);
    int isum = 0;
    for (int sb = 0; sb < 16; sb++) isum += (sc[sb] - 32) * (dot_u8_i8(u + 16 * sb, q8 + 16 * sb, 16) - 4 * bsum_at(y, sb));
    return fp16_at(x + 108) * ld_f32(y) * (float)isum;
}

/* q4_K / q5_K: value at 64*c + l (l < 32) is qs[32c+l] & 15 (sub-block 2c), at 64*c + 32 + l it is
 * qs[32c+l] >> 4 (sub-block 2c+1); q5_K adds a fifth bit: qh[l] bit 2c, resp. bit 2c+1.
 * w = d*scale*q - dmin*min. */
static inline float blk_q4_5_K(const uint8_t * x, const uint8_t * y, const int five) {
    uint64_t scales, mins;
    q4k_scales_mins(x + 4, &scales, &mins);
    const uint8_t * qh = x + 16, * qs = x + (five ? 48 : 16);
    const int8_t * q8 = (const int8_t *)(y + Q8K_QS);
    uint8_t u[256];
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            u[64 * c + l] = qs[32 * c + l] & 15;
            u[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
        if (five) {
            for (int l = 0; l < 32; l++) {
                u[64 * c + l] |= (uint8_t)(((qh[l] >> (2 * c)) & 1) << 4);
                u[64 * c + 32 + l] |= (uint8_t)(((qh[l] >> (2 * c + 1)) & 1) << 4);
            }
        }
    }
    int isum = 0, msum = 0;
    for (int s = 0; s < 8; s++) {
        isum += (int)((scales >> (8 * s)) & 0xff) * dot_u8_i8(u + 32 * s, q8 + 32 * s, 32);
        msum += (int)((mins >> (8 * s)) & 0xff) * (bsum_at(y, 2 * s) + bsum_at(y, 2 * s + 1));
    }
    const float da = ld_f32(y);
    return fp16_at(x) * da * (float)isum - fp16_at(x + 2) * da * (float)msum;
}

static inline float blk_q4_K(const uint8_t * x, const uint8_t * y) { return blk_q4_5_K(x, y, 0); }
static inline float blk_q5_K(const uint8_t * x, const uint8_t * y) { return blk_q4_5_K(x, y, 1); }

/* q6_K: in half k (values k*128 ..), with L = ql + 64k, H = qh + 32k and l < 32:
 *   +l: (L[l] & 15) | (H[l] & 3) << 4          +32+l: (L[32+l] & 15) | ((H[l] >> 2) & 3) << 4
 *   +64+l: (L[l] >> 4) | ((H[l] >> 4) & 3) << 4   +96+l: (L[32+l] >> 4) | ((H[l] >> 6) & 3) << 4
 * each minus 32; sub-blocks of 16 with int8 scales; w = d*scale*(u - 32). */
static inline float blk_q6_K(const uint8_t * x, const uint8_t * y) {
    const int8_t * sc = (const int8_t *)(x + 192);
    const int8_t * q8 = (const int8_t *)(y + Q8K_QS);
    uint8_t u[256];
    for (int k = 0; k < 2; k++) {
        const uint8_t * L = x + 64 * k, * H = x + 128 + 32 * k;
        uint8_t * v = u + 128 * k;
        for (int l = 0; l < 32; l++) {
            v[l] = (uint8_t)((L[l] & 15) | (H[l] & 3) << 4);
            v[32 + l] = (uint8_t)((L[32 + l] & 15) | ((H[l] >> 2) & 3) << 4);
            v[64 + l] = (uint8_t)((L[l] >> 4) | ((H[l] >> 4) & 3) << 4);
            v[96 + l] = (uint8_t)((L[32 + l] >> 4) | ((H[l] >> 6) & 3) << 4);
        }
    }
    int isum = 0;
    for (int sb = 0; sb < 16; sb++) isum += sc[sb] * (dot_u8_i8(u + 16 * sb, q8 + 16 * sb, 16) - 32 * bsum_at(y, sb));
    return fp16_at(x + 208) * ld_f32(y) * (float)isum;
}

/* iq4_xs: sub-block ib (32 values) uses qs[16ib .. 16ib+15]: value j is kvalues[qs & 15], value 16+j is
 * kvalues[qs >> 4]; scale = code - 32 (iq4xs_scale). */
static inline float blk_iq4_xs(const uint8_t * x, const uint8_t * y) {
    const int8_t * q8 = (const int8_t *)(y + Q8K_QS);
    int isum = 0;
    for (int ib = 0; ib < 8; ib++) {
        uint8_t u[32];
        int8_t v[32];
        unpack_nibbles(x + 8 + 16 * ib, u);
        for (int j = 0; j < 32; j++) v[j] = iq4nl_values[u[j]];
        isum += (iq4xs_scale(x, ib) - 32) * dot_i8_i8(v, q8 + 32 * ib, 32);
    }
    return fp16_at(x) * ld_f32(y) * (float)isum;
}

/* --- i-quants (256 values, q8_K activations) ---
 * Each group of 8 values is a grid entry (iq-grids.h) of magnitudes with 8 sign bits (iq2_*, iq3_*), or
 * of values g in {-1, 0, 1} plus a shared delta +-1/8 (iq1_*); the integer scales are 2*code + 1, per 16
 * or 32 values. As ggml: d_w * d_a * sum(scale * sum(value * a)) per super-block, the constant factor
 * (1/8 for iq2_*, 1/4 for iq3_xxs, 1 for iq3_s) applied to the row's sum. iq1: value + delta/8 is
 * u/8 - 9/8 with the unsigned code u = 8*(g + 1) + (delta > 0 ? 2 : 0) (0..18), so the block's integer
 * sum(scale * (sum(u * a) - 9 * bsum)) is 8 * ggml's sumi + its delta sum sumi1, which the activation's
 * bsums give (sub-blocks of 16): multiplied by 1/8, the value of ggml's sumi + 1/8 * sumi1, rounded once. */

/* ksigns: 7 sign bits -> 8 with even parity */
#define IQ_SIGNS(bits7) memra_ksigns_iq2xs[(bits7) & 127]

/* (Both below work on the 8 bytes at once, in one 64-bit word.) */

/* 8 signed values from 8 grid magnitudes (< 128) and their sign bits (bit j set: value j negative):
 * the sign bits spread to 0xff bytes m, then (g ^ m) + (m & 1) per byte, which never carries. */
static inline void iq_put8(int8_t * v, uint64_t grid, unsigned signs) {
    const uint64_t bits = ((signs & 255u) * 0x0101010101010101ULL) & 0x8040201008040201ULL; /* byte j: bit j or 0 */
    const uint64_t m = (((bits + 0x7f7f7f7f7f7f7f7fULL) | bits) & 0x8080808080808080ULL) >> 7;  /* byte j: 1 if set */
    const uint64_t x = (grid ^ (m * 255u)) + m;
    memcpy(v, &x, 8);
}

/* 8 iq1 codes u = 8*(g+1) + (delta > 0 ? 2 : 0) from a grid entry of int8 g in {-1, 0, 1}: g + 1 per
 * byte without carries (the low 7 bits added, the top bit flipped back), then at most 18 per byte. */
static inline void iq1_put8(uint8_t * u, uint64_t grid, int delta_negative) {
    const uint64_t g1 = ((grid & 0x7f7f7f7f7f7f7f7fULL) + 0x0101010101010101ULL) ^ (grid & 0x8080808080808080ULL);
    const uint64_t x = (g1 << 3) + (delta_negative ? 0 : 0x0202020202020202ULL);
    memcpy(u, &x, 8);
}

/* sum over the 16 groups of 16 values: scale * sum(v * a) */
static inline int iq_isum(const int8_t * v, const uint8_t * ls, const int8_t * q8) {
    int isum = 0;
    for (int g = 0; g < 16; g++) isum += ls[g] * dot_i8_i8(v + 16 * g, q8 + 16 * g, 16);
    return isum;
}

/* iq1: sum over the 16 groups of 16 values: scale * (sum(u * a) - 9 * bsum) */
static inline int iq1_isum(const uint8_t * u, const uint8_t * ls, const uint8_t * y) {
    const int8_t * q8 = (const int8_t *)(y + Q8K_QS);
    int isum = 0;
    for (int g = 0; g < 16; g++) isum += ls[g] * (dot_u8_i8(u + 16 * g, q8 + 16 * g, 16) - 9 * bsum_at(y, g));
    return isum;
}

/* iq1_m's f16 d: the top nibbles of its four u16 scale words. */
static inline uint16_t iq1m_d_bits(const uint8_t * sc) {
    return (uint16_t)((ld_u16(sc) >> 12) | ((ld_u16(sc + 2) >> 8) & 0x00f0) | ((ld_u16(sc + 4) >> 4) & 0x0f00) | (ld_u16(sc + 6) & 0xf000));
}

/* Each type's block decoder: v (int8 values; iq1: the unsigned codes u), the 16 scales and the block's d. */

/* iq2_xxs: sub-block ib (32 values) is 8 bytes at 2 + 8ib: 4 grid indices (iq2xxs_grid), then a u32 with
 * the 7 sign bits of group l at bit 7l and the scale code at bit 28. */
static inline float dec_iq2_xxs(const uint8_t * x, uint8_t * v, uint8_t * ls) {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t * q = x + 2 + 8 * ib;
        const uint32_t a = ld_u32(q + 4);
        for (int l = 0; l < 4; l++) iq_put8((int8_t *)v + 32 * ib + 8 * l, memra_iq2xxs_grid[q[l]], IQ_SIGNS(a >> (7 * l)));
        ls[2 * ib] = ls[2 * ib + 1] = (uint8_t)(2 * (a >> 28) + 1);
    }
    return fp16_at(x);
}

/* iq2_xs: group g (8 values) is the u16 at 2 + 2g: grid index (iq2xs_grid) in bits 0..8, sign bits above;
 * scale codes are the nibbles of the bytes at 66 (low nibble first), one per 16 values. */
static inline float dec_iq2_xs(const uint8_t * x, uint8_t * v, uint8_t * ls) {
    for (int g = 0; g < 32; g++) {
        const unsigned q = ld_u16(x + 2 + 2 * g);
        iq_put8((int8_t *)v + 8 * g, memra_iq2xs_grid[q & 511], IQ_SIGNS(q >> 9));
    }
    for (int ib = 0; ib < 8; ib++) {
        ls[2 * ib] = (uint8_t)(2 * (x[66 + ib] & 15) + 1);
        ls[2 * ib + 1] = (uint8_t)(2 * (x[66 + ib] >> 4) + 1);
    }
    return fp16_at(x);
}

/* iq2_s: group g: grid index (iq2s_grid) qs[g] | bits 2(g%4).. of qh[g/4] << 8, sign byte signs[g];
 * scale nibbles as iq2_xs. (qs at 2, signs at 34, qh at 66, scales at 74) */
static inline float dec_iq2_s(const uint8_t * x, uint8_t * v, uint8_t * ls) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = x[66 + ib];
        for (int l = 0; l < 4; l++) {
            const int g = 4 * ib + l;
            iq_put8((int8_t *)v + 8 * g, memra_iq2s_grid[x[2 + g] | ((h >> (2 * l)) & 3u) << 8], x[34 + g]);
        }
    }
    for (int ib = 0; ib < 8; ib++) {
        ls[2 * ib] = (uint8_t)(2 * (x[74 + ib] & 15) + 1);
        ls[2 * ib + 1] = (uint8_t)(2 * (x[74 + ib] >> 4) + 1);
    }
    return fp16_at(x);
}

/* iq3_xxs: value group k (4 values) is iq3xxs_grid[qs[k]] (qs at 2); sub-block ib's u32 at 66 + 4ib holds
 * the 7 sign bits of its groups of 8 at bit 7l and the scale code at bit 28. */
static inline float dec_iq3_xxs(const uint8_t * x, uint8_t * v, uint8_t * ls) {
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t a = ld_u32(x + 66 + 4 * ib);
        const uint8_t * q = x + 2 + 8 * ib;
        for (int l = 0; l < 4; l++) {
            const uint64_t grid = memra_iq3xxs_grid[q[2 * l]] | (uint64_t)memra_iq3xxs_grid[q[2 * l + 1]] << 32;
            iq_put8((int8_t *)v + 32 * ib + 8 * l, grid, IQ_SIGNS(a >> (7 * l)));
        }
        ls[2 * ib] = ls[2 * ib + 1] = (uint8_t)(2 * (a >> 28) + 1);
    }
    return fp16_at(x);
}

/* iq3_s: group k (4 values) is iq3s_grid[qs[k] | (bit k%8 of qh[k/8]) << 8]; sign byte signs[g] per 8
 * values; a scale nibble per 32 (low nibble first). (qs at 2, qh at 66, signs at 74, scales at 106) */
static inline float dec_iq3_s(const uint8_t * x, uint8_t * v, uint8_t * ls) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = x[66 + ib];
        for (int l = 0; l < 4; l++) {
            const int g = 4 * ib + l;
            const uint32_t g0 = memra_iq3s_grid[x[2 + 2 * g] | ((qh >> (2 * l)) & 1u) << 8];
            const uint32_t g1 = memra_iq3s_grid[x[3 + 2 * g] | ((qh >> (2 * l + 1)) & 1u) << 8];
            iq_put8((int8_t *)v + 8 * g, g0 | (uint64_t)g1 << 32, x[74 + g]);
        }
    }
    for (int ib = 0; ib < 8; ib++) ls[2 * ib] = ls[2 * ib + 1] = (uint8_t)(2 * ((x[106 + ib / 2] >> (4 * (ib % 2))) & 15) + 1);
    return fp16_at(x);
}

/* iq1_s: sub-block ib's u16 qh at 34 + 2ib: group l's grid index (iq1s_grid) is qs[4ib+l] | ((qh >> 3l) & 7) << 8,
 * the scale code is bits 12..14, the delta is negative when bit 15 is set. */
static inline float dec_iq1_s(const uint8_t * x, uint8_t * u, uint8_t * ls) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = ld_u16(x + 34 + 2 * ib);
        for (int l = 0; l < 4; l++) iq1_put8(u + 32 * ib + 8 * l, memra_iq1s_grid[x[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7u) << 8], qh >> 15);
        ls[2 * ib] = ls[2 * ib + 1] = (uint8_t)(2 * ((qh >> 12) & 7) + 1);
    }
    return fp16_at(x);
}

/* iq1_m: group g's byte qh[g/2] at 32 holds (low nibble for even g, high for odd) 3 grid index bits over
 * qs[g] and the delta sign (bit 3); the 3-bit scale of 16 values j is bits 3j%12.. of u16 scales[j/4] at 48. */
static inline float dec_iq1_m(const uint8_t * x, uint8_t * u, uint8_t * ls) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = ld_u16(x + 32 + 2 * ib);
        for (int l = 0; l < 4; l++) {
            const unsigned h = qh >> (4 * l);
            iq1_put8(u + 32 * ib + 8 * l, memra_iq1s_grid[x[4 * ib + l] | (h & 7u) << 8], (h >> 3) & 1);
        }
    }
    for (int k = 0; k < 4; k++) {
        const unsigned sc = ld_u16(x + 48 + 2 * k);
        for (int j = 0; j < 4; j++) ls[4 * k + j] = (uint8_t)(2 * ((sc >> (3 * j)) & 7) + 1);
    }
    return f16_to_f32(iq1m_d_bits(x + 48));
}

/* One decoded block with its q8_K activations: d_w * d_a * isum (iq1: times 1/8, see above). */
static inline float iq_block_dot(const int iq1, const uint8_t * v, const uint8_t * ls, float d, const uint8_t * y) {
    if (iq1) return d * ld_f32(y) * (0.125f * (float)iq1_isum(v, ls, y));
    return d * ld_f32(y) * (float)iq_isum((const int8_t *)v, ls, (const int8_t *)(y + Q8K_QS));
}

#define IQ_BLOCK(name, iq1)                                                                           \
    static inline float blk_##name(const uint8_t * x, const uint8_t * y) {                            \
        uint8_t v[256], ls[16];                                                                       \
        const float d = dec_##name(x, v, ls);                                                         \
        return iq_block_dot(iq1, v, ls, d, y);                                                        \
    }
IQ_BLOCK(iq2_xxs, 0)
IQ_BLOCK(iq2_xs, 0)
IQ_BLOCK(iq2_s, 0)
IQ_BLOCK(iq3_xxs, 0)
IQ_BLOCK(iq3_s, 0)
IQ_BLOCK(iq1_s, 1)
IQ_BLOCK(iq1_m, 1)

/* --- row kernels --- */

/* Kernel signature shared by every path: `nr` (1 or 4) rows `stride` bytes apart, results in out[0..nr). */
typedef void dot_kernel(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out);
/* out[r] = dot(row r, a) for r < rows: kernels that prepare the activation row once for all rows */
typedef void dot_many_kernel(int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out);
typedef void convert_kernel(const float * x, uint8_t * y, int64_t n);

#define SCALAR_BLOCK_ROWS(name, wbytes, abytes, values)                                               \
    static void name##_rows1_scalar(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        (void)stride;                                                                                 \
        float sum = 0.0f;                                                                             \
        for (int64_t ib = 0; ib < n / (values); ib++) sum += blk_##name(w + ib * (wbytes), a + ib * (abytes)); \
        out[0] = sum;                                                                                 \
    }                                                                                                 \
    static void name##_rows4_scalar(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        for (int r = 0; r < 4; r++) name##_rows1_scalar(n, w + r * stride, 0, a, out + r);          \
    }

SCALAR_BLOCK_ROWS(q8_0, Q8_0_BYTES, Q8_0_BYTES, 32)
SCALAR_BLOCK_ROWS(q4_0, Q4_0_BYTES, Q8_0_BYTES, 32)
SCALAR_BLOCK_ROWS(q4_1, Q4_1_BYTES, Q8_1_BYTES, 32)
SCALAR_BLOCK_ROWS(q5_0, Q5_0_BYTES, Q8_0_BYTES, 32)
SCALAR_BLOCK_ROWS(q5_1, Q5_1_BYTES, Q8_1_BYTES, 32)
SCALAR_BLOCK_ROWS(iq4_nl, IQ4_NL_BYTES, Q8_0_BYTES, 32)
SCALAR_BLOCK_ROWS(q2_K, Q2_K_BYTES, Q8_K_BYTES, 256)
SCALAR_BLOCK_ROWS(q3_K, Q3_K_BYTES, Q8_K_BYTES, 256)
SCALAR_BLOCK_ROWS(q4_K, Q4_K_BYTES, Q8_K_BYTES, 256)
SCALAR_BLOCK_ROWS(q5_K, Q5_K_BYTES, Q8_K_BYTES, 256)
SCALAR_BLOCK_ROWS(q6_K, Q6_K_BYTES, Q8_K_BYTES, 256)
SCALAR_BLOCK_ROWS(iq4_xs, IQ4_XS_BYTES, Q8_K_BYTES, 256)

/* The i-quants: the row's sum times the type's constant factor (see blk_iq2_xxs). */
#define SCALAR_IQ_ROWS(name, wbytes, factor)                                                          \
    static void name##_rows1_scalar(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        (void)stride;                                                                                 \
        float sum = 0.0f;                                                                             \
        for (int64_t ib = 0; ib < n / 256; ib++) sum += blk_##name(w + ib * (wbytes), a + ib * Q8_K_BYTES); \
        out[0] = (factor) * sum;                                                                      \
    }                                                                                                 \
    static void name##_rows4_scalar(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        for (int r = 0; r < 4; r++) name##_rows1_scalar(n, w + r * stride, 0, a, out + r);          \
    }

SCALAR_IQ_ROWS(iq2_xxs, IQ2_XXS_BYTES, 0.125f)
SCALAR_IQ_ROWS(iq2_xs, IQ2_XS_BYTES, 0.125f)
SCALAR_IQ_ROWS(iq2_s, IQ2_S_BYTES, 0.125f)
SCALAR_IQ_ROWS(iq3_xxs, IQ3_XXS_BYTES, 0.25f)
SCALAR_IQ_ROWS(iq3_s, IQ3_S_BYTES, 1.0f)
SCALAR_IQ_ROWS(iq1_s, IQ1_S_BYTES, 1.0f)
SCALAR_IQ_ROWS(iq1_m, IQ1_M_BYTES, 1.0f)

/* Decoded rows (memra_dot_decode_rows4, memra_dot_decoded_rows4): the i-quants' weight rows decoded once
 * and multiplied with each activation row of a matrix-matrix product, where decoding costs more than
 * the products (on x86 iq4_xs and iq4_nl too, sections 5 and 6). A path keeps what its row kernel
 * computes before the products, then runs the rest of that kernel on it: a decoded product is bit for
 * bit memra_dot_rows4's. Block ib of row r is at (4 * ib + r) * the path's decoded block bytes (iq4_nl:
 * see its kernels). A path may likewise keep what its row kernel computes from the activation row alone
 * (memra_dot_decoded_prepare, once per row; the decoded kernel then reads that). */
typedef void decode_kernel(int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded);
typedef void decoded_kernel(int64_t n, const uint8_t * decoded, const uint8_t * a, float * out);
/* (optional, memra_dot_decoded_prepare: the activation row arranged once for a path's decoded kernel) */
typedef void prepare_kernel(int64_t n, const uint8_t * a, uint8_t * prepared);
/* (optional, memra_dot_decoded_tile: the decoded kernel for `rows` activation rows a_stride bytes apart,
 * out[c * out_stride + r]; the same bits as decoded_kernel on each row) */
typedef void decoded_rows_kernel(int64_t n, const uint8_t * decoded, const uint8_t * a, size_t a_stride, int64_t rows, float * out, int64_t out_stride);

enum { SCALAR_DECODED_BLOCK = 288 }; /* v[256] | scales[16] | d f32 */

#define SCALAR_IQ_DECODED(name, wbytes, iq1, factor)                                                  \
    static void name##_scalar_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) { \
        for (int64_t ib = 0; ib < n / 256; ib++)                                                      \
            for (int r = 0; r < 4; r++) {                                                             \
                uint8_t * o = decoded + (4 * ib + r) * SCALAR_DECODED_BLOCK;                          \
                st_f32(o + 272, dec_##name(w + r * stride + ib * (wbytes), o, o + 256));              \
            }                                                                                         \
    }                                                                                                 \
    static void name##_scalar_decoded(int64_t n, const uint8_t * decoded, const uint8_t * a, float * out) { \
        float sum[4] = { 0.0f, 0.0f, 0.0f, 0.0f };                                                    \
        for (int64_t ib = 0; ib < n / 256; ib++)                                                      \
            for (int r = 0; r < 4; r++) {                                                             \
                const uint8_t * o = decoded + (4 * ib + r) * SCALAR_DECODED_BLOCK;                    \
                sum[r] += iq_block_dot(iq1, o, o + 256, ld_f32(o + 272), a + ib * Q8_K_BYTES);        \
            }                                                                                         \
        for (int r = 0; r < 4; r++) out[r] = (factor) * sum[r];                                       \
    }

SCALAR_IQ_DECODED(iq2_xxs, IQ2_XXS_BYTES, 0, 0.125f)
SCALAR_IQ_DECODED(iq2_xs, IQ2_XS_BYTES, 0, 0.125f)
SCALAR_IQ_DECODED(iq2_s, IQ2_S_BYTES, 0, 0.125f)
SCALAR_IQ_DECODED(iq3_xxs, IQ3_XXS_BYTES, 0, 0.25f)
SCALAR_IQ_DECODED(iq3_s, IQ3_S_BYTES, 0, 1.0f)
SCALAR_IQ_DECODED(iq1_s, IQ1_S_BYTES, 1, 1.0f)
SCALAR_IQ_DECODED(iq1_m, IQ1_M_BYTES, 1, 1.0f)

/* Float rows: f32 products summed in 8 interleaved f32 partial sums (a shape compilers vectorize). */
#define SCALAR_FLOAT_ROWS(name, load)                                                                 \
    static void name##_rows1_scalar(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        (void)stride;                                                                                 \
        float acc[8] = { 0 }, tail = 0.0f;                                                            \
        int64_t i = 0;                                                                                \
        for (; i + 8 <= n; i += 8)                                                                    \
            for (int k = 0; k < 8; k++) acc[k] += load(w, i + k) * load(a, i + k);                   \
        for (; i < n; i++) tail += load(w, i) * load(a, i);                                          \
        out[0] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail; \
    }                                                                                                 \
    static void name##_rows4_scalar(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        for (int r = 0; r < 4; r++) name##_rows1_scalar(n, w + r * stride, 0, a, out + r);          \
    }

static inline float load_f32_at(const uint8_t * p, int64_t i) { return ld_f32(p + 4 * i); }
static inline float load_f16_at(const uint8_t * p, int64_t i) { return f16_to_f32(ld_u16(p + 2 * i)); }
static inline float load_bf16_at(const uint8_t * p, int64_t i) { return bf16_to_f32(ld_u16(p + 2 * i)); }

SCALAR_FLOAT_ROWS(f32, load_f32_at)
SCALAR_FLOAT_ROWS(f16, load_f16_at)
SCALAR_FLOAT_ROWS(bf16, load_bf16_at)

/* SIMD entry points: prefix_rows1 and prefix_rows4 both expand `call` (a kernel body taking the row
 * count NR as a constant), so the four-row version runs the one-row instruction sequence per row. */
#define ROWS_1_4(prefix, target_fn, call)                                                              \
    target_fn void prefix##_rows1(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        (void)stride; enum { NR = 1 }; call;                                                           \
    }                                                                                                  \
    target_fn void prefix##_rows4(int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) { \
        enum { NR = 4 }; call;                                                                         \
    }

/* ============================================================================================== */
/* 5. x86 AVX2 + FMA + F16C                                                                       */
/* ============================================================================================== */

/* (-DMEMRA_NO_SIMD builds the portable path only, e.g. to test it as a build without SIMD kernels runs it) */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(MEMRA_NO_SIMD)
#define MEMRA_X86 1
#include <immintrin.h>
#include <cpuid.h>

#define TARGET_AVX2 "avx2,fma,f16c"
#define TARGET_AVX512 "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define AVX2_FN static __attribute__((target(TARGET_AVX2)))
#define AVX2_INLINE static inline __attribute__((target(TARGET_AVX2), always_inline))
#define AVX512_FN static __attribute__((target(TARGET_AVX512)))
#define AVX512_INLINE static inline __attribute__((target(TARGET_AVX512), always_inline))

AVX2_INLINE float f16_at_avx2(const uint8_t * p) { return _cvtsh_ss(ld_u16(p)); }

AVX2_INLINE float hsum_ps_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2_INLINE int hsum_epi32_sse(__m128i v) {
    v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(v);
}

/* Four-row kernels read four rows side by side, which streams from DRAM much worse than one
 * sequential read on some CPUs (measured on Zen 4: ~11 vs ~18 GB/s for q8_0). So while they compute rows
 * 0..3, they pull rows 4..7 (the next group a matrix-vector loop asks for) into L2 in address order, in
 * step with their progress: a step that consumed bytes [done, done+step) of each row prefetches bytes
 * [4*done, 4*done + 4*step) of the next four rows taken as one span. Prefetches never fault, so running
 * past the end of the matrix is harmless. */
/* Prefetches the cache lines of [p, p + bytes) into L1 (a later row of a matrix-vector product). */
static inline void prefetch_ahead(const uint8_t * p, int64_t bytes) {
#ifndef MEMRA_NO_PREFETCH
    const uintptr_t first = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + (uintptr_t)bytes;
    for (uintptr_t line = first; line < end; line += 64) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)line));
#else
    (void)p; (void)bytes;
#endif
}

static inline void prefetch_next_rows(const uint8_t * w, size_t stride, int64_t row_bytes, int64_t done, int64_t step) {
#ifndef MEMRA_NO_PREFETCH
    const int64_t end = 4 * (done + step);
    for (int64_t off = (4 * done) & ~(int64_t)63; off < end; off += 64) {
        const int64_t row = (off >= row_bytes) + (off >= 2 * row_bytes) + (off >= 3 * row_bytes);
        const char * line = (const char *)(w + (4 + row) * (int64_t)stride + (off - row * row_bytes));
        /* (asm: GCC 12 deletes this loop as dead code when written with _mm_prefetch) */
        __asm__ volatile("prefetcht1 %0" : : "m"(*line));
    }
#else
    (void)w; (void)stride; (void)row_bytes; (void)done; (void)step;
#endif
}

/* q3k_scales on SSE: the 16 scales (code - 32) as int8. */
AVX2_INLINE __m128i q3k_scales_sse(const uint8_t * s) {
    const __m128i a = _mm_loadl_epi64((const __m128i *)s); /* s[0..7] */
    const __m128i low = _mm_and_si128(_mm_unpacklo_epi64(a, _mm_srli_epi32(a, 4)), _mm_set1_epi8(15));
    const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)ld_u32(s + 8)), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi32(high, 4)), _mm_set1_epi8(32));
}

/* 16 packed nibbles -> 32 bytes: [qs & 15 (values 0..15), qs >> 4 (values 16..31)]. */
AVX2_INLINE __m256i nibbles32_avx2(const uint8_t * qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

/* byte j (0..31) = (bits >> j) & 1 ? value : 0. */
AVX2_INLINE __m256i bits32_to_bytes_avx2(uint32_t bits, char value) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), select);
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, select), _mm256_set1_epi8(value));
}

/* In each 16-bit lane, bit `from` of each byte moved to bit `to` (other bits cleared). */
#define MOVE_BIT_AVX2(v, from, to)                                                                 \
    _mm256_and_si256((from) > (to) ? _mm256_srli_epi16((v), (from) - (to)) : _mm256_slli_epi16((v), (to) - (from)), \
                     _mm256_set1_epi8((char)(1 << (to))))

/* pshufb control giving, per 128-bit lane i, the 16-bit element e_i of that lane repeated 8 times. */
AVX2_INLINE __m256i pick16_avx2(int e0, int e1) {
    return _mm256_setr_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * e0)), _mm_set1_epi16((short)(0x0100 + 0x0202 * e1)));
}

/* --- activation conversion (the AVX-512 path uses these too: they are O(n) per activation row) --- */

/* 32 floats -> 32 int8 as round_even(x * id) with signed saturation, in order. */
AVX2_INLINE __m256i quantize32_avx2(const float * x, __m256 mul) {
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 0), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 16), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 24), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    i0 = _mm256_packs_epi32(i0, i1);
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_packs_epi16(i0, i2);
    return _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

AVX2_INLINE float max_abs_avx2(const float * x, int count) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < count; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2_INLINE void to_q8_0_or_1_avx2(const float * x, uint8_t * y, int64_t n, int with_sum) {
    const int bytes = with_sum ? Q8_1_BYTES : Q8_0_BYTES;
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32, y += bytes) {
        const float amax = max_abs_avx2(x, 32);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256i q = quantize32_avx2(x, _mm256_set1_ps(id));
        _mm256_storeu_si256((__m256i *)(y + (with_sum ? 4 : 2)), q);
        st_u16(y, f32_to_f16(d));
        if (with_sum) {
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
            const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            const int sum = hsum_epi32_sse(_mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1)));
            st_u16(y + 2, f32_to_f16(d * (float)sum));
        }
    }
}

AVX2_FN void to_q8_0_avx2(const float * x, uint8_t * y, int64_t n) { to_q8_0_or_1_avx2(x, y, n, 0); }
AVX2_FN void to_q8_1_avx2(const float * x, uint8_t * y, int64_t n) { to_q8_0_or_1_avx2(x, y, n, 1); }

AVX2_FN void to_q8_K_avx2(const float * x, uint8_t * y, int64_t n) {
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256, y += Q8_K_BYTES) {
        const float amax = max_abs_avx2(x, 256);
        const float iscale = q8_K_iscale(x, amax, y);
        if (iscale == 0.0f) continue;
        const __m256 mul = _mm256_set1_ps(iscale);
        for (int j = 0; j < 256; j += 32) {
            /* min(127, .) is packs' saturation: round_even(iscale*x) never goes below -127 */
            const __m256i q = quantize32_avx2(x + j, mul);
            _mm256_storeu_si256((__m256i *)(y + Q8K_QS + j), q);
            /* sums of 16 int8: sad of (q ^ 0x80) counts q + 128 */
            const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
            const __m256i pair = _mm256_add_epi64(sad, _mm256_shuffle_epi32(sad, _MM_SHUFFLE(1, 0, 3, 2)));
            const int16_t s0 = (int16_t)(_mm256_extract_epi32(pair, 0) - 2048);
            const int16_t s1 = (int16_t)(_mm256_extract_epi32(pair, 4) - 2048);
            memcpy(y + Q8K_BSUMS + 2 * (j / 16), &s0, 2);
            memcpy(y + Q8K_BSUMS + 2 * (j / 16 + 1), &s1, 2);
        }
        st_f32(y, 1.0f / iscale);
    }
}

AVX2_FN void to_f16_avx2(const float * x, uint8_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *)(y + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) st_u16(y + 2 * i, f32_to_f16(x[i]));
}

/* f32_to_bf16 on 8 lanes: the low 16 bits of each 32-bit lane hold the result. */
AVX2_INLINE __m256i bf16x8_avx2(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    return _mm256_blendv_epi8(rounded, quiet, nan);
}

AVX2_FN void to_bf16_avx2(const float * x, uint8_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i lo = bf16x8_avx2(_mm256_loadu_ps(x + i)), hi = bf16x8_avx2(_mm256_loadu_ps(x + i + 8));
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(y + 2 * i), packed);
    }
    for (; i < n; i++) st_u16(y + 2 * i, f32_to_bf16(x[i]));
}

/* --- q8_0: sum(w*a) per block with vpmaddubsw on |w| and sign(a, w) --- */

AVX2_INLINE void q8_0_avx2(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    __m256 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const uint8_t * ya = a + ib * Q8_0_BYTES;
        const __m256i av = _mm256_loadu_si256((const __m256i *)(ya + 2));
        const float da = f16_at_avx2(ya);
        if (nr == 4) prefetch_next_rows(w, stride, n / 32 * Q8_0_BYTES, ib * Q8_0_BYTES, Q8_0_BYTES);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * Q8_0_BYTES;
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(xw + 2));
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16_at_avx2(xw) * da), p, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps_avx2(acc[r]);
}

/* --- q4_0, q4_1, q5_0, q5_1, iq4_nl: one 32-value block per step --- */

AVX2_INLINE void blocks32_avx2(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int has_qh = type == MEMRA_TYPE_Q5_0 || type == MEMRA_TYPE_Q5_1;
    const int wbytes = block_bytes(type), abytes = has_min ? Q8_1_BYTES : Q8_0_BYTES;
    const int qh_at = has_min ? 4 : 2, qs_at = (has_min ? 4 : 2) + (has_qh ? 4 : 0), aq_at = has_min ? 4 : 2;
    const int offset = type == MEMRA_TYPE_Q4_0 ? 8 : type == MEMRA_TYPE_Q5_0 ? 16 : 0;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    __m256 acc[4];
    float macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); macc[r] = 0.0f; }
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const uint8_t * ya = a + ib * abytes;
        const __m256i av = _mm256_loadu_si256((const __m256i *)(ya + aq_at));
        if (nr == 4) prefetch_next_rows(w, stride, n / 32 * wbytes, ib * wbytes, wbytes);
        const float da = f16_at_avx2(ya);
        const float sa = has_min ? f16_at_avx2(ya + 2) : 0.0f;
        /* offset * (a[2i] + a[2i+1]) in 16-bit lanes, removed from the unsigned products below */
        const __m256i corr = _mm256_maddubs_epi16(_mm256_set1_epi8((char)offset), av);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            __m256i u = nibbles32_avx2(xw + qs_at);
            __m256i p16;
            if (type == MEMRA_TYPE_IQ4_NL) {
                const __m256i v = _mm256_shuffle_epi8(table, u);
                p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
            } else {
                if (has_qh) u = _mm256_or_si256(u, bits32_to_bytes_avx2(ld_u32(xw + qh_at), 16));
                p16 = _mm256_maddubs_epi16(u, av);
                if (offset) p16 = _mm256_sub_epi16(p16, corr);
            }
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16_at_avx2(xw) * da), p, acc[r]);
            if (has_min) macc[r] += f16_at_avx2(xw + 2) * sa;
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps_avx2(acc[r]) + macc[r];
}

/* --- K-quants: 32 values per step, vpmaddubsw then vpmaddwd with the sub-block scales --- */

/* q8_K activation values k*32 .. k*32+31 */
#define Q8K_VEC_AVX2(ya, k) _mm256_loadu_si256((const __m256i *)((ya) + Q8K_QS + 32 * (k)))

AVX2_INLINE void q4_K_avx2(const int nr, const int with_qh, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int wbytes = with_qh ? Q5_K_BYTES : Q4_K_BYTES, qs_at = with_qh ? 48 : 16;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[4];
    __m128 macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); macc[r] = _mm_setzero_ps(); }
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        /* sums of 32 activations (16-bit: at most 32*127) for the mins */
        const __m128i bs32 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(ya + Q8K_BSUMS)), _mm_loadu_si128((const __m128i *)(ya + Q8K_BSUMS + 16)));
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            uint64_t scales, mins;
            q4k_scales_mins(xw + 4, &scales, &mins);
            const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scales)));
            const __m256i qh = with_qh ? _mm256_loadu_si256((const __m256i *)(xw + 16)) : _mm256_setzero_si256();
            __m256i isum = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(xw + qs_at + 32 * c));
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (with_qh) {
                    lo = _mm256_or_si256(lo, MOVE_BIT_AVX2(qh, 2 * c, 4));
                    hi = _mm256_or_si256(hi, MOVE_BIT_AVX2(qh, 2 * c + 1, 4));
                }
                const __m256i plo = _mm256_maddubs_epi16(lo, Q8K_VEC_AVX2(ya, 2 * c));
                const __m256i phi = _mm256_maddubs_epi16(hi, Q8K_VEC_AVX2(ya, 2 * c + 1));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, pick16_avx2(2 * c, 2 * c))));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, pick16_avx2(2 * c + 1, 2 * c + 1))));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16_at_avx2(xw) * da), _mm256_cvtepi32_ps(isum), acc[r]);
            const __m128i m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mins)), bs32);
            macc[r] = _mm_fmadd_ps(_mm_set1_ps(f16_at_avx2(xw + 2) * da), _mm_cvtepi32_ps(m), macc[r]);
        }
    }
    for (int r = 0; r < nr; r++) {
        __m128 m = macc[r];
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[r] = hsum_ps_avx2(acc[r]) - _mm_cvtss_f32(m);
    }
}

AVX2_INLINE void q6_K_avx2(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * Q6_K_BYTES, ib * Q6_K_BYTES, Q6_K_BYTES);
        const float da = ld_f32(ya);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)(ya + Q8K_BSUMS));
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * Q6_K_BYTES;
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xw + 192)));
            /* the -32 offset: 32 * sum(scale * bsum) */
            __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
            for (int k = 0; k < 2; k++) {
                const __m256i L0 = _mm256_loadu_si256((const __m256i *)(xw + 64 * k));
                const __m256i L1 = _mm256_loadu_si256((const __m256i *)(xw + 64 * k + 32));
                const __m256i H = _mm256_loadu_si256((const __m256i *)(xw + 128 + 32 * k));
                const __m256i sc = _mm256_broadcastsi128_si256(k ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
                const __m256i u0 = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
                const __m256i u1 = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
                const __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30));
                const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u0, Q8K_VEC_AVX2(ya, 4 * k + 0)), _mm256_shuffle_epi8(sc, pick16_avx2(0, 1))));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u1, Q8K_VEC_AVX2(ya, 4 * k + 1)), _mm256_shuffle_epi8(sc, pick16_avx2(2, 3))));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u2, Q8K_VEC_AVX2(ya, 4 * k + 2)), _mm256_shuffle_epi8(sc, pick16_avx2(4, 5))));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u3, Q8K_VEC_AVX2(ya, 4 * k + 3)), _mm256_shuffle_epi8(sc, pick16_avx2(6, 7))));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16_at_avx2(xw + 208) * da), _mm256_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps_avx2(acc[r]);
}

/* q3_K (with_hmask) and q2_K: 2-bit fields (plus q3_K's third bit from hmask), sub-blocks of 16. */
AVX2_INLINE void q2_3_K_avx2(const int nr, const int q3, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int wbytes = q3 ? Q3_K_BYTES : Q2_K_BYTES, qs_at = q3 ? 32 : 16;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[4], macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); macc[r] = _mm256_setzero_ps(); }
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)(ya + Q8K_BSUMS));
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            __m256i sc16, isum;
            if (q3) {
                sc16 = _mm256_cvtepi8_epi16(q3k_scales_sse(xw + 96));
                /* the -4 offset of u = q + 4: 4 * sum(scale * bsum) */
                isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 2));
            } else {
                const __m128i raw = _mm_loadu_si128((const __m128i *)xw);
                sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(15)));
                const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
                macc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16_at_avx2(xw + 82) * da), _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)), macc[r]);
                isum = _mm256_setzero_si256();
            }
            const __m256i hm = q3 ? _mm256_loadu_si256((const __m256i *)xw) : _mm256_setzero_si256();
            for (int k = 0; k < 2; k++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(xw + qs_at + 32 * k));
                const __m256i sc = _mm256_broadcastsi128_si256(k ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
                for (int j = 0; j < 4; j++) {
                    __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                    if (q3) u = _mm256_or_si256(u, MOVE_BIT_AVX2(hm, 4 * k + j, 2));
                    const __m256i p = _mm256_maddubs_epi16(u, Q8K_VEC_AVX2(ya, 4 * k + j));
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, pick16_avx2(2 * j, 2 * j + 1))));
                }
            }
            const float dw = f16_at_avx2(xw + (q3 ? 108 : 80));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps_avx2(acc[r]) - (q3 ? 0.0f : hsum_ps_avx2(macc[r]));
}

AVX2_INLINE void iq4_xs_avx2(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    __m256 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * IQ4_XS_BYTES, ib * IQ4_XS_BYTES, IQ4_XS_BYTES);
        const float da = ld_f32(ya);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_XS_BYTES;
            __m256i isum = _mm256_setzero_si256();
            for (int s = 0; s < 8; s++) {
                const __m256i v = _mm256_shuffle_epi8(table, nibbles32_avx2(xw + 8 + 16 * s));
                const __m256i av = Q8K_VEC_AVX2(ya, s);
                const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16((short)(iq4xs_scale(xw, s) - 32))));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16_at_avx2(xw) * da), _mm256_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps_avx2(acc[r]);
}

/* --- i-quants: 32 values (a sub-block) per step. The grid entries are loaded one by one (their indices
 * read or assembled from the block's bytes); the activations take the weights' signs, vpmaddubsw
 * multiplies the unsigned magnitudes with them, vpmaddwd applies the scales of 16 values. The sign
 * bytes of the types that pack 7 bits per group of 8 are computed for the whole block at once. --- */

/* 0x80 for the 4-bit values of odd parity: the sign bit ksigns_iq2xs adds. */
#define IQ_PARITY_BYTES 0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0

/* The 7-bit sign fields in the low bits of each byte of x completed with their parity bit (bit 7). */
AVX2_INLINE __m256i iq_parity_avx2(__m256i x) {
    const __m256i t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi16(x, 4)), _mm256_set1_epi8(15));
    return _mm256_or_si256(x, _mm256_shuffle_epi8(_mm256_setr_epi8(IQ_PARITY_BYTES, IQ_PARITY_BYTES), t));
}

/* The sign bytes of a block's 32 groups of 8 (bit j set: value j negative) for iq2_xxs and iq3_xxs,
 * whose u32 per sub-block packs four 7-bit fields (at bits 0, 7, 14, 21), and for iq2_xs, whose u16
 * per group has its 7 bits at the top. */
AVX2_INLINE __m256i iq_sign_bytes_avx2(const int type, const uint8_t * xw) {
    if (type == MEMRA_TYPE_IQ2_XS) {
        const __m256i lo = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(xw + 2)), 9);
        const __m256i hi = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(xw + 34)), 9);
        return iq_parity_avx2(_mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), _MM_SHUFFLE(3, 1, 2, 0)));
    }
    __m256i a; /* the 8 u32 of the sub-blocks */
    if (type == MEMRA_TYPE_IQ2_XXS) {
        const __m256i odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
        a = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(xw + 2)), odd),
                               _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(xw + 34)), odd), 0xf0);
    } else {
        a = _mm256_loadu_si256((const __m256i *)(xw + 66));
    }
    __m256i x = _mm256_and_si256(a, _mm256_set1_epi32(0x7f));
    x = _mm256_or_si256(x, _mm256_and_si256(_mm256_slli_epi32(a, 1), _mm256_set1_epi32(0x7f00)));
    x = _mm256_or_si256(x, _mm256_and_si256(_mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x7f0000)));
    x = _mm256_or_si256(x, _mm256_and_si256(_mm256_slli_epi32(a, 3), _mm256_set1_epi32(0x7f000000)));
    return iq_parity_avx2(x);
}

/* The 16 scales (2*code + 1) of a block as int16, one per 16 values, the even groups of 16 in the low
 * 128-bit lane and the odd ones in the high lane: sub-block s's two scales are element s of each lane. */
AVX2_INLINE __m256i iq_scales_avx2(const int type, const uint8_t * xw) {
    const __m128i m4 = _mm_set1_epi8(15);
    __m256i codes; /* int16 */
    switch (type) {
    case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ3_XXS: case MEMRA_TYPE_IQ3_S: case MEMRA_TYPE_IQ1_S: {
        /* one scale per sub-block: the same 8 codes in both lanes */
        __m128i c16;
        if (type == MEMRA_TYPE_IQ3_S) {
            const __m128i v = _mm_cvtsi32_si128((int)ld_u32(xw + 106));
            c16 = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4)));
        } else if (type == MEMRA_TYPE_IQ1_S) {
            c16 = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(xw + 34)), 12), _mm_set1_epi16(7));
        } else {
            /* the top nibble of the u32 of each sub-block (at 6 + 8ib, resp. 66 + 4ib) */
            __m256i sub;
            if (type == MEMRA_TYPE_IQ2_XXS) {
                const __m256i odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
                sub = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(xw + 2)), odd),
                                         _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(xw + 34)), odd), 0xf0);
            } else {
                sub = _mm256_loadu_si256((const __m256i *)(xw + 66));
            }
            const __m256i c = _mm256_srli_epi32(sub, 28);
            c16 = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        }
        codes = _mm256_broadcastsi128_si256(c16);
        break;
    }
    case MEMRA_TYPE_IQ2_XS: case MEMRA_TYPE_IQ2_S: {
        /* byte ib: the low nibble is group 2ib's, the high nibble group 2ib+1's */
        const __m128i v = _mm_loadl_epi64((const __m128i *)(xw + (type == MEMRA_TYPE_IQ2_XS ? 66 : 74)));
        codes = _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4)));
        break;
    }
    default: { /* iq1_m: group j's 3 bits at 3(j%4) of u16 j/4 at 48; element s of lane L is group 2s+L */
        const __m256i w = _mm256_broadcastsi128_si256(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)(xw + 48))));
        const __m256i even = _mm256_srlv_epi32(w, _mm256_setr_epi32(0, 0, 0, 0, 3, 3, 3, 3));
        const __m256i odd = _mm256_srlv_epi32(w, _mm256_setr_epi32(6, 6, 6, 6, 9, 9, 9, 9));
        codes = _mm256_and_si256(_mm256_or_si256(even, _mm256_slli_epi32(odd, 16)), _mm256_set1_epi16(7));
        break;
    }
    }
    return _mm256_add_epi16(_mm256_slli_epi16(codes, 1), _mm256_set1_epi16(1));
}

/* The 16 bsums of a q8_K block in the order of iq_scales_avx2 (even groups of 16, then odd). */
AVX2_INLINE __m256i iq_bsums_avx2(const uint8_t * ya) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)(ya + Q8K_BSUMS));
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, split), _MM_SHUFFLE(3, 1, 2, 0));
}

/* Four 8-byte grid entries, eight 4-byte ones. */
#define IQ_GRID4(grid, i0, i1, i2, i3) _mm256_set_epi64x((long long)(grid)[i3], (long long)(grid)[i2], (long long)(grid)[i1], (long long)(grid)[i0])
#define IQ_GRID8_32(grid, ix)                                                                                                      \
    _mm256_set_epi32((int)(grid)[(ix)[7]], (int)(grid)[(ix)[6]], (int)(grid)[(ix)[5]], (int)(grid)[(ix)[4]], (int)(grid)[(ix)[3]], \
                     (int)(grid)[(ix)[2]], (int)(grid)[(ix)[1]], (int)(grid)[(ix)[0]])

/* iq1: codes u = 8*(g + 1), plus 2 in the groups (qword lanes) whose delta is positive (delta_plus: all ones). */
AVX2_INLINE __m256i iq1_codes_avx2(__m256i g, __m256i delta_plus) {
    const __m256i u = _mm256_slli_epi16(_mm256_add_epi8(g, _mm256_set1_epi8(1)), 3);
    return _mm256_add_epi8(u, _mm256_and_si256(delta_plus, _mm256_set1_epi8(2)));
}

/* Sub-block ib (values 32ib .. 32ib+31) of one block: u, the unsigned magnitudes (or iq1 codes). */
AVX2_INLINE __m256i iq_decode_avx2(const int type, const uint8_t * xw, int ib) {
    switch (type) {
    case MEMRA_TYPE_IQ2_XXS: {
        const uint8_t * q = xw + 2 + 8 * ib;
        return IQ_GRID4(memra_iq2xxs_grid, q[0], q[1], q[2], q[3]);
    }
    case MEMRA_TYPE_IQ2_XS: {
        const uint8_t * q = xw + 2 + 8 * ib;
        return IQ_GRID4(memra_iq2xs_grid, ld_u16(q) & 511, ld_u16(q + 2) & 511, ld_u16(q + 4) & 511, ld_u16(q + 6) & 511);
    }
    case MEMRA_TYPE_IQ2_S: {
        const uint8_t * q = xw + 2 + 4 * ib;
        const unsigned h = xw[66 + ib];
        return IQ_GRID4(memra_iq2s_grid, q[0] | ((h << 8) & 0x300), q[1] | ((h << 6) & 0x300), q[2] | ((h << 4) & 0x300), q[3] | ((h << 2) & 0x300));
    }
    case MEMRA_TYPE_IQ3_XXS:
        return IQ_GRID8_32(memra_iq3xxs_grid, xw + 2 + 8 * ib);
    case MEMRA_TYPE_IQ3_S: {
        const uint8_t * q = xw + 2 + 8 * ib;
        const unsigned h = xw[66 + ib];
        const unsigned ix[8] = { q[0] | ((h << 8) & 256), q[1] | ((h << 7) & 256), q[2] | ((h << 6) & 256), q[3] | ((h << 5) & 256),
                                 q[4] | ((h << 4) & 256), q[5] | ((h << 3) & 256), q[6] | ((h << 2) & 256), q[7] | ((h << 1) & 256) };
        return IQ_GRID8_32(memra_iq3s_grid, ix);
    }
    case MEMRA_TYPE_IQ1_S: {
        const uint8_t * q = xw + 2 + 4 * ib;
        const unsigned h = ld_u16(xw + 34 + 2 * ib);
        const __m256i g = IQ_GRID4(memra_iq1s_grid, q[0] | ((h << 8) & 0x700), q[1] | ((h << 5) & 0x700), q[2] | ((h << 2) & 0x700), q[3] | ((h >> 1) & 0x700));
        return iq1_codes_avx2(g, _mm256_set1_epi32(h & 0x8000 ? 0 : -1));
    }
    default: { /* iq1_m: a nibble of qh per group of 8: 3 index bits, the delta's sign */
        const uint8_t * q = xw + 4 * ib;
        const unsigned h = ld_u16(xw + 32 + 2 * ib);
        const __m256i g = IQ_GRID4(memra_iq1s_grid, q[0] | ((h << 8) & 0x700), q[1] | ((h << 4) & 0x700), q[2] | (h & 0x700), q[3] | ((h >> 4) & 0x700));
        const __m256i minus = _mm256_and_si256(_mm256_set1_epi64x(h), _mm256_setr_epi64x(0x8, 0x80, 0x800, 0x8000));
        return iq1_codes_avx2(g, _mm256_cmpeq_epi64(minus, _mm256_setzero_si256()));
    }
    }
}

/* The sign bits of values 64p .. 64p+63 (sub-blocks 2p, 2p+1) as two masks (0xff: negative). */
AVX2_INLINE void iq_sign_masks_avx2(uint64_t bits, __m256i * neg0, __m256i * neg1) {
    const __m256i spread0 = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    const __m256i spread1 = _mm256_set_epi64x(0x0707070707070707LL, 0x0606060606060606LL, 0x0505050505050505LL, 0x0404040404040404LL);
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_set1_epi64x((long long)bits);
    *neg0 = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(b, spread0), select), select);
    *neg1 = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(b, spread1), select), select);
}

/* The constant factor of the row sum (see blk_iq2_xxs). */
static inline float iq_factor(int type) {
    return type == MEMRA_TYPE_IQ3_XXS ? 0.25f : type == MEMRA_TYPE_IQ3_S ? 1.0f : 0.125f;
}

static inline float iq_block_d(int type, const uint8_t * xw) {
    return type == MEMRA_TYPE_IQ1_M ? f16_to_f32(iq1m_d_bits(xw + 48)) : f16_to_f32(ld_u16(xw));
}

AVX2_INLINE void iq_avx2(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int wbytes = block_bytes(type), iq1 = type == MEMRA_TYPE_IQ1_S || type == MEMRA_TYPE_IQ1_M;
    const int packed_signs = type == MEMRA_TYPE_IQ2_XXS || type == MEMRA_TYPE_IQ2_XS || type == MEMRA_TYPE_IQ3_XXS;
    __m256 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        const __m256i bsums = iq1 ? iq_bsums_avx2(ya) : _mm256_setzero_si256();
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            const __m256i sc = iq_scales_avx2(type, xw);
            uint64_t signs[4];
            if (packed_signs) _mm256_storeu_si256((__m256i *)(void *)signs, iq_sign_bytes_avx2(type, xw));
            /* iq1: the offset of the codes, -9 * sum(scale * bsum) */
            __m256i isum0 = iq1 ? _mm256_mullo_epi32(_mm256_madd_epi16(sc, bsums), _mm256_set1_epi32(-9)) : _mm256_setzero_si256();
            __m256i isum1 = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                __m256i sa0 = Q8K_VEC_AVX2(ya, 2 * p), sa1 = Q8K_VEC_AVX2(ya, 2 * p + 1);
                if (!iq1) {
                    __m256i neg0, neg1;
                    iq_sign_masks_avx2(packed_signs ? signs[p] : ld_u64(xw + (type == MEMRA_TYPE_IQ2_S ? 34 : 74) + 8 * p), &neg0, &neg1);
                    sa0 = _mm256_sub_epi8(_mm256_xor_si256(sa0, neg0), neg0);
                    sa1 = _mm256_sub_epi8(_mm256_xor_si256(sa1, neg1), neg1);
                }
                /* the scales of the two halves of sub-block s: element s of each lane */
                const __m256i ls0 = _mm256_shuffle_epi8(sc, pick16_avx2(2 * p, 2 * p));
                const __m256i ls1 = _mm256_shuffle_epi8(sc, pick16_avx2(2 * p + 1, 2 * p + 1));
                isum0 = _mm256_add_epi32(isum0, _mm256_madd_epi16(_mm256_maddubs_epi16(iq_decode_avx2(type, xw, 2 * p), sa0), ls0));
                isum1 = _mm256_add_epi32(isum1, _mm256_madd_epi16(_mm256_maddubs_epi16(iq_decode_avx2(type, xw, 2 * p + 1), sa1), ls1));
            }
            const __m256i isum = _mm256_add_epi32(isum0, isum1);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(iq_block_d(type, xw) * da), _mm256_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = iq_factor(type) * hsum_ps_avx2(acc[r]);
}

/* Decoded rows (see SCALAR_IQ_DECODED) for tiles of four weight rows x two activation rows (the 16
 * registers hold their 8 integer sums) with iq_avx2's integer sum per lane: the weights' signs moved from
 * the activations onto the magnitudes once per tile (v = +-u), the activations offset to unsigned bytes
 * once per row (memra_dot_decoded_prepare); per sub-block one vpmaddubsw of the prepared activations
 * (a + 128; iq1: a) with v (iq1: u), one vpmaddwd with the sub-block's scales and one add, the sum started
 * at base (int32: -128 * sum(scale * v); iq1: the scales times -9, int16, for vpmaddwd with the bsums).
 * Weights per block and row (AVX2_DECODED_BLOCK): v (iq1: u) of sub-blocks 0..7 (256 B) | their scales as
 * iq_avx2 picks them (256 B) | base (32 B) | d f32 | padding.
 * Activations per block (AVX2_IQ_PREPARED_BLOCK): a + 128 (iq1: a) | the bsums in iq_bsums_avx2's order
 * (iq1; else zeros) | d f32 | padding. */
enum { AVX2_DECODED_BLOCK = 576, AVX2_IQ_PREPARED_BLOCK = 320 };

AVX2_INLINE void iq_decode_rows4_avx2(const int type, int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const int wbytes = block_bytes(type), iq1 = type == MEMRA_TYPE_IQ1_S || type == MEMRA_TYPE_IQ1_M;
    const int packed_signs = type == MEMRA_TYPE_IQ2_XXS || type == MEMRA_TYPE_IQ2_XS || type == MEMRA_TYPE_IQ3_XXS;
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    for (int64_t ib = 0; ib < n / 256; ib++) {
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            uint8_t * o = decoded + (4 * ib + r) * AVX2_DECODED_BLOCK;
            const __m256i sc = iq_scales_avx2(type, xw);
            uint64_t signs[4];
            if (packed_signs) _mm256_storeu_si256((__m256i *)(void *)signs, iq_sign_bytes_avx2(type, xw));
            __m256i base = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                __m256i neg[2] = { _mm256_setzero_si256(), _mm256_setzero_si256() };
                if (!iq1) iq_sign_masks_avx2(packed_signs ? signs[p] : ld_u64(xw + (type == MEMRA_TYPE_IQ2_S ? 34 : 74) + 8 * p), &neg[0], &neg[1]);
                for (int h = 0; h < 2; h++) {
                    const int s = 2 * p + h;
                    const __m256i u = iq_decode_avx2(type, xw, s);
                    const __m256i v = _mm256_sub_epi8(_mm256_xor_si256(u, neg[h]), neg[h]);
                    const __m256i ls = _mm256_shuffle_epi8(sc, pick16_avx2(s, s));
                    _mm256_storeu_si256((__m256i *)(o + 32 * s), v);
                    _mm256_storeu_si256((__m256i *)(o + 256 + 32 * s), ls);
                    base = _mm256_add_epi32(base, _mm256_madd_epi16(_mm256_maddubs_epi16(x80, v), ls));
                }
            }
            _mm256_storeu_si256((__m256i *)(o + 512), iq1 ? _mm256_mullo_epi16(sc, _mm256_set1_epi16(-9)) : _mm256_sub_epi32(_mm256_setzero_si256(), base));
            st_f32(o + 544, iq_block_d(type, xw));
        }
    }
}

AVX2_INLINE void iq_prepare_rows_avx2(const int type, int64_t n, const uint8_t * a, uint8_t * prepared) {
    const int iq1 = type == MEMRA_TYPE_IQ1_S || type == MEMRA_TYPE_IQ1_M;
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        uint8_t * p = prepared + ib * AVX2_IQ_PREPARED_BLOCK;
        for (int s = 0; s < 8; s++) _mm256_storeu_si256((__m256i *)(p + 32 * s), iq1 ? Q8K_VEC_AVX2(ya, s) : _mm256_xor_si256(Q8K_VEC_AVX2(ya, s), x80));
        _mm256_storeu_si256((__m256i *)(p + 256), iq1 ? iq_bsums_avx2(ya) : _mm256_setzero_si256());
        st_f32(p + 288, ld_f32(ya));
        memset(p + 292, 0, AVX2_IQ_PREPARED_BLOCK - 292);
    }
}

/* Four decoded weight rows x AR (1 or 2) prepared activation rows (a_stride bytes apart): out[c * out_stride + r]. */
AVX2_INLINE void iq_decoded_tile_avx2(const int type, const int AR, int64_t n, const uint8_t * decoded, const uint8_t * prepared, size_t a_stride,
                                      float * out, int64_t out_stride) {
    const int iq1 = type == MEMRA_TYPE_IQ1_S || type == MEMRA_TYPE_IQ1_M;
    __m256 acc[4][2];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 2")
        for (int c = 0; c < AR; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * p = prepared + ib * AVX2_IQ_PREPARED_BLOCK;
        const uint8_t * blk = decoded + 4 * ib * AVX2_DECODED_BLOCK;
        __m256i isum[4][2];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            const __m256i base = _mm256_loadu_si256((const __m256i *)(blk + r * AVX2_DECODED_BLOCK + 512));
            _Pragma("GCC unroll 2")
            for (int c = 0; c < AR; c++)
                isum[r][c] = iq1 ? _mm256_madd_epi16(base, _mm256_loadu_si256((const __m256i *)(p + c * a_stride + 256))) : base;
        }
        _Pragma("GCC unroll 8")
        for (int s = 0; s < 8; s++) {
            __m256i as[2];
            _Pragma("GCC unroll 2")
            for (int c = 0; c < AR; c++) as[c] = _mm256_loadu_si256((const __m256i *)(p + c * a_stride + 32 * s));
            _Pragma("GCC unroll 4")
            for (int r = 0; r < 4; r++) {
                const uint8_t * o = blk + r * AVX2_DECODED_BLOCK;
                const __m256i v = _mm256_loadu_si256((const __m256i *)(o + 32 * s)), ls = _mm256_loadu_si256((const __m256i *)(o + 256 + 32 * s));
                _Pragma("GCC unroll 2")
                for (int c = 0; c < AR; c++) {
                    isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(iq1 ? _mm256_maddubs_epi16(v, as[c]) : _mm256_maddubs_epi16(as[c], v), ls));
                    /* (an empty asm that "changes" the sum: keeps GCC from reassociating the adds into a tree
                     * that computes all the products first and spills them) */
                    __asm__("" : "+x"(isum[r][c]));
                }
            }
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++)
            _Pragma("GCC unroll 2")
            for (int c = 0; c < AR; c++) {
                /* (d * da: the same float product as iq_avx2's) */
                const float d = ld_f32(blk + r * AVX2_DECODED_BLOCK + 544) * ld_f32(p + c * a_stride + 288);
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum[r][c]), acc[r][c]);
            }
    }
    _Pragma("GCC unroll 2")
    for (int c = 0; c < AR; c++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) out[c * out_stride + r] = iq_factor(type) * hsum_ps_avx2(acc[r][c]);
}

AVX2_INLINE void iq_decoded_rows_avx2(const int type, int64_t n, const uint8_t * decoded, const uint8_t * prepared, size_t a_stride, int64_t rows,
                                      float * out, int64_t out_stride) {
    int64_t c = 0;
    for (; c + 2 <= rows; c += 2) iq_decoded_tile_avx2(type, 2, n, decoded, prepared + c * a_stride, a_stride, out + c * out_stride, out_stride);
    if (c < rows) iq_decoded_tile_avx2(type, 1, n, decoded, prepared + c * a_stride, a_stride, out + c * out_stride, out_stride);
}

/* iq4_xs and iq4_nl decoded (the same route; their decoding, nibbles to levels and scales, costs about
 * what their products do): the levels v as the row kernels compute them, then those kernels' sequence on
 * them. iq4_xs per block and row: v[256] | scales - 32 (8 x int16) | d f32 | padding; |v| is taken again
 * for each activation row (keeping it too was measured ~15% slower). iq4_nl, whose float work per 32
 * values weighs more, keeps |v| (~6% faster): per block of 32 values v[32] | |v|[32] of rows 0..3 at
 * (4 * ib + r) * 64, then after all the blocks the four rows' d f32 at n / 32 * 256 + (4 * ib + r) * 4. */
enum { AVX2_IQ4_XS_DECODED_BLOCK = 320, AVX2_IQ4_NL_DECODED_BLOCK = 4 * (64 + 4) };

AVX2_FN void iq4_xs_avx2_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    for (int64_t ib = 0; ib < n / 256; ib++) {
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_XS_BYTES;
            uint8_t * o = decoded + (4 * ib + r) * AVX2_IQ4_XS_DECODED_BLOCK;
            for (int s = 0; s < 8; s++) {
                _mm256_storeu_si256((__m256i *)(o + 32 * s), _mm256_shuffle_epi8(table, nibbles32_avx2(xw + 8 + 16 * s)));
                st_u16(o + 256 + 2 * s, (uint16_t)(iq4xs_scale(xw, s) - 32));
            }
            st_f32(o + 272, f16_at_avx2(xw));
        }
    }
}

/* iq4_xs_avx2's sequence for four rows on decoded blocks. */
AVX2_FN void iq4_xs_avx2_decoded(int64_t n, const uint8_t * decoded, const uint8_t * a, float * out) {
    __m256 acc[4];
    for (int r = 0; r < 4; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        const float da = ld_f32(ya);
        for (int r = 0; r < 4; r++) {
            const uint8_t * o = decoded + (4 * ib + r) * AVX2_IQ4_XS_DECODED_BLOCK;
            __m256i isum = _mm256_setzero_si256();
            for (int s = 0; s < 8; s++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(o + 32 * s));
                const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(Q8K_VEC_AVX2(ya, s), v));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(ld_i16(o + 256 + 2 * s))));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(o + 272) * da), _mm256_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = hsum_ps_avx2(acc[r]);
}

AVX2_FN void iq4_nl_avx2_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_values));
    const int64_t nb = n / 32;
    for (int64_t ib = 0; ib < nb; ib++) {
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_NL_BYTES;
            uint8_t * o = decoded + (4 * ib + r) * 64;
            const __m256i v = _mm256_shuffle_epi8(table, nibbles32_avx2(xw + 2));
            _mm256_storeu_si256((__m256i *)o, v);
            _mm256_storeu_si256((__m256i *)(o + 32), _mm256_sign_epi8(v, v));
            st_f32(decoded + nb * 256 + (4 * ib + r) * 4, f16_at_avx2(xw));
        }
    }
}

/* blocks32_avx2's sequence (iq4_nl) for four rows on decoded blocks. */
AVX2_FN void iq4_nl_avx2_decoded(int64_t n, const uint8_t * decoded, const uint8_t * a, float * out) {
    const int64_t nb = n / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t * dw = decoded + nb * 256;
    __m256 acc[4];
    for (int r = 0; r < 4; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t * ya = a + ib * Q8_0_BYTES;
        const __m256i av = _mm256_loadu_si256((const __m256i *)(ya + 2));
        const float da = f16_at_avx2(ya);
        for (int r = 0; r < 4; r++) {
            const uint8_t * o = decoded + (4 * ib + r) * 64;
            const __m256i v = _mm256_loadu_si256((const __m256i *)o), u = _mm256_loadu_si256((const __m256i *)(o + 32));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(av, v)), ones));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(dw + (4 * ib + r) * 4) * da), p, acc[r]);
        }
    }
    /* (+ 0.0f: blocks32_avx2's sum of the q4_1 / q5_1 terms, none here) */
    for (int r = 0; r < 4; r++) out[r] = hsum_ps_avx2(acc[r]) + 0.0f;
}

/* --- f32 / f16 / bf16: 32 values per step in four accumulators --- */

AVX2_INLINE __m256 load8_avx2(const int type, const uint8_t * p, int64_t i) {
    if (type == MEMRA_TYPE_F32) return _mm256_loadu_ps((const float *)(const void *)(p + 4 * i));
    const __m128i h = _mm_loadu_si128((const __m128i *)(p + 2 * i));
    if (type == MEMRA_TYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2_INLINE float load1_float(const int type, const uint8_t * p, int64_t i) {
    return type == MEMRA_TYPE_F32 ? load_f32_at(p, i) : type == MEMRA_TYPE_F16 ? load_f16_at(p, i) : load_bf16_at(p, i);
}

AVX2_INLINE void float_rows_avx2(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    __m256 acc[4][4];
    float tail[4];
    for (int r = 0; r < nr; r++) {
        for (int k = 0; k < 4; k++) acc[r][k] = _mm256_setzero_ps();
        tail[r] = 0.0f;
    }
    int64_t i = 0;
    const int64_t esize = type == MEMRA_TYPE_F32 ? 4 : 2;
    for (; i + 32 <= n; i += 32) {
        if (nr == 4) prefetch_next_rows(w, stride, n * esize, i * esize, 32 * esize);
        __m256 av[4];
        for (int k = 0; k < 4; k++) av[k] = load8_avx2(type, a, i + 8 * k);
        for (int r = 0; r < nr; r++)
            for (int k = 0; k < 4; k++) acc[r][k] = _mm256_fmadd_ps(load8_avx2(type, w + r * stride, i + 8 * k), av[k], acc[r][k]);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 av = load8_avx2(type, a, i);
        for (int r = 0; r < nr; r++) acc[r][0] = _mm256_fmadd_ps(load8_avx2(type, w + r * stride, i), av, acc[r][0]);
    }
    for (; i < n; i++)
        for (int r = 0; r < nr; r++) tail[r] += load1_float(type, w + r * stride, i) * load1_float(type, a, i);
    for (int r = 0; r < nr; r++) {
        const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3]));
        out[r] = hsum_ps_avx2(s) + tail[r];
    }
}

/* --- one- and four-row entry points (ROWS_1_4: see the end of section 4) --- */

ROWS_1_4(q8_0_avx2, AVX2_FN, q8_0_avx2(NR, n, w, stride, a, out))
ROWS_1_4(q4_0_avx2, AVX2_FN, blocks32_avx2(MEMRA_TYPE_Q4_0, NR, n, w, stride, a, out))
ROWS_1_4(q4_1_avx2, AVX2_FN, blocks32_avx2(MEMRA_TYPE_Q4_1, NR, n, w, stride, a, out))
ROWS_1_4(q5_0_avx2, AVX2_FN, blocks32_avx2(MEMRA_TYPE_Q5_0, NR, n, w, stride, a, out))
ROWS_1_4(q5_1_avx2, AVX2_FN, blocks32_avx2(MEMRA_TYPE_Q5_1, NR, n, w, stride, a, out))
ROWS_1_4(iq4_nl_avx2, AVX2_FN, blocks32_avx2(MEMRA_TYPE_IQ4_NL, NR, n, w, stride, a, out))
ROWS_1_4(q2_K_avx2, AVX2_FN, q2_3_K_avx2(NR, 0, n, w, stride, a, out))
ROWS_1_4(q3_K_avx2, AVX2_FN, q2_3_K_avx2(NR, 1, n, w, stride, a, out))
ROWS_1_4(q4_K_avx2, AVX2_FN, q4_K_avx2(NR, 0, n, w, stride, a, out))
ROWS_1_4(q5_K_avx2, AVX2_FN, q4_K_avx2(NR, 1, n, w, stride, a, out))
ROWS_1_4(q6_K_avx2, AVX2_FN, q6_K_avx2(NR, n, w, stride, a, out))
ROWS_1_4(iq4_xs_avx2, AVX2_FN, iq4_xs_avx2(NR, n, w, stride, a, out))
ROWS_1_4(iq2_xxs_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ2_XXS, NR, n, w, stride, a, out))
ROWS_1_4(iq2_xs_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ2_XS, NR, n, w, stride, a, out))
ROWS_1_4(iq2_s_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ2_S, NR, n, w, stride, a, out))
ROWS_1_4(iq3_xxs_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ3_XXS, NR, n, w, stride, a, out))
ROWS_1_4(iq3_s_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ3_S, NR, n, w, stride, a, out))
ROWS_1_4(iq1_s_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ1_S, NR, n, w, stride, a, out))
ROWS_1_4(iq1_m_avx2, AVX2_FN, iq_avx2(MEMRA_TYPE_IQ1_M, NR, n, w, stride, a, out))
/* The decoded-rows entry points of an i-quant on AVX2 (iq_decode_rows4_avx2 and the tiles above). */
#define IQ_DECODED_AVX2(name, type)                                                                    \
    AVX2_FN void name##_avx2_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * d) {         \
        iq_decode_rows4_avx2(type, n, w, stride, d);                                                   \
    }                                                                                                  \
    AVX2_FN void name##_avx2_prepare(int64_t n, const uint8_t * a, uint8_t * p) { iq_prepare_rows_avx2(type, n, a, p); } \
    AVX2_FN void name##_avx2_decoded(int64_t n, const uint8_t * d, const uint8_t * a, float * out) {   \
        iq_decoded_tile_avx2(type, 1, n, d, a, 0, out, 0);                                             \
    }                                                                                                  \
    AVX2_FN void name##_avx2_decoded_rows(int64_t n, const uint8_t * d, const uint8_t * a, size_t a_stride, int64_t rows, float * out, \
                                          int64_t out_stride) {                                        \
        iq_decoded_rows_avx2(type, n, d, a, a_stride, rows, out, out_stride);                          \
    }
IQ_DECODED_AVX2(iq2_xxs, MEMRA_TYPE_IQ2_XXS)
IQ_DECODED_AVX2(iq2_xs, MEMRA_TYPE_IQ2_XS)
IQ_DECODED_AVX2(iq2_s, MEMRA_TYPE_IQ2_S)
IQ_DECODED_AVX2(iq3_xxs, MEMRA_TYPE_IQ3_XXS)
IQ_DECODED_AVX2(iq3_s, MEMRA_TYPE_IQ3_S)
IQ_DECODED_AVX2(iq1_s, MEMRA_TYPE_IQ1_S)
IQ_DECODED_AVX2(iq1_m, MEMRA_TYPE_IQ1_M)
ROWS_1_4(f32_avx2, AVX2_FN, float_rows_avx2(MEMRA_TYPE_F32, NR, n, w, stride, a, out))
ROWS_1_4(f16_avx2, AVX2_FN, float_rows_avx2(MEMRA_TYPE_F16, NR, n, w, stride, a, out))
ROWS_1_4(bf16_avx2, AVX2_FN, float_rows_avx2(MEMRA_TYPE_BF16, NR, n, w, stride, a, out))

/* ============================================================================================== */
/* 6. x86 AVX-512 (F, BW, VL, DQ, VNNI)                                                           */
/* ============================================================================================== */

AVX512_INLINE float f16_at_avx512(const uint8_t * p) { return _cvtsh_ss(ld_u16(p)); }

/* The f16 fields at p, p+step, p+2*step, p+3*step as 4 floats. */
AVX512_INLINE __m128 f16x4_avx512(const uint8_t * p, size_t step) {
    __m128i h = _mm_cvtsi32_si128(ld_u16(p));
    h = _mm_insert_epi16(h, ld_u16(p + step), 1);
    h = _mm_insert_epi16(h, ld_u16(p + 2 * step), 2);
    h = _mm_insert_epi16(h, ld_u16(p + 3 * step), 3);
    return _mm_cvtph_ps(h);
}

/* 16 bytes from each of p, p+step, p+2*step, p+3*step, in the four 128-bit lanes. */
AVX512_INLINE __m512i load4x16_avx512(const uint8_t * p, size_t step) {
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + step)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 2 * step)), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 3 * step)), 3);
}

/* 32 bytes at p in the low half, 32 bytes at q in the high half. */
AVX512_INLINE __m512i load2x32_avx512(const uint8_t * p, const uint8_t * q) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)), _mm256_loadu_si256((const __m256i *)q), 1);
}

/* The same 32 bytes in both halves. */
AVX512_INLINE __m512i load32_twice_avx512(const uint8_t * p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* pshufb control giving, per 128-bit lane i, 16-bit element e_i of that lane repeated 8 times. */
AVX512_INLINE __m512i pick16_avx512(int e0, int e1, int e2, int e3) {
    const int w0 = (0x0100 + 0x0202 * e0) * 0x10001, w1 = (0x0100 + 0x0202 * e1) * 0x10001;
    const int w2 = (0x0100 + 0x0202 * e2) * 0x10001, w3 = (0x0100 + 0x0202 * e3) * 0x10001;
    return _mm512_set_epi32(w3, w3, w3, w3, w2, w2, w2, w2, w1, w1, w1, w1, w0, w0, w0, w0);
}

/* Per-256-bit-half byte constants. */
AVX512_INLINE __m512i halves_epi8(char lo, char hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(lo)), _mm256_set1_epi8(hi), 1);
}
AVX512_INLINE __m512i halves_epi16(short lo, short hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(lo)), _mm256_set1_epi16(hi), 1);
}

AVX512_INLINE float hsum128_ps(__m128 m) {
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* --- q8_0: four blocks per step; w+128 (xor 0x80) times a with vpdpbusd, minus 128*sum(a) --- */

/* Four activation blocks as the q8_0 step uses them, shared by every row (q8_0_prepare). */
typedef struct {
    __m512i a01, a23;       /* blocks 0,1 and 2,3: values in 256-bit halves */
    __m512i base01, base23; /* -128 * (sum of each 4 activations): vpdpbusd's starting values */
    __m128 da;              /* the four f16 scales */
} q8_0_act;

AVX512_INLINE void q8_0_prepare(const uint8_t * ya, q8_0_act * p) {
    const __m512i x80 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    p->a01 = load2x32_avx512(ya + 2, ya + Q8_0_BYTES + 2);
    p->a23 = load2x32_avx512(ya + 2 * Q8_0_BYTES + 2, ya + 3 * Q8_0_BYTES + 2);
    p->base01 = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, x80, p->a01));
    p->base23 = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, x80, p->a23));
    p->da = f16x4_avx512(ya, Q8_0_BYTES);
}

/* Four weight blocks of one row against the prepared activations, added to the row's acc. */
AVX512_INLINE void q8_0_step(const uint8_t * xw, const q8_0_act * p, __m512 * acc) {
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    const __m512i lanes01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i lanes23 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512i w01 = _mm512_xor_si512(load2x32_avx512(xw + 2, xw + Q8_0_BYTES + 2), x80);
    const __m512i w23 = _mm512_xor_si512(load2x32_avx512(xw + 2 * Q8_0_BYTES + 2, xw + 3 * Q8_0_BYTES + 2), x80);
    const __m512 d = _mm512_castps128_ps512(_mm_mul_ps(f16x4_avx512(xw, Q8_0_BYTES), p->da));
    const __m512i s01 = _mm512_dpbusd_epi32(p->base01, w01, p->a01);
    const __m512i s23 = _mm512_dpbusd_epi32(p->base23, w23, p->a23);
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), _mm512_permutexvar_ps(lanes01, d), *acc);
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s23), _mm512_permutexvar_ps(lanes23, d), *acc);
}

AVX512_INLINE void q8_0_avx512(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int64_t nb = n / 32, nb4 = nb & ~(int64_t)3;
    __m512 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb4; ib += 4) {
        if (nr == 4) prefetch_next_rows(w, stride, nb * Q8_0_BYTES, ib * Q8_0_BYTES, 4 * Q8_0_BYTES);
        q8_0_act p;
        q8_0_prepare(a + ib * Q8_0_BYTES, &p);
        for (int r = 0; r < nr; r++) q8_0_step(w + r * stride + ib * Q8_0_BYTES, &p, &acc[r]);
    }
    for (int r = 0; r < nr; r++) {
        float sum = _mm512_reduce_add_ps(acc[r]);
        for (int64_t ib = nb4; ib < nb; ib++) sum += blk_q8_0(w + r * stride + ib * Q8_0_BYTES, a + ib * Q8_0_BYTES);
        out[r] = sum;
    }
}

/* A matrix-vector product: the activation groups prepared once for all rows; each row runs
 * q8_0_avx512's one-row sequence (the same bits). Rows of more than Q8_0_PREPARED_GROUPS groups of
 * four blocks go row by row. */
enum { Q8_0_PREPARED_GROUPS = 128 };
AVX512_INLINE void q8_0_many_avx512(int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) {
    const int64_t nb = n / 32, groups = nb / 4, nb4 = 4 * groups;
    if (groups > Q8_0_PREPARED_GROUPS) {
        for (int64_t r = 0; r < rows; r++) q8_0_avx512(1, n, w + r * stride, stride, a, out + r);
        return;
    }
    q8_0_act prepared[Q8_0_PREPARED_GROUPS];
    for (int64_t g = 0; g < groups; g++) q8_0_prepare(a + 4 * g * Q8_0_BYTES, &prepared[g]);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t * row = w + r * stride;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t g = 0; g < groups; g++) {
            /* Rows four ahead into L1 while this one is summed: the hardware prefetcher alone left
             * one core at ~7 GB/s on a decode's weights (the 0.6B shape's matmuls ~13% faster). */
            prefetch_ahead(row + 4 * (int64_t)stride + 4 * g * Q8_0_BYTES, 4 * Q8_0_BYTES);
            q8_0_step(row + 4 * g * Q8_0_BYTES, &prepared[g], &acc);
        }
        float sum = _mm512_reduce_add_ps(acc);
        for (int64_t ib = nb4; ib < nb; ib++) sum += blk_q8_0(row + ib * Q8_0_BYTES, a + ib * Q8_0_BYTES);
        out[r] = sum;
    }
}

/* --- q4_0, q4_1, q5_0, q5_1, iq4_nl: four blocks per step ---
 * Lane i (128 bits) of `lo` holds block i's values 0..15 as unsigned bytes, of `hi` its values 16..31;
 * the activations are rearranged the same way once per step and shared by the rows. */

/* Four activation blocks as blocks32's step uses them, shared by every row (blocks32_prepare). */
typedef struct {
    __m512i alo, ahi; /* lane i: block i's values 0..15, 16..31 */
    __m512i base;     /* -offset * (sum of each 4 activations): vpdpbusd's starting value */
    __m128 da, sa;    /* the four f16 scales (and q8_1 sums) */
} blocks32_act;

/* unsigned code = value + offset (iq4_nl: its level + 128) */
static inline int blocks32_offset(int type) {
    return type == MEMRA_TYPE_Q4_0 ? 8 : type == MEMRA_TYPE_Q5_0 ? 16 : type == MEMRA_TYPE_IQ4_NL ? 128 : 0;
}

AVX512_INLINE void blocks32_prepare(const int type, const uint8_t * ya, blocks32_act * p) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int abytes = has_min ? Q8_1_BYTES : Q8_0_BYTES, aq_at = has_min ? 4 : 2;
    const int offset = blocks32_offset(type);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i a01 = load2x32_avx512(ya + aq_at, ya + abytes + aq_at);
    const __m512i a23 = load2x32_avx512(ya + 2 * abytes + aq_at, ya + 3 * abytes + aq_at);
    p->alo = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
    p->ahi = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
    p->base = zero;
    if (offset) {
        const __m512i off = _mm512_set1_epi8((char)offset);
        p->base = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, off, p->alo), off, p->ahi));
    }
    p->da = f16x4_avx512(ya, abytes);
    p->sa = has_min ? f16x4_avx512(ya + 2, abytes) : _mm_setzero_ps();
}

/* Four weight blocks of one row against the prepared activations, added to the row's acc and macc. */
AVX512_INLINE void blocks32_step(const int type, const uint8_t * xw, const blocks32_act * p, __m512 * acc, __m128 * macc) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int has_qh = type == MEMRA_TYPE_Q5_0 || type == MEMRA_TYPE_Q5_1;
    const int wbytes = block_bytes(type);
    const int qh_at = has_min ? 4 : 2, qs_at = (has_min ? 4 : 2) + (has_qh ? 4 : 0);
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i lanes = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i q = load4x16_avx512(xw + qs_at, wbytes);
    __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (has_qh) {
        uint64_t bits_lo = 0, bits_hi = 0;
        for (int b = 0; b < 4; b++) {
            const uint32_t qh = ld_u32(xw + b * wbytes + qh_at);
            bits_lo |= (uint64_t)(qh & 0xffffu) << (16 * b);
            bits_hi |= (uint64_t)(qh >> 16) << (16 * b);
        }
        const __m512i sixteen = _mm512_set1_epi8(16);
        lo = _mm512_mask_add_epi8(lo, (__mmask64)bits_lo, lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, (__mmask64)bits_hi, hi, sixteen);
    }
    if (type == MEMRA_TYPE_IQ4_NL) {
        const __m512i levels = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_values)), _mm512_set1_epi8((char)0x80));
        lo = _mm512_shuffle_epi8(levels, lo);
        hi = _mm512_shuffle_epi8(levels, hi);
    }
    const __m512i isum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(p->base, lo, p->alo), hi, p->ahi);
    const __m512 d = _mm512_castps128_ps512(_mm_mul_ps(f16x4_avx512(xw, wbytes), p->da));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_permutexvar_ps(lanes, d), *acc);
    if (has_min) *macc = _mm_fmadd_ps(f16x4_avx512(xw + 2, wbytes), p->sa, *macc);
}

/* A row's blocks past the last full group of four (scalar, as ggml's per-block formula). */
static inline float blocks32_tail(const int type, int64_t nb4, int64_t nb, const uint8_t * row, const uint8_t * a) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int wbytes = block_bytes(type), abytes = has_min ? Q8_1_BYTES : Q8_0_BYTES;
    float sum = 0.0f;
    for (int64_t ib = nb4; ib < nb; ib++) {
        const uint8_t * xw = row + ib * wbytes, * ya = a + ib * abytes;
        switch (type) {
        case MEMRA_TYPE_Q4_0: sum += blk_q4_0(xw, ya); break;
        case MEMRA_TYPE_Q4_1: sum += blk_q4_1(xw, ya); break;
        case MEMRA_TYPE_Q5_0: sum += blk_q5_0(xw, ya); break;
        case MEMRA_TYPE_Q5_1: sum += blk_q5_1(xw, ya); break;
        default: sum += blk_iq4_nl(xw, ya); break;
        }
    }
    return sum;
}

AVX512_INLINE void blocks32_avx512(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int wbytes = block_bytes(type), abytes = has_min ? Q8_1_BYTES : Q8_0_BYTES;
    const int64_t nb = n / 32, nb4 = nb & ~(int64_t)3;
    __m512 acc[4];
    __m128 macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = _mm512_setzero_ps(); macc[r] = _mm_setzero_ps(); }
    for (int64_t ib = 0; ib < nb4; ib += 4) {
        if (nr == 4) prefetch_next_rows(w, stride, nb * wbytes, ib * wbytes, 4 * wbytes);
        blocks32_act p;
        blocks32_prepare(type, a + ib * abytes, &p);
        for (int r = 0; r < nr; r++) blocks32_step(type, w + r * stride + ib * wbytes, &p, &acc[r], &macc[r]);
    }
    for (int r = 0; r < nr; r++) {
        float sum = _mm512_reduce_add_ps(acc[r]) + (has_min ? hsum128_ps(macc[r]) : 0.0f);
        out[r] = sum + blocks32_tail(type, nb4, nb, w + r * stride, a);
    }
}

/* A matrix-vector product: the activation steps prepared once for all rows, each row running
 * blocks32_avx512's one-row sequence (the same bits); rows of more than BLOCKS32_PREPARED steps go row by row. */
enum { BLOCKS32_PREPARED = 128 };
AVX512_INLINE void blocks32_many_avx512(const int type, int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int wbytes = block_bytes(type), abytes = has_min ? Q8_1_BYTES : Q8_0_BYTES;
    const int64_t nb = n / 32, steps = nb / 4, nb4 = 4 * steps;
    if (steps > BLOCKS32_PREPARED) {
        for (int64_t r = 0; r < rows; r++) blocks32_avx512(type, 1, n, w + r * stride, stride, a, out + r);
        return;
    }
    blocks32_act prepared[BLOCKS32_PREPARED];
    for (int64_t k = 0; k < steps; k++) blocks32_prepare(type, a + 4 * k * abytes, &prepared[k]);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t * row = w + r * stride;
        __m512 acc = _mm512_setzero_ps();
        __m128 macc = _mm_setzero_ps();
        for (int64_t k = 0; k < steps; k++) {
            prefetch_ahead(row + 4 * (int64_t)stride + 4 * k * wbytes, 4 * wbytes);
            blocks32_step(type, row + 4 * k * wbytes, &prepared[k], &acc, &macc);
        }
        float sum = _mm512_reduce_add_ps(acc) + (has_min ? hsum128_ps(macc) : 0.0f);
        out[r] = sum + blocks32_tail(type, nb4, nb, row, a);
    }
}

/* --- K-quants: 64 unsigned codes per vector, vpmaddubsw with the activations, then vpdpwssd with the
 * sub-block scales (broadcast per 128-bit lane with pshufb); the float scale is applied once per
 * super-block. --- */

/* q8_K activation values 64*k .. 64*k+63 */
#define Q8K_VEC_AVX512(ya, k) _mm512_loadu_si512((const void *)((ya) + Q8K_QS + 64 * (k)))

/* q4_K / q5_K. Codes of 64 qs bytes (values 128h .. 128h+127): the low nibbles are values
 * [128h+0..31 | 128h+64..95] (sub-blocks 4h, 4h+2), the high nibbles [128h+32..63 | 128h+96..127]
 * (sub-blocks 4h+1, 4h+3); the activations are rearranged to match, once per super-block for all the
 * rows that use them (q4k_prepare), and each row's super-block is then q4k_block. */
typedef struct {
    __m512i alo[2], ahi[2]; /* the activation bytes in the order of the code vectors */
    __m128i bs32;           /* the eight 32-value sums (int16) */
    float da;
} q4k_act;

AVX512_INLINE void q4k_prepare(const uint8_t * ya, q4k_act * p) {
    p->da = ld_f32(ya);
    for (int h = 0; h < 2; h++) {
        const __m512i z0 = Q8K_VEC_AVX512(ya, 2 * h), z1 = Q8K_VEC_AVX512(ya, 2 * h + 1);
        p->alo[h] = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(1, 0, 1, 0));
        p->ahi[h] = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 2, 3, 2));
    }
    p->bs32 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(ya + Q8K_BSUMS)), _mm_loadu_si128((const __m128i *)(ya + Q8K_BSUMS + 16)));
}

/* One row's super-block xw against the prepared activations: adds to the row's acc and mins term. */
AVX512_INLINE void q4k_block(const int with_qh, const uint8_t * xw, const q4k_act * p, __m512 * acc, __m128 * macc) {
    const int qs_at = with_qh ? 48 : 16;
    const __m512i m4 = _mm512_set1_epi8(15), sixteen = _mm512_set1_epi8(16);
    uint64_t scales, mins;
    q4k_scales_mins(xw + 4, &scales, &mins);
    const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scales)));
    const __m512i qh = with_qh ? load32_twice_avx512(xw + 16) : _mm512_setzero_si512();
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m512i q = _mm512_loadu_si512((const void *)(xw + qs_at + 64 * h));
        __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        if (with_qh) {
            /* fifth bit: qh bit 2c for values 64c..64c+31, bit 2c+1 for 64c+32..64c+63 */
            const __mmask64 mlo = _mm512_test_epi8_mask(qh, halves_epi8((char)(1 << (4 * h)), (char)(1 << (4 * h + 2))));
            const __mmask64 mhi = _mm512_test_epi8_mask(qh, halves_epi8((char)(1 << (4 * h + 1)), (char)(1 << (4 * h + 3))));
            lo = _mm512_mask_add_epi8(lo, mlo, lo, sixteen);
            hi = _mm512_mask_add_epi8(hi, mhi, hi, sixteen);
        }
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(lo, p->alo[h]), _mm512_shuffle_epi8(sc, pick16_avx512(4 * h, 4 * h, 4 * h + 2, 4 * h + 2)));
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(hi, p->ahi[h]), _mm512_shuffle_epi8(sc, pick16_avx512(4 * h + 1, 4 * h + 1, 4 * h + 3, 4 * h + 3)));
    }
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(f16_at_avx512(xw) * p->da), *acc);
    const __m128i m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mins)), p->bs32);
    *macc = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(f16_at_avx512(xw + 2) * p->da), *macc);
}

AVX512_INLINE void q4_K_avx512(const int nr, const int with_qh, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int wbytes = with_qh ? Q5_K_BYTES : Q4_K_BYTES;
    __m512 acc[4];
    __m128 macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = _mm512_setzero_ps(); macc[r] = _mm_setzero_ps(); }
    for (int64_t ib = 0; ib < n / 256; ib++) {
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        q4k_act p;
        q4k_prepare(a + ib * Q8_K_BYTES, &p);
        for (int r = 0; r < nr; r++) q4k_block(with_qh, w + r * stride + ib * wbytes, &p, &acc[r], &macc[r]);
    }
    for (int r = 0; r < nr; r++) out[r] = _mm512_reduce_add_ps(acc[r]) - hsum128_ps(macc[r]);
}

/* Many rows against one activation row (a matrix-vector product): the activations are prepared once
 * for all rows, and each row runs q4_K_avx512's one-row sequence, so the results are bit for bit
 * memra_dot_row's. Rows longer than Q4K_PREPARED_BLOCKS super-blocks go row by row. */
enum { Q4K_PREPARED_BLOCKS = 64 };
AVX512_INLINE void q4_K_many_avx512(const int with_qh, int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) {
    const int wbytes = with_qh ? Q5_K_BYTES : Q4_K_BYTES;
    const int64_t blocks = n / 256;
    if (blocks > Q4K_PREPARED_BLOCKS) {
        for (int64_t r = 0; r < rows; r++) q4_K_avx512(1, with_qh, n, w + r * stride, stride, a, out + r);
        return;
    }
    q4k_act prepared[Q4K_PREPARED_BLOCKS];
    for (int64_t ib = 0; ib < blocks; ib++) q4k_prepare(a + ib * Q8_K_BYTES, &prepared[ib]);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t * row = w + r * stride;
        __m512 acc = _mm512_setzero_ps();
        __m128 macc = _mm_setzero_ps();
        for (int64_t ib = 0; ib < blocks; ib++) {
            prefetch_ahead(row + 4 * (int64_t)stride + ib * wbytes, wbytes);
            q4k_block(with_qh, row + ib * wbytes, &prepared[ib], &acc, &macc);
        }
        out[r] = _mm512_reduce_add_ps(acc) - hsum128_ps(macc);
    }
}

/* q6_K. Half k: the 64 bytes ql[64k..] give values 128k+0..63 (low nibbles) and 128k+64..127 (high
 * nibbles); the 2-bit high parts come from qh[32k..32k+31] shifted per 256-bit half. */
AVX512_INLINE void q6_K_avx512(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    const __m512i shift_a = halves_epi16(4, 2), shift_b = halves_epi16(0, 2);
    __m512 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * Q6_K_BYTES, ib * Q6_K_BYTES, Q6_K_BYTES);
        const float da = ld_f32(ya);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)(ya + Q8K_BSUMS));
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * Q6_K_BYTES;
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xw + 192)));
            /* the -32 offset: 32 * sum(scale * bsum) */
            const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
            __m512i isum = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_sub_epi32(_mm256_setzero_si256(), offset), 0);
            for (int k = 0; k < 2; k++) {
                const __m512i L = _mm512_loadu_si512((const void *)(xw + 64 * k));
                const __m512i H = load32_twice_avx512(xw + 128 + 32 * k);
                const __m512i sc = _mm512_broadcast_i32x4(k ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
                const __m512i ua = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, shift_a), m30));
                const __m512i ub = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(H, shift_b), m30));
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(ua, Q8K_VEC_AVX512(ya, 2 * k)), _mm512_shuffle_epi8(sc, pick16_avx512(0, 1, 2, 3)));
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(ub, Q8K_VEC_AVX512(ya, 2 * k + 1)), _mm512_shuffle_epi8(sc, pick16_avx512(4, 5, 6, 7)));
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(f16_at_avx512(xw + 208) * da), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}

/* q2_K and q3_K. Vector (k, h) holds values 128k + 64h + 0..63: 2-bit fields 2*(2h) (low 256 bits) and
 * 2*(2h+1) (high 256 bits) of qs[32k..32k+31], plus for q3_K hmask bits 4k+2h / 4k+2h+1 as +4. */
AVX512_INLINE void q2_3_K_avx512(const int nr, const int q3, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int wbytes = q3 ? Q3_K_BYTES : Q2_K_BYTES, qs_at = q3 ? 32 : 16;
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    __m512 acc[4];
    __m256 macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = _mm512_setzero_ps(); macc[r] = _mm256_setzero_ps(); }
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)(ya + Q8K_BSUMS));
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            __m256i sc16;
            __m512i isum;
            if (q3) {
                sc16 = _mm256_cvtepi8_epi16(q3k_scales_sse(xw + 96));
                const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 2);
                isum = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_sub_epi32(_mm256_setzero_si256(), offset), 0);
            } else {
                const __m128i raw = _mm_loadu_si128((const __m128i *)xw);
                sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(15)));
                const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
                macc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)), _mm256_set1_ps(f16_at_avx512(xw + 82) * da), macc[r]);
                isum = _mm512_setzero_si512();
            }
            const __m512i hm = q3 ? load32_twice_avx512(xw) : _mm512_setzero_si512();
            for (int k = 0; k < 2; k++) {
                const __m512i q = load32_twice_avx512(xw + qs_at + 32 * k);
                const __m512i sc = _mm512_broadcast_i32x4(k ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
                for (int h = 0; h < 2; h++) {
                    __m512i u = _mm512_and_si512(_mm512_srlv_epi16(q, halves_epi16((short)(4 * h), (short)(4 * h + 2))), m3);
                    if (q3) {
                        const __mmask64 hb = _mm512_test_epi8_mask(hm, halves_epi8((char)(1 << (4 * k + 2 * h)), (char)(1 << (4 * k + 2 * h + 1))));
                        u = _mm512_mask_add_epi8(u, hb, u, four);
                    }
                    const __m512i p = _mm512_maddubs_epi16(u, Q8K_VEC_AVX512(ya, 2 * k + h));
                    isum = _mm512_dpwssd_epi32(isum, p, _mm512_shuffle_epi8(sc, pick16_avx512(4 * h, 4 * h + 1, 4 * h + 2, 4 * h + 3)));
                }
            }
            const float dw = f16_at_avx512(xw + (q3 ? 108 : 80));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dw * da), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) {
        float sum = _mm512_reduce_add_ps(acc[r]);
        if (!q3) {
            const __m256 m = macc[r];
            sum -= hsum128_ps(_mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1)));
        }
        out[r] = sum;
    }
}

/* iq4_xs. 64 qs bytes hold sub-blocks 4c..4c+3 (one per 128-bit lane): low nibbles their values 0..15,
 * high nibbles values 16..31. Levels + 128 with vpdpbusd, minus 128*sum(a), times the sub-block scale. */
AVX512_INLINE void iq4_xs_avx512(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const __m512i m4 = _mm512_set1_epi8(15), x80 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const __m512i levels = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_values)), x80);
    const __m256i low_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), high_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i lanes0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i lanes1 = _mm512_set_epi32(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4);
    __m512 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * IQ4_XS_BYTES, ib * IQ4_XS_BYTES, IQ4_XS_BYTES);
        const float da = ld_f32(ya);
        __m512i alo[2], ahi[2], base[2];
        for (int c = 0; c < 2; c++) {
            const __m512i z0 = Q8K_VEC_AVX512(ya, 2 * c), z1 = Q8K_VEC_AVX512(ya, 2 * c + 1);
            alo[c] = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(2, 0, 2, 0));
            ahi[c] = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
            base[c] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, x80, alo[c]), x80, ahi[c]));
        }
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_XS_BYTES;
            /* the 8 scales: low 4 bits from scales_l nibble ib, high 2 bits from scales_h bits 2ib */
            const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)ld_u32(xw + 4)), low_shift), _mm256_set1_epi32(15));
            const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(ld_u16(xw + 2)), high_shift), _mm256_set1_epi32(3));
            const __m512i ls = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32)));
            __m512i isum = _mm512_setzero_si512();
            for (int c = 0; c < 2; c++) {
                const __m512i q = _mm512_loadu_si512((const void *)(xw + 8 + 64 * c));
                const __m512i lo = _mm512_shuffle_epi8(levels, _mm512_and_si512(q, m4));
                const __m512i hi = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
                const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(base[c], lo, alo[c]), hi, ahi[c]);
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, _mm512_permutexvar_epi32(c ? lanes1 : lanes0, ls)));
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(f16_at_avx512(xw) * da), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}

/* --- i-quants: 64 values (two sub-blocks) per step. Per block and row, the sign bytes of the types that
 * pack 7 bits per group (and iq3_s's grid indices) are computed for the whole block with vector
 * instructions into a small array; then each step loads its 8 grid entries (16 for iq3) into one
 * vector, negates the activations under the weights' sign bits (a mask register), multiplies them with
 * the unsigned magnitudes (vpmaddubsw) and applies the scales of 16 values with vpdpwssd (broadcast per
 * 128-bit lane). On Zen 5, loading the grid entries one by one was measured faster than vpgatherdq /
 * vpgatherdd, and computing most indices with scalar instructions faster than in vectors. --- */

/* The block's 16 scales in the order of iq_scales_avx2, each in both 16-bit halves of a dword. */
AVX512_INLINE __m512i iq_scales_avx512(const int type, const uint8_t * xw) {
    const __m512i s = _mm512_cvtepu16_epi32(iq_scales_avx2(type, xw));
    return _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
}

/* The sign bytes of a block's 32 groups of 8 (bit j set: value j negative), for the types that pack 7
 * bits per group (iq2_xxs, iq3_xxs: four fields per u32; iq2_xs: the top of each u16): the fields
 * spread to bytes, then the parity bit of ksigns_iq2xs added. */
AVX512_INLINE __m256i iq_sign_bytes_avx512(const int type, const uint8_t * xw) {
    const __m256i parity = _mm256_setr_epi8(IQ_PARITY_BYTES, IQ_PARITY_BYTES);
    __m256i x;
    if (type == MEMRA_TYPE_IQ2_XS) {
        x = _mm512_cvtepi16_epi8(_mm512_srli_epi16(_mm512_loadu_si512((const void *)(xw + 2)), 9));
    } else {
        /* the 8 u32 of the sub-blocks */
        const __m256i a = type == MEMRA_TYPE_IQ2_XXS ? _mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_loadu_si512((const void *)(xw + 2)), 32))
                                                     : _mm256_loadu_si256((const __m256i *)(xw + 66));
        /* (ternary logic 0xf8: a | (b & c)) */
        x = _mm256_and_si256(a, _mm256_set1_epi32(0x7f));
        x = _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(a, 1), _mm256_set1_epi32(0x7f00), 0xf8);
        x = _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x7f0000), 0xf8);
        x = _mm256_ternarylogic_epi32(x, _mm256_slli_epi32(a, 3), _mm256_set1_epi32(0x7f000000), 0xf8);
    }
    const __m256i t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi16(x, 4)), _mm256_set1_epi8(15));
    return _mm256_or_si256(x, _mm256_shuffle_epi8(parity, t));
}

/* What iq_prepare_avx512 computes for one block of one row (vector stores, read back by the steps). */
typedef struct {
    uint64_t signs[4];  /* iq2_xxs, iq2_xs, iq3_xxs: the sign bits of values 64c .. 64c+63 */
    uint16_t index[64]; /* iq3_s: the grid index of each group of 4 values */
} iq_prep;

AVX512_INLINE void iq_prepare_avx512(const int type, const uint8_t * xw, iq_prep * p) {
    switch (type) {
    case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ2_XS: case MEMRA_TYPE_IQ3_XXS: /* (their steps read the grid indices) */
        _mm256_storeu_si256((__m256i *)(void *)p->signs, iq_sign_bytes_avx512(type, xw));
        break;
    case MEMRA_TYPE_IQ3_S: { /* index bit 8 of group k: bit k of the u64 qh */
        const uint64_t qh = ld_u64(xw + 66);
        const __m512i v256 = _mm512_set1_epi16(256);
        const __m512i lo = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(xw + 2)));
        const __m512i hi = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(xw + 34)));
        _mm512_storeu_si512((void *)p->index, _mm512_mask_add_epi16(lo, _cvtu32_mask32((uint32_t)qh), lo, v256));
        _mm512_storeu_si512((void *)(p->index + 32), _mm512_mask_add_epi16(hi, _cvtu32_mask32((uint32_t)(qh >> 32)), hi, v256));
        break;
    }
    default: /* iq2_s, iq1_s, iq1_m: their steps assemble the grid indices */
        break;
    }
}

/* The 8-byte grid entries at the 8 indices as one vector. */
#define IQ_GRID8(grid, ix)                                                                                                        \
    _mm512_set_epi64((long long)(grid)[(ix)[7]], (long long)(grid)[(ix)[6]], (long long)(grid)[(ix)[5]], (long long)(grid)[(ix)[4]], \
                     (long long)(grid)[(ix)[3]], (long long)(grid)[(ix)[2]], (long long)(grid)[(ix)[1]], (long long)(grid)[(ix)[0]])
/* The 4-byte grid entries at the 16 indices. */
#define IQ_GRID16(grid, ix)                                                                                                            \
    _mm512_set_epi32((int)(grid)[(ix)[15]], (int)(grid)[(ix)[14]], (int)(grid)[(ix)[13]], (int)(grid)[(ix)[12]], (int)(grid)[(ix)[11]], \
                     (int)(grid)[(ix)[10]], (int)(grid)[(ix)[9]], (int)(grid)[(ix)[8]], (int)(grid)[(ix)[7]], (int)(grid)[(ix)[6]],     \
                     (int)(grid)[(ix)[5]], (int)(grid)[(ix)[4]], (int)(grid)[(ix)[3]], (int)(grid)[(ix)[2]], (int)(grid)[(ix)[1]],      \
                     (int)(grid)[(ix)[0]])

/* Values 64c .. 64c+63 of one block: u (unsigned magnitudes, or iq1 codes) and the sign mask. */
AVX512_INLINE __m512i iq_decode_avx512(const int type, const uint8_t * xw, int c, const iq_prep * p, __mmask64 * neg) {
    switch (type) {
    case MEMRA_TYPE_IQ2_XXS: {
        const uint8_t * q = xw + 2 + 16 * c; /* grid indices in bytes 0..3 and 8..11 */
        const uint8_t ix[8] = { q[0], q[1], q[2], q[3], q[8], q[9], q[10], q[11] };
        *neg = _cvtu64_mask64(p->signs[c]);
        return IQ_GRID8(memra_iq2xxs_grid, ix);
    }
    case MEMRA_TYPE_IQ2_XS: /* (the two sub-blocks as the AVX2 path decodes them) */
        *neg = _cvtu64_mask64(p->signs[c]);
        return _mm512_inserti64x4(_mm512_castsi256_si512(iq_decode_avx2(type, xw, 2 * c)), iq_decode_avx2(type, xw, 2 * c + 1), 1);
    case MEMRA_TYPE_IQ2_S: {
        const uint8_t * q = xw + 2 + 8 * c;
        const unsigned h0 = xw[66 + 2 * c], h1 = xw[67 + 2 * c];
        const unsigned ix[8] = { q[0] | ((h0 << 8) & 0x300), q[1] | ((h0 << 6) & 0x300), q[2] | ((h0 << 4) & 0x300), q[3] | ((h0 << 2) & 0x300),
                                 q[4] | ((h1 << 8) & 0x300), q[5] | ((h1 << 6) & 0x300), q[6] | ((h1 << 4) & 0x300), q[7] | ((h1 << 2) & 0x300) };
        *neg = _cvtu64_mask64(ld_u64(xw + 34 + 8 * c));
        return IQ_GRID8(memra_iq2s_grid, ix);
    }
    case MEMRA_TYPE_IQ3_XXS:
        *neg = _cvtu64_mask64(p->signs[c]);
        return IQ_GRID16(memra_iq3xxs_grid, xw + 2 + 16 * c);
    case MEMRA_TYPE_IQ3_S:
        *neg = _cvtu64_mask64(ld_u64(xw + 74 + 8 * c));
        return IQ_GRID16(memra_iq3s_grid, p->index + 16 * c);
    default: /* iq1_s, iq1_m: the two sub-blocks as the AVX2 path decodes them */
        *neg = 0;
        return _mm512_inserti64x4(_mm512_castsi256_si512(iq_decode_avx2(type, xw, 2 * c)), iq_decode_avx2(type, xw, 2 * c + 1), 1);
    }
}

/* The float steps of the AVX-512 i-quant kernels (the row kernels and the decoded tiles alike): per block,
 * the block's integer sum (exact: the sum of scale * sum(value * a) over its 16 groups, iq1 with its
 * delta) converted to float once, then acc = fma(that, d_w * d_a, acc), block after block, and the row's
 * result iq_factor(type) * acc: ggml's per-block formula, summed in the order of the blocks. */

/* The sum of the 16 int32 lanes of x, in dword 0. (Summing four blocks' vectors at once in a tree of
 * 512-bit unpacks measured ~10% slower in the one-row kernel.) */
AVX512_INLINE __m128i iq_sum16_avx512(__m512i x) {
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1));
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
}

AVX512_INLINE void iq_avx512(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    const int wbytes = block_bytes(type), iq1 = type == MEMRA_TYPE_IQ1_S || type == MEMRA_TYPE_IQ1_M;
    const __m512i zero = _mm512_setzero_si512();
    /* dword i -> the scale of group 4c + i/4, which iq_scales_avx2 puts at element 2c + i/8 (even
     * groups) or 8 + 2c + i/8 (odd groups) */
    __m512i pick[4];
    for (int c = 0; c < 4; c++) pick[c] = _mm512_setr_epi32(2 * c, 2 * c, 2 * c, 2 * c, 8 + 2 * c, 8 + 2 * c, 8 + 2 * c, 8 + 2 * c, 2 * c + 1, 2 * c + 1,
                                                            2 * c + 1, 2 * c + 1, 9 + 2 * c, 9 + 2 * c, 9 + 2 * c, 9 + 2 * c);
    __m128 acc[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() }; /* (in element 0) */
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        __m512i av[4];
        for (int c = 0; c < 4; c++) av[c] = Q8K_VEC_AVX512(ya, c);
        /* iq1: the bsums, zero-extended (vpmaddwd with the scales gives scale * bsum per dword) */
        const __m512i bsums = iq1 ? _mm512_cvtepu16_epi32(iq_bsums_avx2(ya)) : zero;
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            iq_prep prep;
            iq_prepare_avx512(type, xw, &prep);
            const __m512i sc = iq_scales_avx512(type, xw);
            __m512i isum = zero;
            if (iq1) { /* the offset of the codes: -9 * sum(scale * bsum) */
                const __m512i m = _mm512_madd_epi16(sc, bsums);
                isum = _mm512_sub_epi32(zero, _mm512_add_epi32(_mm512_slli_epi32(m, 3), m));
            }
            for (int c = 0; c < 4; c++) {
                __mmask64 neg;
                const __m512i u = iq_decode_avx512(type, xw, c, &prep, &neg);
                const __m512i sa = iq1 ? av[c] : _mm512_mask_sub_epi8(av[c], neg, zero, av[c]);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(u, sa), _mm512_permutexvar_epi32(pick[c], sc));
            }
            acc[r] = _mm_fmadd_ss(_mm_cvtepi32_ps(iq_sum16_avx512(isum)), _mm_set_ss(iq_block_d(type, xw) * da), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = iq_factor(type) * _mm_cvtss_f32(acc[r]);
}

/* Decoded rows (see SCALAR_IQ_DECODED) for tiles of four weight rows x four activation rows, with the
 * float steps of iq_avx512 (one integer per block and pair of rows, so bit for bit memra_dot_rows4) and
 * the integer products as one vpdpbusd per 64 values: the weights' values v = +-u (iq1: u - 9), int8, and
 * the activations offset to unsigned bytes a + 128 (once per activation row, memra_dot_decoded_prepare),
 * both arranged so that each int32 lane of a step's products holds four values of one group of 16 and the
 * four steps of a block add up in the same lane: dword lane 4L + j of step k holds the values 4k .. 4k+3
 * of group 4L + (0, 2, 1, 3)[j] (iq_transpose_avx512). A lane's sum is then multiplied by its group's
 * scale (vpmulld; the types with one scale per 32 values, whose lanes 4L + j and 4L + j + 2 share it, after
 * adding those two, one vpmulld for two weight rows), and the 16 lanes of the 16 pairs of rows are summed
 * into one vector (a tree of unpacks and shuffles, lane 4c + r for activation row c and weight row r).
 * The offset's part, 128 * sum(scale * v) per block and weight row, is taken back by adding its negation
 * (bias). Integer sums are exact (|a + 128| <= 255, |v| <= 62: below 2^27 at every step).
 * Per block, four weight rows (AVX512_IQ_DECODED_BLOCK): v of row r, step k at 256r + 64k (1024 B) | the
 * scales, int32: one vector per row in the lanes of the products (iq_lane_scales_avx512), or with one
 * scale per 32 values one per two rows (rows 0, 1 then 2, 3, in the lanes of iq_pair_sum_avx512) (256 B)
 * | the four rows' bias (int32) | their d (f32) | padding.
 * An activation row of nb blocks: a + 128 of each block, arranged as v (nb x 256 B) | the d f32 of each
 * block (in all AVX512_IQ_PREPARED_BLOCK bytes per block). */
enum { AVX512_IQ_DECODED_BLOCK = 1344, AVX512_IQ_PREPARED_BLOCK = 256 + 4 };
enum { IQ_DECODED_SCALES = 1024, IQ_DECODED_BIAS = 1280, IQ_DECODED_D = 1296 };

/* The types with one scale per 32 values (their lanes add in pairs before the scales). */
static inline int iq_scale32(int type) {
    return type == MEMRA_TYPE_IQ2_XXS || type == MEMRA_TYPE_IQ3_XXS || type == MEMRA_TYPE_IQ3_S || type == MEMRA_TYPE_IQ1_S;
}

/* The four steps n[0..3] of a block (natural order, values 64c .. 64c+63 in step c) in the products'
 * order: t[k] lane 4L + j = dword 4 * (0, 2, 1, 3)[j] + k of n[L]. */
AVX512_INLINE void iq_transpose_avx512(const __m512i n[4], __m512i t[4]) {
    const __m512i index = _mm512_setr_epi32(0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15);
    __m512i p[4]; /* p[L]'s 128-bit chunk k: what t[k] takes from n[L] */
    for (int l = 0; l < 4; l++) p[l] = _mm512_permutexvar_epi32(index, n[l]);
    const __m512i q0 = _mm512_shuffle_i32x4(p[0], p[1], _MM_SHUFFLE(1, 0, 1, 0)), q1 = _mm512_shuffle_i32x4(p[0], p[1], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i q2 = _mm512_shuffle_i32x4(p[2], p[3], _MM_SHUFFLE(1, 0, 1, 0)), q3 = _mm512_shuffle_i32x4(p[2], p[3], _MM_SHUFFLE(3, 2, 3, 2));
    t[0] = _mm512_shuffle_i32x4(q0, q2, _MM_SHUFFLE(2, 0, 2, 0));
    t[1] = _mm512_shuffle_i32x4(q0, q2, _MM_SHUFFLE(3, 1, 3, 1));
    t[2] = _mm512_shuffle_i32x4(q1, q3, _MM_SHUFFLE(2, 0, 2, 0));
    t[3] = _mm512_shuffle_i32x4(q1, q3, _MM_SHUFFLE(3, 1, 3, 1));
}

/* The reduction tree of the tiles. Pair sum: per 128-bit chunk [x0 + x2, y0 + y2, x1 + x3,
 * y1 + y3]; quad sum of two pair sums: per chunk [x, y, x', y'] (each the sum of its 4 dwords of the chunk);
 * chunk sum: chunks [w0 + w1, w2 + w3, w'0 + w'1, w'2 + w'3], twice: chunk c = the whole of the c-th input. */
AVX512_INLINE __m512i iq_pair_sum_avx512(__m512i x, __m512i y) { return _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y)); }
AVX512_INLINE __m512i iq_quad_sum_avx512(__m512i z, __m512i z2) { return _mm512_add_epi32(_mm512_unpacklo_epi64(z, z2), _mm512_unpackhi_epi64(z, z2)); }
AVX512_INLINE __m512i iq_chunk_sum_avx512(__m512i w, __m512i w2) {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w, w2, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(w, w2, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The 16 group scales (int32) in the lanes of the products: lane 4L + j, group 4L + (0, 2, 1, 3)[j]
 * (iq_scales_avx2's element e: group 2e, or 2(e - 8) + 1). */
AVX512_INLINE __m512i iq_lane_scales_avx512(__m256i scales16) {
    const __m512i index = _mm512_setr_epi32(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
    return _mm512_permutexvar_epi32(index, _mm512_cvtepu16_epi32(scales16));
}

AVX512_INLINE void iq_decode_rows4_avx512(const int type, int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const int wbytes = block_bytes(type), iq1 = type == MEMRA_TYPE_IQ1_S || type == MEMRA_TYPE_IQ1_M;
    const __m512i zero = _mm512_setzero_si512(), x80 = _mm512_set1_epi8((char)0x80);
    /* (one scale per 32 values) pair sum lane 4L + m: row m & 1's scale of sub-block 2L + (m >> 1) */
    const __m512i pair_index = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    for (int64_t ib = 0; ib < n / 256; ib++) {
        uint8_t * o = decoded + ib * AVX512_IQ_DECODED_BLOCK;
        __m512i scales32[4], offsets[4];
        float d[4];
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            iq_prep prep;
            iq_prepare_avx512(type, xw, &prep);
            __m512i v[4], t[4];
            for (int c = 0; c < 4; c++) {
                __mmask64 neg;
                const __m512i u = iq_decode_avx512(type, xw, c, &prep, &neg);
                v[c] = iq1 ? _mm512_sub_epi8(u, _mm512_set1_epi8(9)) : _mm512_mask_sub_epi8(u, neg, zero, u);
            }
            iq_transpose_avx512(v, t);
            const __m256i scales16 = iq_scales_avx2(type, xw);
            const __m512i scales = iq_lane_scales_avx512(scales16);
            scales32[r] = _mm512_cvtepu16_epi32(scales16);
            __m512i offset = zero; /* 128 * v per lane */
            for (int k = 0; k < 4; k++) {
                _mm512_storeu_si512((void *)(o + 256 * r + 64 * k), t[k]);
                offset = _mm512_dpbusd_epi32(offset, x80, t[k]);
            }
            if (!iq_scale32(type)) _mm512_storeu_si512((void *)(o + IQ_DECODED_SCALES + 64 * r), scales);
            offsets[r] = _mm512_mullo_epi32(offset, scales);
            d[r] = iq_block_d(type, xw);
        }
        if (iq_scale32(type))
            for (int p = 0; p < 2; p++)
                _mm512_storeu_si512((void *)(o + IQ_DECODED_SCALES + 64 * p), _mm512_permutex2var_epi32(scales32[2 * p], pair_index, scales32[2 * p + 1]));
        /* the bias of row r: minus the sum of offsets[r]'s lanes (the tree, then its four chunks added) */
        const __m512i q = iq_quad_sum_avx512(iq_pair_sum_avx512(offsets[0], offsets[1]), iq_pair_sum_avx512(offsets[2], offsets[3]));
        const __m512i h = _mm512_add_epi32(q, _mm512_shuffle_i32x4(q, q, _MM_SHUFFLE(1, 0, 3, 2)));
        const __m512i total = _mm512_add_epi32(h, _mm512_shuffle_i32x4(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
        _mm_storeu_si128((__m128i *)(void *)(o + IQ_DECODED_BIAS), _mm_sub_epi32(_mm_setzero_si128(), _mm512_castsi512_si128(total)));
        memcpy(o + IQ_DECODED_D, d, sizeof d);
    }
}

AVX512_INLINE void iq_prepare_rows_avx512(int64_t n, const uint8_t * a, uint8_t * prepared) {
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        __m512i v[4], t[4];
        for (int c = 0; c < 4; c++) v[c] = _mm512_xor_si512(Q8K_VEC_AVX512(ya, c), x80);
        iq_transpose_avx512(v, t);
        for (int k = 0; k < 4; k++) _mm512_storeu_si512((void *)(prepared + ib * 256 + 64 * k), t[k]);
        memcpy(prepared + n / 256 * 256 + ib * 4, ya, 4);
    }
}

/* One block of the four decoded weight rows (o) x AR (1..4) prepared activation rows (p, a_stride bytes
 * apart): the block's integer sums, lane 4c + r (0 where c >= AR). */
AVX512_INLINE __m512i iq_decoded_block_avx512(const int type, const int AR, const uint8_t * o, const uint8_t * p, size_t a_stride) {
    const int scale32 = iq_scale32(type);
    __m512i quads[4];
    _Pragma("GCC unroll 4")
    for (int c = 0; c < 4; c++) {
        if (c >= AR) {
            quads[c] = _mm512_setzero_si512();
            continue;
        }
        __m512i a[4], t[4];
        _Pragma("GCC unroll 4")
        for (int k = 0; k < 4; k++) a[k] = _mm512_loadu_si512((const void *)(p + c * a_stride + 64 * k));
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            __m512i x = _mm512_setzero_si512();
            _Pragma("GCC unroll 4")
            for (int k = 0; k < 4; k++) x = _mm512_dpbusd_epi32(x, a[k], _mm512_loadu_si512((const void *)(o + 256 * r + 64 * k)));
            t[r] = scale32 ? x : _mm512_mullo_epi32(x, _mm512_loadu_si512((const void *)(o + IQ_DECODED_SCALES + 64 * r)));
        }
        __m512i z01 = iq_pair_sum_avx512(t[0], t[1]), z23 = iq_pair_sum_avx512(t[2], t[3]);
        if (scale32) {
            z01 = _mm512_mullo_epi32(z01, _mm512_loadu_si512((const void *)(o + IQ_DECODED_SCALES)));
            z23 = _mm512_mullo_epi32(z23, _mm512_loadu_si512((const void *)(o + IQ_DECODED_SCALES + 64)));
        }
        quads[c] = iq_quad_sum_avx512(z01, z23);
    }
    const __m512i sums = iq_chunk_sum_avx512(iq_chunk_sum_avx512(quads[0], quads[1]), iq_chunk_sum_avx512(quads[2], quads[3]));
    return _mm512_add_epi32(sums, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(o + IQ_DECODED_BIAS))));
}

/* Blocks [ib0, ib1) of the four decoded weight rows x AR prepared activation rows of nb blocks: the float
 * steps of iq_avx512 on acc, lane 4c + r. */
AVX512_INLINE __m512 iq_decoded_blocks_avx512(const int type, const int AR, int64_t nb, int64_t ib0, int64_t ib1, const uint8_t * decoded,
                                              const uint8_t * prepared, size_t a_stride, __m512 acc) {
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const uint8_t * pd = prepared + nb * 256; /* the activation rows' d */
    for (int64_t ib = ib0; ib < ib1; ib++) {
        const uint8_t * o = decoded + ib * AVX512_IQ_DECODED_BLOCK;
        const __m512i isum = iq_decoded_block_avx512(type, AR, o, prepared + ib * 256, a_stride);
        /* d_w * d_a per lane 4c + r: the same float products as iq_avx512's */
        const __m128 da = _mm_setr_ps(ld_f32(pd + ib * 4), AR > 1 ? ld_f32(pd + a_stride + ib * 4) : 0.0f, AR > 2 ? ld_f32(pd + 2 * a_stride + ib * 4) : 0.0f,
                                      AR > 3 ? ld_f32(pd + 3 * a_stride + ib * 4) : 0.0f);
        const __m512 d = _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_loadu_ps((const float *)(const void *)(o + IQ_DECODED_D))),
                                       _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(da)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc);
    }
    return acc;
}

/* The tiles over `rows` activation rows, four at a time, block by block in groups of IQ_TILE_BLOCKS (the
 * group's decoded rows stay in L1 while all the activation rows pass), the float sums of each four
 * activation rows (one vector) kept in memory between the groups. */
enum { IQ_TILE_ROWS = 256, IQ_TILE_BLOCKS = 16 };

AVX512_INLINE void iq_decoded_rows_avx512(const int type, int64_t n, const uint8_t * decoded, const uint8_t * prepared, size_t a_stride, int64_t rows,
                                          float * out, int64_t out_stride) {
    __m512 sums[IQ_TILE_ROWS / 4];
    const int64_t nb = n / 256;
    for (int64_t c0 = 0; c0 < rows; c0 += IQ_TILE_ROWS) {
        const int64_t nr = rows - c0 < IQ_TILE_ROWS ? rows - c0 : IQ_TILE_ROWS;
        const uint8_t * a = prepared + c0 * a_stride;
        for (int64_t i = 0; i < (nr + 3) / 4; i++) sums[i] = _mm512_setzero_ps();
        for (int64_t ib0 = 0; ib0 < nb; ib0 += IQ_TILE_BLOCKS) {
            const int64_t ib1 = nb - ib0 < IQ_TILE_BLOCKS ? nb : ib0 + IQ_TILE_BLOCKS;
            for (int64_t c = 0; c < nr; c += 4) {
                const int ar = nr - c < 4 ? (int)(nr - c) : 4;
                const uint8_t * p = a + c * a_stride;
                __m512 acc = sums[c / 4];
                switch (ar) {
                case 4: acc = iq_decoded_blocks_avx512(type, 4, nb, ib0, ib1, decoded, p, a_stride, acc); break;
                case 3: acc = iq_decoded_blocks_avx512(type, 3, nb, ib0, ib1, decoded, p, a_stride, acc); break;
                case 2: acc = iq_decoded_blocks_avx512(type, 2, nb, ib0, ib1, decoded, p, a_stride, acc); break;
                default: acc = iq_decoded_blocks_avx512(type, 1, nb, ib0, ib1, decoded, p, a_stride, acc); break;
                }
                sums[c / 4] = acc;
                /* the last group: the results, as they come (stored all at the end, out_stride apart, the misses
                 * of 256 rows took over a quarter of the tile's time) */
                if (ib1 == nb) {
                    float lanes[16];
                    _mm512_storeu_ps(lanes, _mm512_mul_ps(_mm512_set1_ps(iq_factor(type)), acc));
                    for (int k = 0; k < ar; k++) memcpy(out + (c0 + c + k) * out_stride, lanes + 4 * k, 4 * sizeof(float));
                }
            }
        }
    }
}

/* iq4_xs and iq4_nl decoded (see the AVX2 ones): the levels + 128 as the row kernels compute them, and
 * the activations as those kernels arrange them before the weights (memra_dot_decoded_prepare: once per
 * activation row for all the weights; in the decoded products that step measured 20-30% of the time).
 * iq4_xs, weights per block and row: iq4_xs_avx512's lo, hi of c = 0, then of c = 1 (256 B) | the 8
 * scales - 32 (int32) | d f32 | padding; activations per block: alo[0], ahi[0], alo[1], ahi[1], base[0],
 * base[1] | d f32 | padding. iq4_nl per step of four blocks (blocks32_avx512's): weights lo, hi of rows
 * 0..3 (128 B each) | the four rows' four d f32 (64 B), after the steps the blocks past the last full
 * step (at most 3 per row) as they are, which the row kernel takes in scalar code; activations
 * blocks32_act's alo, ahi, base per step, then the four d f32 of each step, then the blocks past the
 * last full step as they are. */
enum {
    AVX512_IQ4_XS_DECODED_BLOCK = 320, AVX512_IQ4_XS_PREPARED_BLOCK = 448,
    AVX512_IQ4_NL_DECODED_STEP = 4 * 128 + 64, AVX512_IQ4_NL_PREPARED_STEP = 3 * 64 + 16,
};

AVX512_FN void iq4_xs_avx512_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const __m512i m4 = _mm512_set1_epi8(15), x80 = _mm512_set1_epi8((char)0x80);
    const __m512i levels = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_values)), x80);
    const __m256i low_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), high_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    for (int64_t ib = 0; ib < n / 256; ib++) {
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_XS_BYTES;
            uint8_t * o = decoded + (4 * ib + r) * AVX512_IQ4_XS_DECODED_BLOCK;
            const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)ld_u32(xw + 4)), low_shift), _mm256_set1_epi32(15));
            const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(ld_u16(xw + 2)), high_shift), _mm256_set1_epi32(3));
            _mm256_storeu_si256((__m256i *)(o + 256), _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32)));
            for (int c = 0; c < 2; c++) {
                const __m512i q = _mm512_loadu_si512((const void *)(xw + 8 + 64 * c));
                _mm512_storeu_si512((void *)(o + 128 * c), _mm512_shuffle_epi8(levels, _mm512_and_si512(q, m4)));
                _mm512_storeu_si512((void *)(o + 128 * c + 64), _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)));
            }
            st_f32(o + 288, f16_at_avx512(xw));
        }
    }
}

AVX512_FN void iq4_xs_avx512_prepare(int64_t n, const uint8_t * a, uint8_t * prepared) {
    const __m512i x80 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        uint8_t * p = prepared + ib * AVX512_IQ4_XS_PREPARED_BLOCK;
        for (int c = 0; c < 2; c++) {
            const __m512i z0 = Q8K_VEC_AVX512(ya, 2 * c), z1 = Q8K_VEC_AVX512(ya, 2 * c + 1);
            const __m512i alo = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(2, 0, 2, 0));
            const __m512i ahi = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
            _mm512_storeu_si512((void *)(p + 128 * c), alo);
            _mm512_storeu_si512((void *)(p + 128 * c + 64), ahi);
            _mm512_storeu_si512((void *)(p + 256 + 64 * c), _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, x80, alo), x80, ahi)));
        }
        st_f32(p + 384, ld_f32(ya));
    }
}

/* iq4_xs_avx512's sequence for four rows on decoded blocks and a prepared activation row. */
AVX512_FN void iq4_xs_avx512_decoded(int64_t n, const uint8_t * decoded, const uint8_t * prepared, float * out) {
    const __m512i lanes0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i lanes1 = _mm512_set_epi32(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4);
    __m512 acc[4];
    for (int r = 0; r < 4; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * p = prepared + ib * AVX512_IQ4_XS_PREPARED_BLOCK;
        const float da = ld_f32(p + 384);
        __m512i alo[2], ahi[2], base[2];
        for (int c = 0; c < 2; c++) {
            alo[c] = _mm512_loadu_si512((const void *)(p + 128 * c));
            ahi[c] = _mm512_loadu_si512((const void *)(p + 128 * c + 64));
            base[c] = _mm512_loadu_si512((const void *)(p + 256 + 64 * c));
        }
        for (int r = 0; r < 4; r++) {
            const uint8_t * o = decoded + (4 * ib + r) * AVX512_IQ4_XS_DECODED_BLOCK;
            const __m512i ls = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(o + 256)));
            __m512i isum = _mm512_setzero_si512();
            for (int c = 0; c < 2; c++) {
                const __m512i lo = _mm512_loadu_si512((const void *)(o + 128 * c)), hi = _mm512_loadu_si512((const void *)(o + 128 * c + 64));
                const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(base[c], lo, alo[c]), hi, ahi[c]);
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, _mm512_permutexvar_epi32(c ? lanes1 : lanes0, ls)));
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(ld_f32(o + 288) * da), acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}

AVX512_FN void iq4_nl_avx512_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i levels = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_values)), _mm512_set1_epi8((char)0x80));
    const int64_t nb = n / 32, nb4 = nb & ~(int64_t)3;
    for (int64_t ib = 0; ib < nb4; ib += 4) {
        uint8_t * o = decoded + ib / 4 * AVX512_IQ4_NL_DECODED_STEP;
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_NL_BYTES;
            const __m512i q = load4x16_avx512(xw + 2, IQ4_NL_BYTES);
            _mm512_storeu_si512((void *)(o + 128 * r), _mm512_shuffle_epi8(levels, _mm512_and_si512(q, m4)));
            _mm512_storeu_si512((void *)(o + 128 * r + 64), _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)));
            _mm_storeu_ps((float *)(void *)(o + 512 + 16 * r), f16x4_avx512(xw, IQ4_NL_BYTES));
        }
    }
    uint8_t * tail = decoded + nb4 / 4 * AVX512_IQ4_NL_DECODED_STEP;
    for (int r = 0; r < 4; r++) memcpy(tail + r * (nb - nb4) * IQ4_NL_BYTES, w + r * stride + nb4 * IQ4_NL_BYTES, (size_t)(nb - nb4) * IQ4_NL_BYTES);
}

AVX512_FN void iq4_nl_avx512_prepare(int64_t n, const uint8_t * a, uint8_t * prepared) {
    const int64_t nb = n / 32, steps = nb / 4;
    for (int64_t k = 0; k < steps; k++) {
        blocks32_act p;
        blocks32_prepare(MEMRA_TYPE_IQ4_NL, a + 4 * k * Q8_0_BYTES, &p);
        _mm512_storeu_si512((void *)(prepared + 192 * k), p.alo);
        _mm512_storeu_si512((void *)(prepared + 192 * k + 64), p.ahi);
        _mm512_storeu_si512((void *)(prepared + 192 * k + 128), p.base);
        _mm_storeu_ps((float *)(void *)(prepared + 192 * steps + 16 * k), p.da);
    }
    memcpy(prepared + steps * AVX512_IQ4_NL_PREPARED_STEP, a + 4 * steps * Q8_0_BYTES, (size_t)(nb - 4 * steps) * Q8_0_BYTES);
}

/* blocks32_avx512's sequence (iq4_nl) for four rows on decoded blocks and a prepared activation row. */
AVX512_FN void iq4_nl_avx512_decoded(int64_t n, const uint8_t * decoded, const uint8_t * prepared, float * out) {
    const __m512i lanes = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const int64_t nb = n / 32, steps = nb / 4, nb4 = 4 * steps;
    __m512 acc[4];
    for (int r = 0; r < 4; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < steps; k++) {
        const uint8_t * o = decoded + k * AVX512_IQ4_NL_DECODED_STEP;
        const __m512i alo = _mm512_loadu_si512((const void *)(prepared + 192 * k));
        const __m512i ahi = _mm512_loadu_si512((const void *)(prepared + 192 * k + 64));
        const __m512i base = _mm512_loadu_si512((const void *)(prepared + 192 * k + 128));
        const __m128 da = _mm_loadu_ps((const float *)(const void *)(prepared + 192 * steps + 16 * k));
        for (int r = 0; r < 4; r++) {
            const __m512i lo = _mm512_loadu_si512((const void *)(o + 128 * r)), hi = _mm512_loadu_si512((const void *)(o + 128 * r + 64));
            const __m512i isum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(base, lo, alo), hi, ahi);
            const __m512 d = _mm512_castps128_ps512(_mm_mul_ps(_mm_loadu_ps((const float *)(const void *)(o + 512 + 16 * r)), da));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_permutexvar_ps(lanes, d), acc[r]);
        }
    }
    const uint8_t * tail = decoded + steps * AVX512_IQ4_NL_DECODED_STEP, * a_tail = prepared + steps * AVX512_IQ4_NL_PREPARED_STEP;
    for (int r = 0; r < 4; r++) {
        /* (+ 0.0f: blocks32_avx512's sum of the q4_1 / q5_1 terms; then blocks32_tail's sum) */
        const float sum = _mm512_reduce_add_ps(acc[r]) + 0.0f;
        float rest = 0.0f;
        for (int64_t ib = nb4; ib < nb; ib++) rest += blk_iq4_nl(tail + (r * (nb - nb4) + ib - nb4) * IQ4_NL_BYTES, a_tail + (ib - nb4) * Q8_0_BYTES);
        out[r] = sum + rest;
    }
}

/* --- f32 / f16 / bf16: 64 values per step in four accumulators, masked tail --- */

AVX512_INLINE __m512 load16_avx512(const int type, const uint8_t * p, int64_t i, __mmask16 m) {
    if (type == MEMRA_TYPE_F32) return _mm512_maskz_loadu_ps(m, p + 4 * i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * i);
    if (type == MEMRA_TYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512_INLINE void float_rows_avx512(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    __m512 acc[4][4];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 4; k++) acc[r][k] = _mm512_setzero_ps();
    const __mmask16 all = 0xffff;
    int64_t i = 0;
    const int64_t esize = type == MEMRA_TYPE_F32 ? 4 : 2;
    for (; i + 64 <= n; i += 64) {
        if (nr == 4) prefetch_next_rows(w, stride, n * esize, i * esize, 64 * esize);
        __m512 av[4];
        for (int k = 0; k < 4; k++) av[k] = load16_avx512(type, a, i + 16 * k, all);
        for (int r = 0; r < nr; r++)
            for (int k = 0; k < 4; k++) acc[r][k] = _mm512_fmadd_ps(load16_avx512(type, w + r * stride, i + 16 * k, all), av[k], acc[r][k]);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? all : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 av = load16_avx512(type, a, i, m);
        for (int r = 0; r < nr; r++) acc[r][0] = _mm512_fmadd_ps(load16_avx512(type, w + r * stride, i, m), av, acc[r][0]);
    }
    for (int r = 0; r < nr; r++) {
        const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
        out[r] = _mm512_reduce_add_ps(s);
    }
}

ROWS_1_4(q8_0_avx512, AVX512_FN, q8_0_avx512(NR, n, w, stride, a, out))
ROWS_1_4(q4_0_avx512, AVX512_FN, blocks32_avx512(MEMRA_TYPE_Q4_0, NR, n, w, stride, a, out))
ROWS_1_4(q4_1_avx512, AVX512_FN, blocks32_avx512(MEMRA_TYPE_Q4_1, NR, n, w, stride, a, out))
ROWS_1_4(q5_0_avx512, AVX512_FN, blocks32_avx512(MEMRA_TYPE_Q5_0, NR, n, w, stride, a, out))
ROWS_1_4(q5_1_avx512, AVX512_FN, blocks32_avx512(MEMRA_TYPE_Q5_1, NR, n, w, stride, a, out))
ROWS_1_4(iq4_nl_avx512, AVX512_FN, blocks32_avx512(MEMRA_TYPE_IQ4_NL, NR, n, w, stride, a, out))
#define BLOCKS32_MANY(name, type)                                                                                    \
    AVX512_FN void name(int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) { \
        blocks32_many_avx512(type, n, w, stride, rows, a, out);                                                      \
    }
BLOCKS32_MANY(q4_0_avx512_many, MEMRA_TYPE_Q4_0)
BLOCKS32_MANY(q4_1_avx512_many, MEMRA_TYPE_Q4_1)
BLOCKS32_MANY(q5_0_avx512_many, MEMRA_TYPE_Q5_0)
BLOCKS32_MANY(q5_1_avx512_many, MEMRA_TYPE_Q5_1)
BLOCKS32_MANY(iq4_nl_avx512_many, MEMRA_TYPE_IQ4_NL)
ROWS_1_4(q2_K_avx512, AVX512_FN, q2_3_K_avx512(NR, 0, n, w, stride, a, out))
ROWS_1_4(q3_K_avx512, AVX512_FN, q2_3_K_avx512(NR, 1, n, w, stride, a, out))
ROWS_1_4(q4_K_avx512, AVX512_FN, q4_K_avx512(NR, 0, n, w, stride, a, out))
ROWS_1_4(q5_K_avx512, AVX512_FN, q4_K_avx512(NR, 1, n, w, stride, a, out))
AVX512_FN void q8_0_avx512_many(int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) {
    q8_0_many_avx512(n, w, stride, rows, a, out);
}
AVX512_FN void q4_K_avx512_many(int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) {
    q4_K_many_avx512(0, n, w, stride, rows, a, out);
}
AVX512_FN void q5_K_avx512_many(int64_t n, const uint8_t * w, size_t stride, int64_t rows, const uint8_t * a, float * out) {
    q4_K_many_avx512(1, n, w, stride, rows, a, out);
}
ROWS_1_4(q6_K_avx512, AVX512_FN, q6_K_avx512(NR, n, w, stride, a, out))
ROWS_1_4(iq4_xs_avx512, AVX512_FN, iq4_xs_avx512(NR, n, w, stride, a, out))
ROWS_1_4(iq2_xxs_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ2_XXS, NR, n, w, stride, a, out))
ROWS_1_4(iq2_xs_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ2_XS, NR, n, w, stride, a, out))
ROWS_1_4(iq2_s_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ2_S, NR, n, w, stride, a, out))
ROWS_1_4(iq3_xxs_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ3_XXS, NR, n, w, stride, a, out))
ROWS_1_4(iq3_s_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ3_S, NR, n, w, stride, a, out))
ROWS_1_4(iq1_s_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ1_S, NR, n, w, stride, a, out))
ROWS_1_4(iq1_m_avx512, AVX512_FN, iq_avx512(MEMRA_TYPE_IQ1_M, NR, n, w, stride, a, out))
/* The decoded-rows entry points of an i-quant on AVX-512 (iq_decode_rows4_avx512 and the tiles above). */
#define IQ_DECODED_AVX512(name, type)                                                                  \
    AVX512_FN void name##_avx512_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * d) {     \
        iq_decode_rows4_avx512(type, n, w, stride, d);                                                 \
    }                                                                                                  \
    AVX512_FN void name##_avx512_prepare(int64_t n, const uint8_t * a, uint8_t * p) { iq_prepare_rows_avx512(n, a, p); } \
    AVX512_FN void name##_avx512_decoded(int64_t n, const uint8_t * d, const uint8_t * a, float * out) { \
        iq_decoded_rows_avx512(type, n, d, a, 0, 1, out, 0);                                           \
    }                                                                                                  \
    AVX512_FN void name##_avx512_decoded_rows(int64_t n, const uint8_t * d, const uint8_t * a, size_t a_stride, int64_t rows, float * out, \
                                              int64_t out_stride) {                                    \
        iq_decoded_rows_avx512(type, n, d, a, a_stride, rows, out, out_stride);                        \
    }
IQ_DECODED_AVX512(iq2_xxs, MEMRA_TYPE_IQ2_XXS)
IQ_DECODED_AVX512(iq2_xs, MEMRA_TYPE_IQ2_XS)
IQ_DECODED_AVX512(iq2_s, MEMRA_TYPE_IQ2_S)
IQ_DECODED_AVX512(iq3_xxs, MEMRA_TYPE_IQ3_XXS)
IQ_DECODED_AVX512(iq3_s, MEMRA_TYPE_IQ3_S)
IQ_DECODED_AVX512(iq1_s, MEMRA_TYPE_IQ1_S)
IQ_DECODED_AVX512(iq1_m, MEMRA_TYPE_IQ1_M)
ROWS_1_4(f32_avx512, AVX512_FN, float_rows_avx512(MEMRA_TYPE_F32, NR, n, w, stride, a, out))
ROWS_1_4(f16_avx512, AVX512_FN, float_rows_avx512(MEMRA_TYPE_F16, NR, n, w, stride, a, out))
ROWS_1_4(bf16_avx512, AVX512_FN, float_rows_avx512(MEMRA_TYPE_BF16, NR, n, w, stride, a, out))

/* CPUID: 0 = none, 1 = AVX2+FMA+F16C, 2 = that plus AVX-512 F/BW/VL/DQ/VNNI; OS support checked with XGETBV. */
static int x86_level(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    const int fma = (ecx >> 12) & 1, osxsave = (ecx >> 27) & 1, avx = (ecx >> 28) & 1, f16c = (ecx >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return 0;
    unsigned int xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 0x6u) != 0x6u) return 0; /* XMM and YMM state */
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    if (!((ebx >> 5) & 1)) return 0; /* AVX2 */
    const int avx512 = ((ebx >> 16) & 1) && ((ebx >> 17) & 1) && ((ebx >> 30) & 1) && ((ebx >> 31) & 1) && ((ecx >> 11) & 1);
    if (avx512 && (xcr0_lo & 0xe6u) == 0xe6u) return 2; /* plus opmask, ZMM_Hi256, Hi16_ZMM state */
    return 1;
}

#endif /* x86 */

/* ============================================================================================== */
/* 6b. ARM NEON (AArch64), with and without the dot-product extension                             */
/* ============================================================================================== */

/* Two paths share every kernel body below: "neon" (baseline AArch64 Advanced SIMD: products with
 * smull/smull2, pairwise-accumulated with sadalp) and "neondot" (the ARMv8.2 dotprod extension: sdot,
 * four int8 products into each 32-bit lane). The bodies take the 16-byte integer dot product as a
 * function pointer argument (dot16_neon or dot16_neondot): they are always_inline, so the pointer is a
 * constant in each entry point and the call is inlined there. (A plain `if (dotprod)` in the body does
 * not work: GCC refuses to inline the sdot intrinsic into a function compiled without the extension,
 * even on a branch that is never taken.)
 *
 * Unlike x86 there is no unsigned-by-signed multiply in base NEON, so the weights are brought to signed
 * bytes (q4_0: q - 8, q5_0: q - 16, q6_K: q - 32, q3_K: q - 4, K-quant codes as they are) and no offset
 * correction with the activation sums is needed (the K-quant mins still use q8_K's bsums). The two paths
 * group the products into lanes differently, so their float results may differ from each other (as
 * AVX2's from AVX-512's), never within one path. */
#if defined(__aarch64__) && !defined(MEMRA_NO_SIMD)
#define MEMRA_NEON 1
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#include <asm/hwcap.h>
#endif

/* The sdot intrinsics of GCC's arm_neon.h are declared for arch=armv8.2-a+dotprod; a plain "+dotprod"
 * on the default armv8-a does not allow inlining them. Every CPU with dotprod implements ARMv8.2.
 * clang before 16 declares vdotq_s32 only when the whole build targets dotprod (-march=...+dotprod):
 * there the "neondot" path is left out unless the build does. */
#if defined(__ARM_FEATURE_DOTPROD) || !defined(__clang__) || __clang_major__ >= 16
#define MEMRA_NEONDOT 1
#endif
#define TARGET_NEONDOT "arch=armv8.2-a+dotprod"
#define NEON_FN static
#define NEON_INLINE static inline __attribute__((always_inline))
#define NEONDOT_FN static __attribute__((target(TARGET_NEONDOT)))
#define NEONDOT_INLINE static inline __attribute__((target(TARGET_NEONDOT), always_inline))

/* acc + the dot product of 16 int8 pairs, spread over the four lanes (which lane holds which products
 * depends on the path; the lane sum does not). */
typedef int32x4_t dot16_fn(int32x4_t acc, int8x16_t x, int8x16_t y);

NEON_INLINE int32x4_t dot16_neon(int32x4_t acc, int8x16_t x, int8x16_t y) {
    /* |product| <= 128 * 128: exact in int16, then widened to int32 pairwise */
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(x, y));
}

#ifdef MEMRA_NEONDOT
NEONDOT_INLINE int32x4_t dot16_neondot(int32x4_t acc, int8x16_t x, int8x16_t y) { return vdotq_s32(acc, x, y); }
#endif

/* The dot product of 32 int8 pairs (two 16-byte halves each), in four lanes. */
NEON_INLINE int32x4_t dot32_neon(dot16_fn * dot16, int8x16_t x0, int8x16_t x1, const int8_t * y) {
    return dot16(dot16(vdupq_n_s32(0), x0, vld1q_s8(y)), x1, vld1q_s8(y + 16));
}

/* As prefetch_next_rows on x86 (see there): the four-row kernels pull the next four rows into L2 in
 * address order while they compute the current ones. */
static inline void prefetch_next_rows_neon(const uint8_t * w, size_t stride, int64_t row_bytes, int64_t done, int64_t step) {
#ifndef MEMRA_NO_PREFETCH
    const int64_t end = 4 * (done + step);
    for (int64_t off = (4 * done) & ~(int64_t)63; off < end; off += 64) {
        const int64_t row = (off >= row_bytes) + (off >= 2 * row_bytes) + (off >= 3 * row_bytes);
        const char * line = (const char *)(w + (4 + row) * (int64_t)stride + (off - row * row_bytes));
        __asm__ volatile("prfm pldl2keep, [%0]" : : "r"(line));
    }
#else
    (void)w; (void)stride; (void)row_bytes; (void)done; (void)step;
#endif
}

/* 16 packed nibbles -> the low nibbles (values 0..15) and the high nibbles (values 16..31). */
NEON_INLINE void nibbles_neon(const uint8_t * qs, uint8x16_t * lo, uint8x16_t * hi) {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vandq_u8(q, vdupq_n_u8(15));
    *hi = vshrq_n_u8(q, 4);
}

/* byte j (0..15) = bit j of `bits` ? 16 : 0. */
NEON_INLINE uint8x16_t bits16_to_16s_neon(uint32_t bits) {
    static const uint8_t select[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    const uint8x16_t b = vcombine_u8(vdup_n_u8((uint8_t)bits), vdup_n_u8((uint8_t)(bits >> 8)));
    return vandq_u8(vtstq_u8(b, vld1q_u8(select)), vdupq_n_u8(16));
}

static inline float hsum4_neon(float32x4_t v) { return vaddvq_f32(v); }

/* a*b + c rounded once. The scalar float updates of the kernels are written with it, so that no
 * compiler setting (clang contracts a*b + c by default, GCC with -ffp-contract=fast) can fuse them in the
 * one-row kernel and not in the four-row one. */
static inline float fma_neon(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

/* --- activation conversion (shared by both paths) --- */

/* 4 floats times mul, rounded to nearest even (fcvtns), as int32; NaN gives INT32_MIN, as cvtps_epi32
 * does and as sat_i8 turns NaN into -128. */
NEON_INLINE int32x4_t round4_neon(float32x4_t x, float32x4_t mul) {
    const float32x4_t v = vmulq_f32(x, mul);
    return vbslq_s32(vceqq_f32(v, v), vcvtnq_s32_f32(v), vdupq_n_s32(INT32_MIN));
}

/* 16 floats -> 16 int8 as sat_i8(round_even(x * mul)), in order (saturating narrowing twice). */
NEON_INLINE int8x16_t quantize16_neon(const float * x, float32x4_t mul) {
    const int16x8_t a = vcombine_s16(vqmovn_s32(round4_neon(vld1q_f32(x), mul)), vqmovn_s32(round4_neon(vld1q_f32(x + 4), mul)));
    const int16x8_t b = vcombine_s16(vqmovn_s32(round4_neon(vld1q_f32(x + 8), mul)), vqmovn_s32(round4_neon(vld1q_f32(x + 12), mul)));
    return vcombine_s8(vqmovn_s16(a), vqmovn_s16(b));
}

NEON_INLINE float max_abs_neon(const float * x, int count) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int j = 0; j < count; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxvq_f32(m);
}

NEON_INLINE void to_q8_0_or_1_neon(const float * x, uint8_t * y, int64_t n, int with_sum) {
    const int bytes = with_sum ? Q8_1_BYTES : Q8_0_BYTES;
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32, y += bytes) {
        const float amax = max_abs_neon(x, 32);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float32x4_t mul = vdupq_n_f32(id);
        const int8x16_t q0 = quantize16_neon(x, mul), q1 = quantize16_neon(x + 16, mul);
        int8_t * qs = (int8_t *)(y + (with_sum ? 4 : 2));
        vst1q_s8(qs, q0);
        vst1q_s8(qs + 16, q1);
        st_u16(y, f32_to_f16(d));
        if (with_sum) st_u16(y + 2, f32_to_f16(d * (float)(vaddlvq_s8(q0) + vaddlvq_s8(q1))));
    }
}

NEON_FN void to_q8_0_neon(const float * x, uint8_t * y, int64_t n) { to_q8_0_or_1_neon(x, y, n, 0); }
NEON_FN void to_q8_1_neon(const float * x, uint8_t * y, int64_t n) { to_q8_0_or_1_neon(x, y, n, 1); }

NEON_FN void to_q8_K_neon(const float * x, uint8_t * y, int64_t n) {
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256, y += Q8_K_BYTES) {
        const float amax = max_abs_neon(x, 256);
        const float iscale = q8_K_iscale(x, amax, y);
        if (iscale == 0.0f) continue;
        const float32x4_t mul = vdupq_n_f32(iscale);
        for (int j = 0; j < 256; j += 16) {
            /* min(127, .) is the saturation: round_even(iscale*x) never goes below -127 */
            const int8x16_t q = quantize16_neon(x + j, mul);
            vst1q_s8((int8_t *)(y + Q8K_QS + j), q);
            const int16_t s = vaddlvq_s8(q);
            memcpy(y + Q8K_BSUMS + 2 * (j / 16), &s, 2);
        }
        st_f32(y, 1.0f / iscale);
    }
}

/* fcvtn rounds to nearest even in the default FPCR mode, keeps subnormal halves (FZ16 is off on Linux
 * and macOS) and quiets NaNs keeping the top of the payload: f32_to_f16 exactly. */
NEON_FN void to_f16_neon(const float * x, uint8_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
        vst1q_u16((uint16_t *)(void *)(y + 2 * i), vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++) st_u16(y + 2 * i, f32_to_f16(x[i]));
}

/* f32_to_bf16 on 4 lanes. */
NEON_INLINE uint16x4_t bf16x4_neon(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), odd)), 16);
    const uint32x4_t quiet = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64));
    return vmovn_u32(vbslq_u32(nan, quiet, rounded));
}

NEON_FN void to_bf16_neon(const float * x, uint8_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vcombine_u16(bf16x4_neon(vld1q_f32(x + i)), bf16x4_neon(vld1q_f32(x + i + 4)));
        vst1q_u16((uint16_t *)(void *)(y + 2 * i), h);
    }
    for (; i < n; i++) st_u16(y + 2 * i, f32_to_bf16(x[i]));
}

/* --- q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl: one 32-value block per step --- */

NEON_INLINE void blocks32_neon(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out, dot16_fn * dot16) {
    const int has_min = type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_1;
    const int has_qh = type == MEMRA_TYPE_Q5_0 || type == MEMRA_TYPE_Q5_1;
    const int wbytes = block_bytes(type), abytes = has_min ? Q8_1_BYTES : Q8_0_BYTES;
    const int qh_at = has_min ? 4 : 2, qs_at = (has_min ? 4 : 2) + (has_qh ? 4 : 0), aq_at = has_min ? 4 : 2;
    const uint8x16_t offset = vdupq_n_u8(type == MEMRA_TYPE_Q4_0 ? 8 : type == MEMRA_TYPE_Q5_0 ? 16 : 0);
    const int8x16_t table = vld1q_s8(iq4nl_values);
    float32x4_t acc[4];
    float macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = vdupq_n_f32(0.0f); macc[r] = 0.0f; }
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const uint8_t * ya = a + ib * abytes;
        if (nr == 4) prefetch_next_rows_neon(w, stride, n / 32 * wbytes, ib * wbytes, wbytes);
        const float da = fp16_at(ya);
        const float sa = has_min ? fp16_at(ya + 2) : 0.0f;
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            int8x16_t v0, v1;
            if (type == MEMRA_TYPE_Q8_0) {
                v0 = vld1q_s8((const int8_t *)(xw + 2));
                v1 = vld1q_s8((const int8_t *)(xw + 18));
            } else {
                uint8x16_t u0, u1;
                nibbles_neon(xw + qs_at, &u0, &u1);
                if (type == MEMRA_TYPE_IQ4_NL) {
                    v0 = vqtbl1q_s8(table, u0);
                    v1 = vqtbl1q_s8(table, u1);
                } else {
                    if (has_qh) {
                        const uint32_t qh = ld_u32(xw + qh_at);
                        u0 = vorrq_u8(u0, bits16_to_16s_neon(qh));
                        u1 = vorrq_u8(u1, bits16_to_16s_neon(qh >> 16));
                    }
                    /* q - offset wraps to the right signed byte */
                    v0 = vreinterpretq_s8_u8(vsubq_u8(u0, offset));
                    v1 = vreinterpretq_s8_u8(vsubq_u8(u1, offset));
                }
            }
            const int32x4_t p = dot32_neon(dot16, v0, v1, (const int8_t *)(ya + aq_at));
            acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(p), fp16_at(xw) * da);
            if (has_min) macc[r] = fma_neon(fp16_at(xw + 2), sa, macc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum4_neon(acc[r]) + macc[r];
}

/* --- K-quants: integer sums over the super-block, scaled per sub-block in 32-bit lanes --- */

#define Q8K_AT_NEON(ya, k) ((const int8_t *)((ya) + Q8K_QS + 16 * (k))) /* q8_K activation values 16k .. 16k+15 */

/* sum over the 8 pairs of sub-blocks of 16 of mins[s] * (bsum[2s] + bsum[2s+1]) (q4_K, q5_K) */
NEON_INLINE int mins_dot_neon(const uint8_t * ya, uint64_t mins) {
    const int16x8_t bs = vpaddq_s16(vld1q_s16((const int16_t *)(const void *)(ya + Q8K_BSUMS)),
                                    vld1q_s16((const int16_t *)(const void *)(ya + Q8K_BSUMS + 16)));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mins)));
    return vaddvq_s32(vaddq_s32(vmull_s16(vget_low_s16(bs), vget_low_s16(m)), vmull_high_s16(bs, m)));
}

NEON_INLINE void q4_K_neon(const int nr, const int with_qh, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out, dot16_fn * dot16) {
    const int wbytes = with_qh ? Q5_K_BYTES : Q4_K_BYTES, qs_at = with_qh ? 48 : 16;
    const uint8x16_t m4 = vdupq_n_u8(15);
    float acc[4], macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = 0.0f; macc[r] = 0.0f; }
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows_neon(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            uint64_t scales, mins;
            q4k_scales_mins(xw + 4, &scales, &mins);
            uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
            if (with_qh) { qh0 = vld1q_u8(xw + 16); qh1 = vld1q_u8(xw + 32); }
            int32x4_t isum = vdupq_n_s32(0);
            for (int c = 0; c < 4; c++) {
                const uint8x16_t q0 = vld1q_u8(xw + qs_at + 32 * c), q1 = vld1q_u8(xw + qs_at + 32 * c + 16);
                uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4), hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
                if (with_qh) {
                    /* bit 2c of qh is the fifth bit of the low nibbles, bit 2c+1 that of the high ones;
                     * qh is shifted right by 2 after each c, so they are bits 0 and 1 here */
                    lo0 = vorrq_u8(lo0, vshlq_n_u8(vandq_u8(qh0, vdupq_n_u8(1)), 4));
                    lo1 = vorrq_u8(lo1, vshlq_n_u8(vandq_u8(qh1, vdupq_n_u8(1)), 4));
                    hi0 = vorrq_u8(hi0, vshlq_n_u8(vandq_u8(qh0, vdupq_n_u8(2)), 3));
                    hi1 = vorrq_u8(hi1, vshlq_n_u8(vandq_u8(qh1, vdupq_n_u8(2)), 3));
                    qh0 = vshrq_n_u8(qh0, 2);
                    qh1 = vshrq_n_u8(qh1, 2);
                }
                const int32x4_t plo = dot32_neon(dot16, vreinterpretq_s8_u8(lo0), vreinterpretq_s8_u8(lo1), Q8K_AT_NEON(ya, 4 * c));
                const int32x4_t phi = dot32_neon(dot16, vreinterpretq_s8_u8(hi0), vreinterpretq_s8_u8(hi1), Q8K_AT_NEON(ya, 4 * c + 2));
                isum = vmlaq_n_s32(isum, plo, (int32_t)((scales >> (16 * c)) & 0xff));
                isum = vmlaq_n_s32(isum, phi, (int32_t)((scales >> (16 * c + 8)) & 0xff));
            }
            acc[r] = fma_neon(fp16_at(xw) * da, (float)vaddvq_s32(isum), acc[r]);
            macc[r] = fma_neon(fp16_at(xw + 2) * da, (float)mins_dot_neon(ya, mins), macc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = acc[r] - macc[r];
}

NEON_INLINE void q6_K_neon(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out, dot16_fn * dot16) {
    const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30), off = vdupq_n_u8(32);
    float acc[4];
    for (int r = 0; r < nr; r++) acc[r] = 0.0f;
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows_neon(w, stride, n / 256 * Q6_K_BYTES, ib * Q6_K_BYTES, Q6_K_BYTES);
        const float da = ld_f32(ya);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * Q6_K_BYTES;
            const int8_t * sc = (const int8_t *)(xw + 192);
            int32x4_t isum = vdupq_n_s32(0);
            for (int k = 0; k < 2; k++) {
                for (int h = 0; h < 2; h++) { /* values l = 16h .. 16h+15 of each of the four groups of 32 */
                    const uint8x16_t L0 = vld1q_u8(xw + 64 * k + 16 * h), L1 = vld1q_u8(xw + 64 * k + 32 + 16 * h);
                    const uint8x16_t H = vld1q_u8(xw + 128 + 32 * k + 16 * h);
                    const uint8x16_t u[4] = {
                        vorrq_u8(vandq_u8(L0, m4), vandq_u8(vshlq_n_u8(H, 4), m30)),
                        vorrq_u8(vandq_u8(L1, m4), vandq_u8(vshlq_n_u8(H, 2), m30)),
                        vorrq_u8(vshrq_n_u8(L0, 4), vandq_u8(H, m30)),
                        vorrq_u8(vshrq_n_u8(L1, 4), vandq_u8(vshrq_n_u8(H, 2), m30)),
                    };
                    for (int g = 0; g < 4; g++) {
                        const int sb = 8 * k + 2 * g + h; /* sub-block of 16 */
                        const int32x4_t p = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vsubq_u8(u[g], off)), vld1q_s8(Q8K_AT_NEON(ya, sb)));
                        isum = vmlaq_n_s32(isum, p, sc[sb]);
                    }
                }
            }
            acc[r] = fma_neon(fp16_at(xw + 208) * da, (float)vaddvq_s32(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = acc[r];
}

/* q2_K and q3_K (q3): 2-bit fields (q3_K: minus 4 where the hmask bit is clear), sub-blocks of 16. */
NEON_INLINE void q2_3_K_neon(const int nr, const int q3, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out, dot16_fn * dot16) {
    const int wbytes = q3 ? Q3_K_BYTES : Q2_K_BYTES, qs_at = q3 ? 32 : 16;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float acc[4], macc[4];
    for (int r = 0; r < nr; r++) { acc[r] = 0.0f; macc[r] = 0.0f; }
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows_neon(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            uint8_t sc[16];
            if (q3) {
                q3k_scales(xw + 96, sc);
            } else {
                const uint8x16_t raw = vld1q_u8(xw);
                vst1q_u8(sc, vandq_u8(raw, vdupq_n_u8(15)));
                /* mins: sum(min[sb] * bsum[sb]) */
                const uint8x16_t mins = vshrq_n_u8(raw, 4);
                const int16x8_t m_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
                const int16x8_t m_hi = vreinterpretq_s16_u16(vmovl_high_u8(mins));
                const int16x8_t b_lo = vld1q_s16((const int16_t *)(const void *)(ya + Q8K_BSUMS));
                const int16x8_t b_hi = vld1q_s16((const int16_t *)(const void *)(ya + Q8K_BSUMS + 16));
                int32x4_t m = vmull_s16(vget_low_s16(m_lo), vget_low_s16(b_lo));
                m = vmlal_high_s16(m, m_lo, b_lo);
                m = vmlal_s16(m, vget_low_s16(m_hi), vget_low_s16(b_hi));
                m = vmlal_high_s16(m, m_hi, b_hi);
                macc[r] = fma_neon(fp16_at(xw + 82) * da, (float)vaddvq_s32(m), macc[r]);
            }
            int32x4_t isum = vdupq_n_s32(0);
            for (int k = 0; k < 2; k++) {
                for (int h = 0; h < 2; h++) { /* l = 16h .. 16h+15 */
                    uint8x16_t q = vld1q_u8(xw + qs_at + 32 * k + 16 * h);
                    const uint8x16_t hm = q3 ? vld1q_u8(xw + 16 * h) : vdupq_n_u8(0); /* hmask[l] */
                    for (int j = 0; j < 4; j++) {
                        const int sb = 8 * k + 2 * j + h;
                        int8x16_t v = vreinterpretq_s8_u8(vandq_u8(q, m3));
                        if (q3) {
                            /* minus 4 where bit 4k+j of hmask is clear */
                            const uint8x16_t set = vtstq_u8(hm, vdupq_n_u8((uint8_t)(1u << (4 * k + j))));
                            v = vreinterpretq_s8_u8(vsubq_u8(vreinterpretq_u8_s8(v), vbicq_u8(four, set)));
                        }
                        const int32x4_t p = dot16(vdupq_n_s32(0), v, vld1q_s8(Q8K_AT_NEON(ya, sb)));
                        isum = vmlaq_n_s32(isum, p, q3 ? sc[sb] - 32 : sc[sb]);
                        q = vshrq_n_u8(q, 2);
                    }
                }
            }
            acc[r] = fma_neon(fp16_at(xw + (q3 ? 108 : 80)) * da, (float)vaddvq_s32(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = acc[r] - macc[r];
}

NEON_INLINE void iq4_xs_neon(const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out, dot16_fn * dot16) {
    const int8x16_t table = vld1q_s8(iq4nl_values);
    float acc[4];
    for (int r = 0; r < nr; r++) acc[r] = 0.0f;
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows_neon(w, stride, n / 256 * IQ4_XS_BYTES, ib * IQ4_XS_BYTES, IQ4_XS_BYTES);
        const float da = ld_f32(ya);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * IQ4_XS_BYTES;
            int32x4_t isum = vdupq_n_s32(0);
            for (int s = 0; s < 8; s++) {
                uint8x16_t u0, u1;
                nibbles_neon(xw + 8 + 16 * s, &u0, &u1);
                const int32x4_t p = dot32_neon(dot16, vqtbl1q_s8(table, u0), vqtbl1q_s8(table, u1), Q8K_AT_NEON(ya, 2 * s));
                isum = vmlaq_n_s32(isum, p, iq4xs_scale(xw, s) - 32);
            }
            acc[r] = fma_neon(fp16_at(xw) * da, (float)vaddvq_s32(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = acc[r];
}

/* --- f32 / f16 / bf16: 16 values per step in four accumulators (no integer products: one version
 * serves both paths) --- */

NEON_INLINE float32x4_t load4_neon(const int type, const uint8_t * p, int64_t i) {
    if (type == MEMRA_TYPE_F32) return vld1q_f32((const float *)(const void *)(p + 4 * i));
    const uint16x4_t h = vld1_u16((const uint16_t *)(const void *)(p + 2 * i));
    if (type == MEMRA_TYPE_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h)); /* fcvtl: exact */
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

NEON_INLINE float load1_float_neon(const int type, const uint8_t * p, int64_t i) {
    return type == MEMRA_TYPE_F32 ? load_f32_at(p, i) : type == MEMRA_TYPE_F16 ? load_f16_at(p, i) : load_bf16_at(p, i);
}

NEON_INLINE void float_rows_neon(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out) {
    float32x4_t acc[4][4];
    float tail[4];
    for (int r = 0; r < nr; r++) {
        for (int k = 0; k < 4; k++) acc[r][k] = vdupq_n_f32(0.0f);
        tail[r] = 0.0f;
    }
    int64_t i = 0;
    const int64_t esize = type == MEMRA_TYPE_F32 ? 4 : 2;
    for (; i + 16 <= n; i += 16) {
        if (nr == 4) prefetch_next_rows_neon(w, stride, n * esize, i * esize, 16 * esize);
        float32x4_t av[4];
        for (int k = 0; k < 4; k++) av[k] = load4_neon(type, a, i + 4 * k);
        for (int r = 0; r < nr; r++)
            for (int k = 0; k < 4; k++) acc[r][k] = vfmaq_f32(acc[r][k], load4_neon(type, w + r * stride, i + 4 * k), av[k]);
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t av = load4_neon(type, a, i);
        for (int r = 0; r < nr; r++) acc[r][0] = vfmaq_f32(acc[r][0], load4_neon(type, w + r * stride, i), av);
    }
    for (; i < n; i++)
        for (int r = 0; r < nr; r++) tail[r] = fma_neon(load1_float_neon(type, w + r * stride, i), load1_float_neon(type, a, i), tail[r]);
    for (int r = 0; r < nr; r++) out[r] = hsum4_neon(vaddq_f32(vaddq_f32(acc[r][0], acc[r][1]), vaddq_f32(acc[r][2], acc[r][3]))) + tail[r];
}

/* --- entry points: name_neon_rowsN (baseline) and name_neondot_rowsN (sdot) --- */

#ifdef MEMRA_NEONDOT
#define NEON_ROWS(name, body)                                                                          \
    ROWS_1_4(name##_neon, NEON_FN, body(dot16_neon))                                                   \
    ROWS_1_4(name##_neondot, NEONDOT_FN, body(dot16_neondot))
#else
#define NEON_ROWS(name, body) ROWS_1_4(name##_neon, NEON_FN, body(dot16_neon))
#endif

#define Q8_0_NEON(dot) blocks32_neon(MEMRA_TYPE_Q8_0, NR, n, w, stride, a, out, dot)
#define Q4_0_NEON(dot) blocks32_neon(MEMRA_TYPE_Q4_0, NR, n, w, stride, a, out, dot)
#define Q4_1_NEON(dot) blocks32_neon(MEMRA_TYPE_Q4_1, NR, n, w, stride, a, out, dot)
#define Q5_0_NEON(dot) blocks32_neon(MEMRA_TYPE_Q5_0, NR, n, w, stride, a, out, dot)
#define Q5_1_NEON(dot) blocks32_neon(MEMRA_TYPE_Q5_1, NR, n, w, stride, a, out, dot)
#define IQ4_NL_NEON(dot) blocks32_neon(MEMRA_TYPE_IQ4_NL, NR, n, w, stride, a, out, dot)
#define Q2_K_NEON(dot) q2_3_K_neon(NR, 0, n, w, stride, a, out, dot)
#define Q3_K_NEON(dot) q2_3_K_neon(NR, 1, n, w, stride, a, out, dot)
#define Q4_K_NEON(dot) q4_K_neon(NR, 0, n, w, stride, a, out, dot)
#define Q5_K_NEON(dot) q4_K_neon(NR, 1, n, w, stride, a, out, dot)
#define Q6_K_NEON(dot) q6_K_neon(NR, n, w, stride, a, out, dot)
#define IQ4_XS_NEON(dot) iq4_xs_neon(NR, n, w, stride, a, out, dot)
#define F32_NEON(dot) ((void)(dot), float_rows_neon(MEMRA_TYPE_F32, NR, n, w, stride, a, out))
#define F16_NEON(dot) ((void)(dot), float_rows_neon(MEMRA_TYPE_F16, NR, n, w, stride, a, out))
#define BF16_NEON(dot) ((void)(dot), float_rows_neon(MEMRA_TYPE_BF16, NR, n, w, stride, a, out))

NEON_ROWS(q8_0, Q8_0_NEON)
NEON_ROWS(q4_0, Q4_0_NEON)
NEON_ROWS(q4_1, Q4_1_NEON)
NEON_ROWS(q5_0, Q5_0_NEON)
NEON_ROWS(q5_1, Q5_1_NEON)
NEON_ROWS(iq4_nl, IQ4_NL_NEON)
NEON_ROWS(q2_K, Q2_K_NEON)
NEON_ROWS(q3_K, Q3_K_NEON)
NEON_ROWS(q4_K, Q4_K_NEON)
NEON_ROWS(q5_K, Q5_K_NEON)
NEON_ROWS(q6_K, Q6_K_NEON)
NEON_ROWS(iq4_xs, IQ4_XS_NEON)
NEON_ROWS(f32, F32_NEON)
NEON_ROWS(f16, F16_NEON)
NEON_ROWS(bf16, BF16_NEON)

/* the i-quants below iq4: their row kernels and decoded rows */
#include "quant-dot-iq-neon.h"

/* 0 = no Advanced SIMD (not seen on AArch64 Linux), 1 = baseline NEON, 2 = NEON with dotprod. */
static int arm_level(void) {
#if defined(__linux__)
    const unsigned long hwcap = getauxval(AT_HWCAP);
    if (!(hwcap & HWCAP_ASIMD)) return 0;
    return (hwcap & HWCAP_ASIMDDP) ? 2 : 1;
#else
    return 1; /* Advanced SIMD is part of AArch64; dotprod detection is Linux-only for now */
#endif
}

#endif /* ARM NEON */

/* ============================================================================================== */
/* 7. Kernel tables, run-time selection, entry points                                             */
/* ============================================================================================== */

typedef struct isa_kernels {
    const char * name;
    dot_kernel * rows1[TYPE_SLOTS];
    dot_kernel * rows4[TYPE_SLOTS];
    dot_many_kernel * many[TYPE_SLOTS]; /* optional: memra_dot_rows loops rows1 where NULL */
    convert_kernel * to_q8_0, * to_q8_1, * to_q8_K, * to_f16, * to_bf16;
    /* optional: decoded rows (see SCALAR_IQ_DECODED), decoded_block[type] bytes per block of four rows;
     * where prepare[type] is set, the decoded kernel reads activation rows it prepared (prepared_block[type]
     * bytes per block) */
    decode_kernel * decode[TYPE_SLOTS];
    decoded_kernel * decoded[TYPE_SLOTS];
    int decoded_block[TYPE_SLOTS];
    prepare_kernel * prepare[TYPE_SLOTS];
    int prepared_block[TYPE_SLOTS];
    decoded_rows_kernel * decoded_rows[TYPE_SLOTS]; /* optional: memra_dot_decoded_tile loops decoded where NULL */
} isa_kernels;

/* The i-quants below iq4 (the paths with kernels for them): field "decode" or "decoded" of path isa;
 * IQ_DECODED_BLOCKS: their bytes per block of four rows. The x86 paths add iq4_xs and iq4_nl. */
#define IQ_DECODE_TYPES(field, isa)                                                               \
    [MEMRA_TYPE_IQ2_XXS] = iq2_xxs_##isa##_##field, [MEMRA_TYPE_IQ2_XS] = iq2_xs_##isa##_##field,   \
    [MEMRA_TYPE_IQ2_S] = iq2_s_##isa##_##field, [MEMRA_TYPE_IQ3_XXS] = iq3_xxs_##isa##_##field,     \
    [MEMRA_TYPE_IQ3_S] = iq3_s_##isa##_##field, [MEMRA_TYPE_IQ1_S] = iq1_s_##isa##_##field,         \
    [MEMRA_TYPE_IQ1_M] = iq1_m_##isa##_##field,
#define IQ_DECODED_BLOCKS(bytes)                                                                  \
    [MEMRA_TYPE_IQ2_XXS] = (bytes), [MEMRA_TYPE_IQ2_XS] = (bytes), [MEMRA_TYPE_IQ2_S] = (bytes),    \
    [MEMRA_TYPE_IQ3_XXS] = (bytes), [MEMRA_TYPE_IQ3_S] = (bytes), [MEMRA_TYPE_IQ1_S] = (bytes),     \
    [MEMRA_TYPE_IQ1_M] = (bytes),
#define X86_DECODE_ENTRIES(isa, iq_bytes, iq4_xs_bytes, iq4_nl_bytes)                             \
    .decode = { IQ_DECODE_TYPES(decode, isa) [MEMRA_TYPE_IQ4_XS] = iq4_xs_##isa##_decode,           \
                [MEMRA_TYPE_IQ4_NL] = iq4_nl_##isa##_decode },                                      \
    .decoded = { IQ_DECODE_TYPES(decoded, isa) [MEMRA_TYPE_IQ4_XS] = iq4_xs_##isa##_decoded,        \
                 [MEMRA_TYPE_IQ4_NL] = iq4_nl_##isa##_decoded },                                    \
    .decoded_block = { IQ_DECODED_BLOCKS(iq_bytes) [MEMRA_TYPE_IQ4_XS] = (iq4_xs_bytes),            \
                       [MEMRA_TYPE_IQ4_NL] = (iq4_nl_bytes) }

#define KERNEL_ENTRIES(rows, sfx)                                                                     \
    .rows = {                                                                                         \
        [MEMRA_TYPE_F32] = f32_##rows##_##sfx, [MEMRA_TYPE_F16] = f16_##rows##_##sfx,                 \
        [MEMRA_TYPE_BF16] = bf16_##rows##_##sfx, [MEMRA_TYPE_Q8_0] = q8_0_##rows##_##sfx,             \
        [MEMRA_TYPE_Q4_0] = q4_0_##rows##_##sfx, [MEMRA_TYPE_Q4_1] = q4_1_##rows##_##sfx,             \
        [MEMRA_TYPE_Q5_0] = q5_0_##rows##_##sfx, [MEMRA_TYPE_Q5_1] = q5_1_##rows##_##sfx,             \
        [MEMRA_TYPE_IQ4_NL] = iq4_nl_##rows##_##sfx, [MEMRA_TYPE_Q2_K] = q2_K_##rows##_##sfx,         \
        [MEMRA_TYPE_Q3_K] = q3_K_##rows##_##sfx, [MEMRA_TYPE_Q4_K] = q4_K_##rows##_##sfx,             \
        [MEMRA_TYPE_Q5_K] = q5_K_##rows##_##sfx, [MEMRA_TYPE_Q6_K] = q6_K_##rows##_##sfx,             \
        [MEMRA_TYPE_IQ4_XS] = iq4_xs_##rows##_##sfx, [MEMRA_TYPE_IQ2_XXS] = iq2_xxs_##rows##_##sfx,   \
        [MEMRA_TYPE_IQ2_XS] = iq2_xs_##rows##_##sfx, [MEMRA_TYPE_IQ2_S] = iq2_s_##rows##_##sfx,       \
        [MEMRA_TYPE_IQ3_XXS] = iq3_xxs_##rows##_##sfx, [MEMRA_TYPE_IQ3_S] = iq3_s_##rows##_##sfx,     \
        [MEMRA_TYPE_IQ1_S] = iq1_s_##rows##_##sfx, [MEMRA_TYPE_IQ1_M] = iq1_m_##rows##_##sfx,         \
    }

/* The scalar kernels are named name_rowsN_scalar; the SIMD ones name_isa_rowsN. A type a path has no
 * kernel for would run the scalar kernel (see kernel_for). */
#define SIMD_TYPES(rows, isa)                                                                         \
        [MEMRA_TYPE_F32] = f32_##isa##_##rows, [MEMRA_TYPE_F16] = f16_##isa##_##rows,                 \
        [MEMRA_TYPE_BF16] = bf16_##isa##_##rows, [MEMRA_TYPE_Q8_0] = q8_0_##isa##_##rows,             \
        [MEMRA_TYPE_Q4_0] = q4_0_##isa##_##rows, [MEMRA_TYPE_Q4_1] = q4_1_##isa##_##rows,             \
        [MEMRA_TYPE_Q5_0] = q5_0_##isa##_##rows, [MEMRA_TYPE_Q5_1] = q5_1_##isa##_##rows,             \
        [MEMRA_TYPE_IQ4_NL] = iq4_nl_##isa##_##rows, [MEMRA_TYPE_Q2_K] = q2_K_##isa##_##rows,         \
        [MEMRA_TYPE_Q3_K] = q3_K_##isa##_##rows, [MEMRA_TYPE_Q4_K] = q4_K_##isa##_##rows,             \
        [MEMRA_TYPE_Q5_K] = q5_K_##isa##_##rows, [MEMRA_TYPE_Q6_K] = q6_K_##isa##_##rows,             \
        [MEMRA_TYPE_IQ4_XS] = iq4_xs_##isa##_##rows,
/* NEON: the low-bit i-quants too (quant-dot-iq-neon.h) */
#define SIMD_ENTRIES(rows, isa) .rows = { SIMD_TYPES(rows, isa) IQ_DECODE_TYPES(rows, isa) }
/* x86: the low-bit i-quants too */
#define X86_ENTRIES(rows, isa)                                                                        \
    .rows = {                                                                                         \
        SIMD_TYPES(rows, isa)                                                                         \
        [MEMRA_TYPE_IQ2_XXS] = iq2_xxs_##isa##_##rows, [MEMRA_TYPE_IQ2_XS] = iq2_xs_##isa##_##rows,   \
        [MEMRA_TYPE_IQ2_S] = iq2_s_##isa##_##rows, [MEMRA_TYPE_IQ3_XXS] = iq3_xxs_##isa##_##rows,     \
        [MEMRA_TYPE_IQ3_S] = iq3_s_##isa##_##rows, [MEMRA_TYPE_IQ1_S] = iq1_s_##isa##_##rows,         \
        [MEMRA_TYPE_IQ1_M] = iq1_m_##isa##_##rows,                                                    \
    }

static const isa_kernels kernels_scalar = {
    .name = "scalar",
    KERNEL_ENTRIES(rows1, scalar),
    KERNEL_ENTRIES(rows4, scalar),
    .to_q8_0 = to_q8_0_scalar, .to_q8_1 = to_q8_1_scalar, .to_q8_K = to_q8_K_scalar,
    .to_f16 = to_f16_scalar, .to_bf16 = to_bf16_scalar,
    .decode = { IQ_DECODE_TYPES(decode, scalar) }, .decoded = { IQ_DECODE_TYPES(decoded, scalar) },
    .decoded_block = { IQ_DECODED_BLOCKS(4 * SCALAR_DECODED_BLOCK) },
};

#ifdef MEMRA_X86
static const isa_kernels kernels_avx2 = {
    .name = "avx2",
    X86_ENTRIES(rows1, avx2),
    X86_ENTRIES(rows4, avx2),
    .to_q8_0 = to_q8_0_avx2, .to_q8_1 = to_q8_1_avx2, .to_q8_K = to_q8_K_avx2,
    .to_f16 = to_f16_avx2, .to_bf16 = to_bf16_avx2,
    X86_DECODE_ENTRIES(avx2, 4 * AVX2_DECODED_BLOCK, 4 * AVX2_IQ4_XS_DECODED_BLOCK, AVX2_IQ4_NL_DECODED_BLOCK),
    .prepare = { IQ_DECODE_TYPES(prepare, avx2) },
    .prepared_block = { IQ_DECODED_BLOCKS(AVX2_IQ_PREPARED_BLOCK) },
    .decoded_rows = { IQ_DECODE_TYPES(decoded_rows, avx2) },
};

static const isa_kernels kernels_avx512vnni = {
    .name = "avx512vnni",
    X86_ENTRIES(rows1, avx512),
    X86_ENTRIES(rows4, avx512),
    .many = { [MEMRA_TYPE_Q8_0] = q8_0_avx512_many, [MEMRA_TYPE_Q4_0] = q4_0_avx512_many, [MEMRA_TYPE_Q4_1] = q4_1_avx512_many,
              [MEMRA_TYPE_Q5_0] = q5_0_avx512_many, [MEMRA_TYPE_Q5_1] = q5_1_avx512_many, [MEMRA_TYPE_IQ4_NL] = iq4_nl_avx512_many,
              [MEMRA_TYPE_Q4_K] = q4_K_avx512_many, [MEMRA_TYPE_Q5_K] = q5_K_avx512_many },
    /* activation conversion is O(n) per row: the AVX2 versions are plenty (and bit-identical) */
    .to_q8_0 = to_q8_0_avx2, .to_q8_1 = to_q8_1_avx2, .to_q8_K = to_q8_K_avx2,
    .to_f16 = to_f16_avx2, .to_bf16 = to_bf16_avx2,
    X86_DECODE_ENTRIES(avx512, AVX512_IQ_DECODED_BLOCK, 4 * AVX512_IQ4_XS_DECODED_BLOCK, AVX512_IQ4_NL_DECODED_STEP / 4),
    .prepare = { IQ_DECODE_TYPES(prepare, avx512) [MEMRA_TYPE_IQ4_XS] = iq4_xs_avx512_prepare, [MEMRA_TYPE_IQ4_NL] = iq4_nl_avx512_prepare },
    .prepared_block = { [MEMRA_TYPE_IQ2_XXS] = AVX512_IQ_PREPARED_BLOCK, [MEMRA_TYPE_IQ2_XS] = AVX512_IQ_PREPARED_BLOCK,
                        [MEMRA_TYPE_IQ2_S] = AVX512_IQ_PREPARED_BLOCK, [MEMRA_TYPE_IQ3_XXS] = AVX512_IQ_PREPARED_BLOCK,
                        [MEMRA_TYPE_IQ3_S] = AVX512_IQ_PREPARED_BLOCK, [MEMRA_TYPE_IQ1_S] = AVX512_IQ_PREPARED_BLOCK,
                        [MEMRA_TYPE_IQ1_M] = AVX512_IQ_PREPARED_BLOCK, [MEMRA_TYPE_IQ4_XS] = AVX512_IQ4_XS_PREPARED_BLOCK,
                        [MEMRA_TYPE_IQ4_NL] = AVX512_IQ4_NL_PREPARED_STEP / 4 },
    .decoded_rows = { IQ_DECODE_TYPES(decoded_rows, avx512) },
};
#endif

#ifdef MEMRA_NEON
static const isa_kernels kernels_neon = {
    .name = "neon",
    SIMD_ENTRIES(rows1, neon),
    SIMD_ENTRIES(rows4, neon),
    .to_q8_0 = to_q8_0_neon, .to_q8_1 = to_q8_1_neon, .to_q8_K = to_q8_K_neon,
    .to_f16 = to_f16_neon, .to_bf16 = to_bf16_neon,
    .decode = { IQ_DECODE_TYPES(decode, neon) }, .decoded = { IQ_DECODE_TYPES(decoded, neon) },
    .decoded_block = { IQ_DECODED_BLOCKS(4 * NEON_IQ_DECODED_BLOCK) },
};

#ifdef MEMRA_NEONDOT
static const isa_kernels kernels_neondot = {
    .name = "neondot",
    SIMD_ENTRIES(rows1, neondot),
    SIMD_ENTRIES(rows4, neondot),
    /* the conversions have no integer products: the baseline NEON ones serve both paths */
    .to_q8_0 = to_q8_0_neon, .to_q8_1 = to_q8_1_neon, .to_q8_K = to_q8_K_neon,
    .to_f16 = to_f16_neon, .to_bf16 = to_bf16_neon,
    /* (the decoded rows are the same bytes on both paths) */
    .decode = { IQ_DECODE_TYPES(decode, neon) }, .decoded = { IQ_DECODE_TYPES(decoded, neondot) },
    .decoded_block = { IQ_DECODED_BLOCKS(4 * NEON_IQ_DECODED_BLOCK) },
};
#endif
#endif

/* The table for a path name if this build and CPU can run it, else NULL. */
static const isa_kernels * kernels_named(const char * isa) {
    if (isa == NULL) return NULL;
    if (strcmp(isa, "scalar") == 0) return &kernels_scalar;
#ifdef MEMRA_X86
    static int cached = -1; /* racing first calls all store the same value */
    int level = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (level < 0) {
        level = x86_level();
        __atomic_store_n(&cached, level, __ATOMIC_RELAXED);
    }
    if (strcmp(isa, "avx2") == 0 && level >= 1) return &kernels_avx2;
    if (strcmp(isa, "avx512vnni") == 0 && level >= 2) return &kernels_avx512vnni;
#endif
#ifdef MEMRA_NEON
    static int cached_arm = -1; /* racing first calls all store the same value */
    int arm = __atomic_load_n(&cached_arm, __ATOMIC_RELAXED);
    if (arm < 0) {
        arm = arm_level();
        __atomic_store_n(&cached_arm, arm, __ATOMIC_RELAXED);
    }
    if (strcmp(isa, "neon") == 0 && arm >= 1) return &kernels_neon;
#ifdef MEMRA_NEONDOT
    if (strcmp(isa, "neondot") == 0 && arm >= 2) return &kernels_neondot;
#endif
#endif
    return NULL;
}

static const isa_kernels * kernels_best(void) {
    const isa_kernels * k;
    if ((k = kernels_named("avx512vnni")) != NULL) return k;
    if ((k = kernels_named("avx2")) != NULL) return k;
    if ((k = kernels_named("neondot")) != NULL) return k;
    if ((k = kernels_named("neon")) != NULL) return k;
    return &kernels_scalar;
}

/* Chosen once (MEMRA_CPU_ISA if it names an available path, else the best one); the pointer is
 * published atomically, and racing first calls store the same value. */
static const isa_kernels * kernels_active(void) {
    static const isa_kernels * chosen;
    const isa_kernels * k = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (k != NULL) return k;
    k = kernels_named(getenv("MEMRA_CPU_ISA"));
    if (k == NULL) k = kernels_best();
    __atomic_store_n(&chosen, k, __ATOMIC_RELEASE);
    return k;
}

static void quantize_with(const isa_kernels * k, int weight_type, const float * x, void * out, int64_t n) {
    uint8_t * y = (uint8_t *)out;
    switch (memra_dot_activation_type(weight_type)) {
    case MEMRA_TYPE_Q8_0: k->to_q8_0(x, y, n); break;
    case MEMRA_TYPE_Q8_1: k->to_q8_1(x, y, n); break;
    case MEMRA_TYPE_Q8_K: k->to_q8_K(x, y, n); break;
    case MEMRA_TYPE_F16: k->to_f16(x, y, n); break;
    case MEMRA_TYPE_BF16: k->to_bf16(x, y, n); break;
    case MEMRA_TYPE_F32: memcpy(y, x, (size_t)n * sizeof(float)); break;
    default: break;
    }
}

/* The path's kernel for `type`, else the scalar one (NULL: the type has none). */
static dot_kernel * kernel_for(const isa_kernels * k, int type, int four) {
    if (type < 0 || type >= TYPE_SLOTS) return NULL;
    dot_kernel * kernel = four ? k->rows4[type] : k->rows1[type];
    return kernel != NULL ? kernel : four ? kernels_scalar.rows4[type] : kernels_scalar.rows1[type];
}

static float dot_with(const isa_kernels * k, int type, int64_t n, const void * w, const void * a) {
    dot_kernel * kernel = kernel_for(k, type, 0);
    if (kernel == NULL) return __builtin_nanf("");
    float out = 0.0f;
    kernel(n, (const uint8_t *)w, 0, (const uint8_t *)a, &out);
    return out;
}

static void dot4_with(const isa_kernels * k, int type, int64_t n, const void * w, size_t stride, const void * a, float * out) {
    dot_kernel * kernel = kernel_for(k, type, 1);
    if (kernel == NULL) {
        for (int r = 0; r < 4; r++) out[r] = __builtin_nanf("");
        return;
    }
    kernel(n, (const uint8_t *)w, stride, (const uint8_t *)a, out);
}

void memra_quantize_activation_row(int weight_type, const float * x, void * out, int64_t n) {
    quantize_with(kernels_active(), weight_type, x, out, n);
}

float memra_dot_row(int type, int64_t n, const void * weight_row, const void * activation_row) {
    return dot_with(kernels_active(), type, n, weight_row, activation_row);
}

static void dot_many_with(const isa_kernels * k, int type, int64_t n, const void * w, size_t stride, int64_t rows, const void * a, float * out) {
    if (type >= 0 && type < TYPE_SLOTS && k->many[type] != NULL) {
        k->many[type](n, (const uint8_t *)w, stride, rows, (const uint8_t *)a, out);
        return;
    }
    for (int64_t r = 0; r < rows; r++) out[r] = dot_with(k, type, n, (const uint8_t *)w + (size_t)r * stride, a);
}

void memra_dot_rows(int type, int64_t n, const void * weight_rows, size_t row_stride, int64_t rows, const void * activation_row, float * out) {
    dot_many_with(kernels_active(), type, n, weight_rows, row_stride, rows, activation_row, out);
}

void memra_dot_rows4(int type, int64_t n, const void * weight_rows, size_t row_stride, const void * activation_row, float * out) {
    dot4_with(kernels_active(), type, n, weight_rows, row_stride, activation_row, out);
}

/* The table whose kernels run `type` on path k: k's own, or the scalar ones it falls back to. */
static const isa_kernels * route_for(const isa_kernels * k, int type) {
    return type >= 0 && type < TYPE_SLOTS && k->rows1[type] == NULL ? &kernels_scalar : k;
}

static size_t decoded_bytes_with(const isa_kernels * k, int type, int64_t n) {
    if (type < 0 || type >= TYPE_SLOTS || n <= 0 || block_values(type) == 0 || n % block_values(type) != 0) return 0;
    k = route_for(k, type);
    return k->decode[type] != NULL ? (size_t)(n / block_values(type)) * (size_t)k->decoded_block[type] : 0;
}

static void decode_with(const isa_kernels * k, int type, int64_t n, const void * w, size_t stride, void * decoded) {
    if (decoded_bytes_with(k, type, n) == 0) return;
    route_for(k, type)->decode[type](n, (const uint8_t *)w, stride, (uint8_t *)decoded);
}

static void decoded_with(const isa_kernels * k, int type, int64_t n, const void * decoded, const void * a, float * out) {
    if (decoded_bytes_with(k, type, n) == 0) {
        for (int r = 0; r < 4; r++) out[r] = __builtin_nanf("");
        return;
    }
    route_for(k, type)->decoded[type](n, (const uint8_t *)decoded, (const uint8_t *)a, out);
}

static void decoded_tile_with(const isa_kernels * k, int type, int64_t n, const void * decoded, const void * a, size_t a_stride, int64_t rows, float * out,
                              int64_t out_stride) {
    if (decoded_bytes_with(k, type, n) != 0 && route_for(k, type)->decoded_rows[type] != NULL) {
        route_for(k, type)->decoded_rows[type](n, (const uint8_t *)decoded, (const uint8_t *)a, a_stride, rows, out, out_stride);
        return;
    }
    for (int64_t c = 0; c < rows; c++) {
        float four[4];
        decoded_with(k, type, n, decoded, (const uint8_t *)a + (size_t)c * a_stride, four);
        for (int r = 0; r < 4; r++) out[c * out_stride + r] = four[r];
    }
}

static size_t prepared_bytes_with(const isa_kernels * k, int type, int64_t n) {
    if (decoded_bytes_with(k, type, n) == 0) return 0;
    k = route_for(k, type);
    return k->prepare[type] != NULL ? (size_t)(n / block_values(type)) * (size_t)k->prepared_block[type] : 0;
}

static void prepare_with(const isa_kernels * k, int type, int64_t n, const void * a, void * prepared) {
    if (prepared_bytes_with(k, type, n) == 0) return;
    route_for(k, type)->prepare[type](n, (const uint8_t *)a, (uint8_t *)prepared);
}

size_t memra_dot_decoded_bytes(int type, int64_t n) { return decoded_bytes_with(kernels_active(), type, n); }

size_t memra_dot_decoded_prepared_bytes(int type, int64_t n) { return prepared_bytes_with(kernels_active(), type, n); }

void memra_dot_decoded_prepare(int type, int64_t n, const void * activation_row, void * prepared) {
    prepare_with(kernels_active(), type, n, activation_row, prepared);
}

void memra_dot_decode_rows4(int type, int64_t n, const void * weight_rows, size_t row_stride, void * decoded) {
    decode_with(kernels_active(), type, n, weight_rows, row_stride, decoded);
}

void memra_dot_decoded_rows4(int type, int64_t n, const void * decoded, const void * activation_row, float * out) {
    decoded_with(kernels_active(), type, n, decoded, activation_row, out);
}

void memra_dot_decoded_tile(int type, int64_t n, const void * decoded, const void * activation_rows, size_t activation_stride, int64_t rows, float * out,
                            int64_t out_stride) {
    decoded_tile_with(kernels_active(), type, n, decoded, activation_rows, activation_stride, rows, out, out_stride);
}

const char * memra_dot_isa(void) { return kernels_active()->name; }

int memra_dot_isa_available(const char * isa) { return kernels_named(isa) != NULL; }

static const isa_kernels * kernels_or_scalar(const char * isa) {
    const isa_kernels * k = kernels_named(isa);
    return k != NULL ? k : &kernels_scalar;
}

void memra_quantize_activation_row_isa(const char * isa, int weight_type, const float * x, void * out, int64_t n) {
    quantize_with(kernels_or_scalar(isa), weight_type, x, out, n);
}

float memra_dot_row_isa(const char * isa, int type, int64_t n, const void * weight_row, const void * activation_row) {
    return dot_with(kernels_or_scalar(isa), type, n, weight_row, activation_row);
}

void memra_dot_rows4_isa(const char * isa, int type, int64_t n, const void * weight_rows, size_t row_stride, const void * activation_row, float * out) {
    dot4_with(kernels_or_scalar(isa), type, n, weight_rows, row_stride, activation_row, out);
}

void memra_dot_rows_isa(const char * isa, int type, int64_t n, const void * weight_rows, size_t row_stride, int64_t rows, const void * activation_row,
                        float * out) {
    dot_many_with(kernels_or_scalar(isa), type, n, weight_rows, row_stride, rows, activation_row, out);
}

size_t memra_dot_decoded_bytes_isa(const char * isa, int type, int64_t n) { return decoded_bytes_with(kernels_or_scalar(isa), type, n); }

size_t memra_dot_decoded_prepared_bytes_isa(const char * isa, int type, int64_t n) { return prepared_bytes_with(kernels_or_scalar(isa), type, n); }

void memra_dot_decoded_prepare_isa(const char * isa, int type, int64_t n, const void * activation_row, void * prepared) {
    prepare_with(kernels_or_scalar(isa), type, n, activation_row, prepared);
}

void memra_dot_decode_rows4_isa(const char * isa, int type, int64_t n, const void * weight_rows, size_t row_stride, void * decoded) {
    decode_with(kernels_or_scalar(isa), type, n, weight_rows, row_stride, decoded);
}

void memra_dot_decoded_rows4_isa(const char * isa, int type, int64_t n, const void * decoded, const void * activation_row, float * out) {
    decoded_with(kernels_or_scalar(isa), type, n, decoded, activation_row, out);
}

void memra_dot_decoded_tile_isa(const char * isa, int type, int64_t n, const void * decoded, const void * activation_rows, size_t activation_stride,
                                int64_t rows, float * out, int64_t out_stride) {
    decoded_tile_with(kernels_or_scalar(isa), type, n, decoded, activation_rows, activation_stride, rows, out, out_stride);
}
