/*
 * Dequantization of ggml blocks to f32 (ggml-quants.c dequantize_row_*), and the half-precision
 * conversions ggml uses. Used for embedding lookups and for norm weights stored in a 16-bit type.
 * Blocks are read byte by byte (no struct layouts), so any alignment works.
 */
#include <string.h>

#include "cpu-internal.h"

/* (each file that includes the grids uses only some of them) */
#define MEMRA_IQ_TABLE static const __attribute__((unused))
#include "../common/iq-grids.h"

#define QK_K 256

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float memra_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exponent = (h >> 10) & 0x1f;
    const uint32_t mantissa = h & 0x3ff;
    if (exponent == 0) {
        const float magnitude = (float)mantissa * 0x1.0p-24f; /* zero or subnormal */
        return f32_from_bits(f32_bits(magnitude) | sign);
    }
    if (exponent == 31) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
    return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/* Round to nearest even, as ggml's ggml_compute_fp32_to_fp16. */
uint16_t memra_f32_to_f16(float f) {
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (__builtin_fabsf(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xff000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t exponent_bits = (bits >> 13) & 0x00007c00u;
    const uint32_t mantissa_bits = bits & 0x00000fffu;
    const uint32_t nonsign = exponent_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

float memra_bf16_to_f32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even; NaN stays NaN (quiet), as ggml_compute_fp32_to_bf16. */
uint16_t memra_f32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

static inline float half_at(const uint8_t * p) {
    return memra_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

static const int8_t kvalues_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

int64_t memra_dequantize_block_size(int type) {
    switch (type) {
        case MEMRA_TYPE_F32: case MEMRA_TYPE_F16: case MEMRA_TYPE_BF16: return 1;
        case MEMRA_TYPE_Q4_0: case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_0: case MEMRA_TYPE_Q5_1: case MEMRA_TYPE_Q8_0:
        case MEMRA_TYPE_IQ4_NL: return 32;
        case MEMRA_TYPE_Q2_K: case MEMRA_TYPE_Q3_K: case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K: case MEMRA_TYPE_Q6_K:
        case MEMRA_TYPE_IQ4_XS: case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ2_XS: case MEMRA_TYPE_IQ2_S: case MEMRA_TYPE_IQ3_XXS:
        case MEMRA_TYPE_IQ3_S: case MEMRA_TYPE_IQ1_S: case MEMRA_TYPE_IQ1_M: return QK_K;
        default: return 0;
    }
}

size_t memra_dequantize_block_bytes(int type) {
    switch (type) {
        case MEMRA_TYPE_F32: return 4;
        case MEMRA_TYPE_F16: case MEMRA_TYPE_BF16: return 2;
        case MEMRA_TYPE_Q4_0: return 18;
        case MEMRA_TYPE_Q4_1: return 20;
        case MEMRA_TYPE_Q5_0: return 22;
        case MEMRA_TYPE_Q5_1: return 24;
        case MEMRA_TYPE_Q8_0: return 34;
        case MEMRA_TYPE_IQ4_NL: return 18;
        case MEMRA_TYPE_Q2_K: return 84;
        case MEMRA_TYPE_Q3_K: return 110;
        case MEMRA_TYPE_Q4_K: return 144;
        case MEMRA_TYPE_Q5_K: return 176;
        case MEMRA_TYPE_Q6_K: return 210;
        case MEMRA_TYPE_IQ4_XS: return 136;
        case MEMRA_TYPE_IQ2_XXS: return 66;
        case MEMRA_TYPE_IQ2_XS: return 74;
        case MEMRA_TYPE_IQ2_S: return 82;
        case MEMRA_TYPE_IQ3_XXS: return 98;
        case MEMRA_TYPE_IQ3_S: return 110;
        case MEMRA_TYPE_IQ1_S: return 50;
        case MEMRA_TYPE_IQ1_M: return 56;
        default: return 0;
    }
}

/* q4_K / q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes. */
static inline void scale_min_k4(int j, const uint8_t * q, uint8_t * d, uint8_t * m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void dequantize_q4_0(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 18, y += 32) {
        const float d = half_at(x);
        for (int j = 0; j < 16; j++) {
            y[j] = ((x[2 + j] & 0x0f) - 8) * d;
            y[j + 16] = ((x[2 + j] >> 4) - 8) * d;
        }
    }
}

static void dequantize_q4_1(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 20, y += 32) {
        const float d = half_at(x), m = half_at(x + 2);
        for (int j = 0; j < 16; j++) {
            y[j] = (x[4 + j] & 0x0f) * d + m;
            y[j + 16] = (x[4 + j] >> 4) * d + m;
        }
    }
}

static void dequantize_q5_0(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 22, y += 32) {
        const float d = half_at(x);
        const uint32_t qh = (uint32_t)x[2] | ((uint32_t)x[3] << 8) | ((uint32_t)x[4] << 16) | ((uint32_t)x[5] << 24);
        for (int j = 0; j < 16; j++) {
            const uint8_t high0 = ((qh >> j) << 4) & 0x10;
            const uint8_t high1 = (qh >> (j + 12)) & 0x10;
            y[j] = (((x[6 + j] & 0x0f) | high0) - 16) * d;
            y[j + 16] = (((x[6 + j] >> 4) | high1) - 16) * d;
        }
    }
}

static void dequantize_q5_1(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 24, y += 32) {
        const float d = half_at(x), m = half_at(x + 2);
        const uint32_t qh = (uint32_t)x[4] | ((uint32_t)x[5] << 8) | ((uint32_t)x[6] << 16) | ((uint32_t)x[7] << 24);
        for (int j = 0; j < 16; j++) {
            const uint8_t high0 = ((qh >> j) << 4) & 0x10;
            const uint8_t high1 = (qh >> (j + 12)) & 0x10;
            y[j] = ((x[8 + j] & 0x0f) | high0) * d + m;
            y[j + 16] = ((x[8 + j] >> 4) | high1) * d + m;
        }
    }
}

static void dequantize_q8_0(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 34, y += 32) {
        const float d = half_at(x);
        for (int j = 0; j < 32; j++) y[j] = (int8_t)x[2 + j] * d;
    }
}

static void dequantize_iq4_nl(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 18, y += 32) {
        const float d = half_at(x);
        for (int j = 0; j < 16; j++) {
            y[j] = d * kvalues_iq4nl[x[2 + j] & 0x0f];
            y[j + 16] = d * kvalues_iq4nl[x[2 + j] >> 4];
        }
    }
}

static void dequantize_q2_K(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 84) {
        const uint8_t * scales = x;
        const uint8_t * q = x + 16;
        const float d = half_at(x + 80), min = half_at(x + 82);
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; j++) {
                uint8_t sc = scales[is++];
                float dl = d * (sc & 0xf), ml = min * (sc >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = scales[is++];
                dl = d * (sc & 0xf);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

static void dequantize_q3_K(const uint8_t * x, float * y, int64_t blocks) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    for (int64_t i = 0; i < blocks; i++, x += 110) {
        const uint8_t * hm = x;
        const uint8_t * q = x + 32;
        const float d_all = half_at(x + 108);
        uint32_t aux[4];
        memcpy(aux, x + 96, 12);
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t scales[16];
        memcpy(scales, aux, 16);
        int is = 0;
        uint8_t m = 1;
        for (int n = 0; n < QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; j++) {
                float dl = d_all * (scales[is++] - 32);
                for (int l = 0; l < 16; l++) *y++ = dl * ((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                dl = d_all * (scales[is++] - 32);
                for (int l = 0; l < 16; l++) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                shift += 2;
                m <<= 1;
            }
            q += 32;
        }
    }
}

static void dequantize_q4_K(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 144) {
        const float d = half_at(x), min = half_at(x + 2);
        const uint8_t * scales = x + 4;
        const uint8_t * q = x + 16;
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64) {
            scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

static void dequantize_q5_K(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 176) {
        const float d = half_at(x), min = half_at(x + 2);
        const uint8_t * scales = x + 4;
        const uint8_t * qh = x + 16;
        const uint8_t * ql = x + 48;
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

static void dequantize_q6_K(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 210) {
        const uint8_t * ql = x;
        const uint8_t * qh = x + 128;
        const int8_t * sc = (const int8_t *)(x + 192);
        const float d = half_at(x + 208);
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

static void dequantize_iq4_xs(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 136) {
        const float d = half_at(x);
        const uint16_t scales_h = (uint16_t)(x[2] | (x[3] << 8));
        const uint8_t * scales_l = x + 4;
        const uint8_t * qs = x + 8;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* ---- i-quants (layouts: quant-dot.c). Each group of 8 values is a grid entry of magnitudes with 8 sign
 * bits (iq2, iq3: 4 values per entry), or of g in {-1, 0, 1} plus a delta of +-1/8 (iq1). The float
 * expressions are ggml's, operation for operation. */

static inline uint32_t u32_at(const uint8_t * p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint16_t u16_at(const uint8_t * p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* y[j] = db * magnitude j * (sign bit j ? -1 : 1) for the 8 bytes of `grid` */
static inline void put8_signed(float * y, float db, uint64_t grid, unsigned signs) {
    for (int j = 0; j < 8; j++) y[j] = db * (float)((grid >> (8 * j)) & 255) * ((signs >> j) & 1 ? -1.f : 1.f);
}

static void dequantize_iq2_xxs(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 66) {
        const float d = half_at(x);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t * q = x + 2 + 8 * ib;
            const uint32_t aux = u32_at(q + 4);
            const float db = d * (0.5f + (aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) put8_signed(y, db, memra_iq2xxs_grid[q[l]], memra_ksigns_iq2xs[(aux >> (7 * l)) & 127]);
        }
    }
}

static void dequantize_iq2_xs(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 74) {
        const float d = half_at(x);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float db[2] = { d * (0.5f + (x[66 + ib] & 0xf)) * 0.25f, d * (0.5f + (x[66 + ib] >> 4)) * 0.25f };
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = u16_at(x + 2 + 8 * ib + 2 * l);
                put8_signed(y, db[l / 2], memra_iq2xs_grid[q & 511], memra_ksigns_iq2xs[q >> 9]);
            }
        }
    }
}

static void dequantize_iq2_s(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 82) {
        const float d = half_at(x);
        const uint8_t * qs = x + 2, * signs = x + 34, * qh = x + 66, * scales = x + 74;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float db[2] = { d * (0.5f + (scales[ib] & 0xf)) * 0.25f, d * (0.5f + (scales[ib] >> 4)) * 0.25f };
            for (int l = 0; l < 4; l++, y += 8) {
                put8_signed(y, db[l / 2], memra_iq2s_grid[qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300)], signs[4 * ib + l]);
            }
        }
    }
}

static void dequantize_iq3_xxs(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 98) {
        const float d = half_at(x);
        const uint8_t * qs = x + 2;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 8) {
            const uint32_t aux = u32_at(x + 66 + 4 * ib);
            const float db = d * (0.5f + (aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t grid = memra_iq3xxs_grid[qs[2 * l]] | (uint64_t)memra_iq3xxs_grid[qs[2 * l + 1]] << 32;
                put8_signed(y, db, grid, memra_ksigns_iq2xs[(aux >> (7 * l)) & 127]);
            }
        }
    }
}

static void dequantize_iq3_s(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 110) {
        const float d = half_at(x);
        const uint8_t * qs = x + 2, * qh = x + 66, * signs = x + 74, * scales = x + 106;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 8) {
            const float db = d * (1 + 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0xf));
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t grid = memra_iq3s_grid[qs[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)] |
                                      (uint64_t)memra_iq3s_grid[qs[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)] << 32;
                put8_signed(y, db, grid, signs[4 * ib + l]);
            }
        }
    }
}

/* y[j] = dl * (g_j + delta), g_j the int8 bytes of an iq1s_grid entry */
static inline void put8_iq1(float * y, float dl, uint64_t grid, float delta) {
    for (int j = 0; j < 8; j++) y[j] = dl * ((int8_t)(uint8_t)(grid >> (8 * j)) + delta);
}

static void dequantize_iq1_s(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 50) {
        const float d = half_at(x);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint16_t qh = u16_at(x + 34 + 2 * ib);
            const float dl = d * (2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -MEMRA_IQ1_DELTA : MEMRA_IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8) put8_iq1(y, dl, memra_iq1s_grid[x[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)], delta);
        }
    }
}

static void dequantize_iq1_m(const uint8_t * x, float * y, int64_t blocks) {
    for (int64_t i = 0; i < blocks; i++, x += 56) {
        const uint16_t sc[4] = { u16_at(x + 48), u16_at(x + 50), u16_at(x + 52), u16_at(x + 54) };
        const float d = memra_f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
        const uint8_t * qs = x, * qh = x + 32;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4, qh += 2) {
            const float dl1 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
            const float dl2 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned h = qh[l / 2] >> (4 * (l % 2));
                put8_iq1(y, l < 2 ? dl1 : dl2, memra_iq1s_grid[qs[l] | ((h & 7) << 8)], h & 8 ? -MEMRA_IQ1_DELTA : MEMRA_IQ1_DELTA);
            }
        }
    }
}

void memra_dequantize_row(int type, const void * source, float * y, int64_t n) {
    const uint8_t * x = source;
    switch (type) {
        case MEMRA_TYPE_F32: memcpy(y, x, (size_t)n * sizeof(float)); return;
        case MEMRA_TYPE_F16:
            for (int64_t i = 0; i < n; i++) y[i] = memra_f16_to_f32((uint16_t)(x[2 * i] | (x[2 * i + 1] << 8)));
            return;
        case MEMRA_TYPE_BF16:
            for (int64_t i = 0; i < n; i++) y[i] = memra_bf16_to_f32((uint16_t)(x[2 * i] | (x[2 * i + 1] << 8)));
            return;
        case MEMRA_TYPE_Q4_0: dequantize_q4_0(x, y, n / 32); return;
        case MEMRA_TYPE_Q4_1: dequantize_q4_1(x, y, n / 32); return;
        case MEMRA_TYPE_Q5_0: dequantize_q5_0(x, y, n / 32); return;
        case MEMRA_TYPE_Q5_1: dequantize_q5_1(x, y, n / 32); return;
        case MEMRA_TYPE_Q8_0: dequantize_q8_0(x, y, n / 32); return;
        case MEMRA_TYPE_IQ4_NL: dequantize_iq4_nl(x, y, n / 32); return;
        case MEMRA_TYPE_Q2_K: dequantize_q2_K(x, y, n / QK_K); return;
        case MEMRA_TYPE_Q3_K: dequantize_q3_K(x, y, n / QK_K); return;
        case MEMRA_TYPE_Q4_K: dequantize_q4_K(x, y, n / QK_K); return;
        case MEMRA_TYPE_Q5_K: dequantize_q5_K(x, y, n / QK_K); return;
        case MEMRA_TYPE_Q6_K: dequantize_q6_K(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ4_XS: dequantize_iq4_xs(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ2_XXS: dequantize_iq2_xxs(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ2_XS: dequantize_iq2_xs(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ2_S: dequantize_iq2_s(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ3_XXS: dequantize_iq3_xxs(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ3_S: dequantize_iq3_s(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ1_S: dequantize_iq1_s(x, y, n / QK_K); return;
        case MEMRA_TYPE_IQ1_M: dequantize_iq1_m(x, y, n / QK_K); return;
        default: return;
    }
}

void memra_embedding(float * out, int type, const void * table, int64_t width, const int32_t * ids, int64_t count) {
    const size_t row_bytes = (size_t)(width / memra_dequantize_block_size(type)) * memra_dequantize_block_bytes(type);
    for (int64_t r = 0; r < count; r++) {
        memra_dequantize_row(type, (const uint8_t *)table + (size_t)ids[r] * row_bytes, out + r * width, width);
    }
}
