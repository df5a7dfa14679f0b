/*
 * Tests and micro-benchmark for native/cpu/quant-dot.c.
 *
 *   test-quant-dot          run every check on every SIMD path this CPU has; exit 1 on any failure
 *   test-quant-dot bench    GB/s of weight bytes for a 4096 x 4096 matrix-vector product per type, on the
 *                           path memra_dot_isa() reports (set MEMRA_CPU_ISA to choose), one thread
 *
 * Everything here is written from the formulas (ggml's block layouts and per-block dot products),
 * independently of the library's code:
 *   - activation conversion: bit-exact against reference quantizers below (libm nearbyintf for
 *     ties-to-even, double-precision f16/bf16 rounding), including constructed ties;
 *   - dot products: against a double-precision sum over dequantized weights and activations, with
 *     ggml's q8_1 term (m_w * s_a per block) for q4_1/q5_1. Bound: |got - ref| <= 1e-5 * M, where M is the
 *     sum over values of |a| * (|scale part of w| + |offset part of w|) (so cancellation in w = d*q - m
 *     does not make the bound meaningless); every SIMD path is also checked against the scalar path
 *     with the same bound;
 *   - memra_dot_rows4 must equal four memra_dot_row calls bit for bit (same path), and so must the
 *     decoded-rows route of the i-quants, and of iq4_xs and iq4_nl on the x86 SIMD paths
 *     (memra_dot_decode_rows4, memra_dot_decoded_prepare where the path has it, memra_dot_decoded_rows4,
 *     and memra_dot_decoded_tile over several activation rows);
 *   - memra_dequantize_row (dequantize.c) against the same reference dequantization: every format's
 *     value is an exact product of its fields' numbers, which ggml's float arithmetic computes with one
 *     rounding at most, so the result must be the reference rounded to float, bit for bit.
 */
#define _POSIX_C_SOURCE 200809L
#include "../quant-dot.h"

/* the i-quant grids: part of the format, so the reference dequantizers below read the same tables */
#define MEMRA_IQ_TABLE static const __attribute__((unused))
#include "../../common/iq-grids.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;
#define FAIL(...) do { failures++; if (failures <= 40) { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* ---------------------------------------------------------------- random numbers */

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_u64() >> 11) * 0x1p-53; }
static float rng_normal(void) {
    const double u = rng_unit() + 1e-300, v = rng_unit();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static void rng_bytes(uint8_t * p, size_t n) { for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_u64(); }

/* ---------------------------------------------------------------- reference number formats */

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint16_t rd16(const uint8_t * p) { uint16_t v; memcpy(&v, p, 2); return v; }
static void wr16(uint8_t * p, uint16_t v) { memcpy(p, &v, 2); }

/* f16 bits -> value (exact in double) */
static double ref_f16_value(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

/* f32 -> f16 bits, round to nearest even computed in double; NaN as F16C (quiet, top payload kept). */
static uint16_t ref_f16_bits(float f) {
    const uint32_t x = fbits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00 | ((x >> 13) & 0x3ff));
    const double a = fabs((double)f);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);
    if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24)); /* 1024 = smallest normal */
    int e;
    const double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    double q = nearbyint(m * 2048.0);
    int E = e - 1;
    if (q == 2048.0) { q = 1024.0; E++; }
    if (E > 15) return (uint16_t)(sign | 0x7c00);
    return (uint16_t)(sign | (E + 15) << 10 | (int)(q - 1024.0));
}

/* f32 -> bf16 bits: the magnitude's bit pattern rounded to a multiple of 2^16, ties to even; NaN: top
 * bits with the quiet bit forced (ggml_compute_fp32_to_bf16). */
static uint16_t ref_bf16_bits(float f) {
    const uint32_t x = fbits(f);
    if (isnan(f)) return (uint16_t)((x >> 16) | 64);
    const uint32_t mag = x & 0x7fffffffu;
    return (uint16_t)(((x >> 16) & 0x8000) | (uint32_t)nearbyint((double)mag / 65536.0));
}
static double ref_bf16_value(uint16_t h) { return (double)bitsf((uint32_t)h << 16); }

/* ---------------------------------------------------------------- reference activation quantizers */

static int activation_bytes(int act_type, int64_t n) { return (int)memra_row_bytes(act_type, n); }

static void ref_q8_0(const float * x, uint8_t * y, int64_t n, int with_sum) {
    const int bytes = with_sum ? 36 : 34, qs_at = with_sum ? 4 : 2;
    for (int64_t b = 0; b < n / 32; b++) {
        const float * xb = x + 32 * b;
        uint8_t * yb = y + bytes * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const int q = (int)nearbyintf(xb[j] * id);
            yb[qs_at + j] = (uint8_t)(int8_t)q;
            sum += q;
        }
        wr16(yb, ref_f16_bits(d));
        if (with_sum) wr16(yb + 2, ref_f16_bits(d * (float)sum));
    }
}

static void ref_q8_K(const float * x, uint8_t * y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++) {
        const float * xb = x + 256 * b;
        uint8_t * yb = y + 292 * b;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++) if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        memset(yb, 0, 292);
        if (amax == 0.0f) continue;
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            int q = (int)nearbyintf(iscale * xb[j]);
            if (q > 127) q = 127;
            yb[4 + j] = (uint8_t)(int8_t)q;
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += (int8_t)yb[4 + 16 * g + l];
            const int16_t s16 = (int16_t)s;
            memcpy(yb + 260 + 2 * g, &s16, 2);
        }
        const float d = 1.0f / iscale;
        memcpy(yb, &d, 4);
    }
}

static void ref_activation(int act_type, const float * x, uint8_t * y, int64_t n) {
    switch (act_type) {
    case MEMRA_TYPE_Q8_0: ref_q8_0(x, y, n, 0); break;
    case MEMRA_TYPE_Q8_1: ref_q8_0(x, y, n, 1); break;
    case MEMRA_TYPE_Q8_K: ref_q8_K(x, y, n); break;
    case MEMRA_TYPE_F16: for (int64_t i = 0; i < n; i++) wr16(y + 2 * i, ref_f16_bits(x[i])); break;
    case MEMRA_TYPE_BF16: for (int64_t i = 0; i < n; i++) wr16(y + 2 * i, ref_bf16_bits(x[i])); break;
    case MEMRA_TYPE_F32: memcpy(y, x, (size_t)n * 4); break;
    }
}

/* Dequantized activations: a[i] (double). For q8_1 also the per-block s. */
static void dequant_activation(int act_type, const uint8_t * y, int64_t n, double * a, double * s) {
    for (int64_t i = 0; i < n; i++) {
        switch (act_type) {
        case MEMRA_TYPE_Q8_0: a[i] = ref_f16_value(rd16(y + 34 * (i / 32))) * (int8_t)y[34 * (i / 32) + 2 + i % 32]; break;
        case MEMRA_TYPE_Q8_1: a[i] = ref_f16_value(rd16(y + 36 * (i / 32))) * (int8_t)y[36 * (i / 32) + 4 + i % 32]; break;
        case MEMRA_TYPE_Q8_K: { float d; memcpy(&d, y + 292 * (i / 256), 4); a[i] = (double)d * (int8_t)y[292 * (i / 256) + 4 + i % 256]; break; }
        case MEMRA_TYPE_F16: a[i] = ref_f16_value(rd16(y + 2 * i)); break;
        case MEMRA_TYPE_BF16: a[i] = ref_bf16_value(rd16(y + 2 * i)); break;
        case MEMRA_TYPE_F32: { float f; memcpy(&f, y + 4 * i, 4); a[i] = f; break; }
        }
    }
    if (act_type == MEMRA_TYPE_Q8_1)
        for (int64_t b = 0; b < n / 32; b++) s[b] = ref_f16_value(rd16(y + 36 * b + 2));
}

/* ---------------------------------------------------------------- reference weight dequantization */

static const int kvalues[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* 6-bit scale/min j (0..7) of q4_K/q5_K, as ggml's get_scale_min_k4. */
static void scale_min_k4(int j, const uint8_t * q, int * d, int * m) {
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

/* w[i] = ws[i] + wo[i]: ws the scale part (d * code), wo the offset part (m, -dmin*min; integer
 * offsets such as q4_0's -8 belong to ws). Returns the block count. */
static void dequant_weights(int type, const uint8_t * x, int64_t n, double * ws, double * wo) {
    for (int64_t i = 0; i < n; i++) wo[i] = 0.0;
    switch (type) {
    case MEMRA_TYPE_F32: for (int64_t i = 0; i < n; i++) { float f; memcpy(&f, x + 4 * i, 4); ws[i] = f; } return;
    case MEMRA_TYPE_F16: for (int64_t i = 0; i < n; i++) ws[i] = ref_f16_value(rd16(x + 2 * i)); return;
    case MEMRA_TYPE_BF16: for (int64_t i = 0; i < n; i++) ws[i] = ref_bf16_value(rd16(x + 2 * i)); return;
    default: break;
    }
    if (type == MEMRA_TYPE_Q8_0 || type == MEMRA_TYPE_Q4_0 || type == MEMRA_TYPE_Q4_1 || type == MEMRA_TYPE_Q5_0 ||
        type == MEMRA_TYPE_Q5_1 || type == MEMRA_TYPE_IQ4_NL) {
        const int bytes = (int)memra_row_bytes(type, 32);
        for (int64_t b = 0; b < n / 32; b++) {
            const uint8_t * xb = x + bytes * b;
            double * s = ws + 32 * b, * o = wo + 32 * b;
            const double d = ref_f16_value(rd16(xb));
            uint32_t qh;
            switch (type) {
            case MEMRA_TYPE_Q8_0: for (int j = 0; j < 32; j++) s[j] = d * (int8_t)xb[2 + j]; break;
            case MEMRA_TYPE_Q4_0:
                for (int j = 0; j < 16; j++) { s[j] = d * ((xb[2 + j] & 15) - 8); s[j + 16] = d * ((xb[2 + j] >> 4) - 8); }
                break;
            case MEMRA_TYPE_IQ4_NL:
                for (int j = 0; j < 16; j++) { s[j] = d * kvalues[xb[2 + j] & 15]; s[j + 16] = d * kvalues[xb[2 + j] >> 4]; }
                break;
            case MEMRA_TYPE_Q4_1:
                for (int j = 0; j < 16; j++) { s[j] = d * (xb[4 + j] & 15); s[j + 16] = d * (xb[4 + j] >> 4); }
                for (int j = 0; j < 32; j++) o[j] = ref_f16_value(rd16(xb + 2));
                break;
            case MEMRA_TYPE_Q5_0:
                memcpy(&qh, xb + 2, 4);
                for (int j = 0; j < 16; j++) {
                    s[j] = d * (((xb[6 + j] & 15) | ((int)((qh >> j) & 1) << 4)) - 16);
                    s[j + 16] = d * (((xb[6 + j] >> 4) | ((int)((qh >> (j + 16)) & 1) << 4)) - 16);
                }
                break;
            case MEMRA_TYPE_Q5_1:
                memcpy(&qh, xb + 4, 4);
                for (int j = 0; j < 16; j++) {
                    s[j] = d * ((xb[8 + j] & 15) | ((int)((qh >> j) & 1) << 4));
                    s[j + 16] = d * ((xb[8 + j] >> 4) | ((int)((qh >> (j + 16)) & 1) << 4));
                }
                for (int j = 0; j < 32; j++) o[j] = ref_f16_value(rd16(xb + 2));
                break;
            }
        }
        return;
    }
    const int bytes = (int)memra_row_bytes(type, 256);
    for (int64_t b = 0; b < n / 256; b++) {
        const uint8_t * xb = x + bytes * b;
        double * s = ws + 256 * b, * o = wo + 256 * b;
        switch (type) {
        case MEMRA_TYPE_Q2_K: { /* ggml dequantize_row_q2_K */
            const double d = ref_f16_value(rd16(xb + 80)), dmin = ref_f16_value(rd16(xb + 82));
            const uint8_t * q = xb + 16;
            int is = 0, at = 0;
            for (int half = 0; half < 2; half++, q += 32) {
                for (int shift = 0; shift < 8; shift += 2) {
                    for (int part = 0; part < 2; part++) {
                        const int sc = xb[is++];
                        for (int l = 0; l < 16; l++, at++) {
                            s[at] = d * (sc & 15) * ((q[16 * part + l] >> shift) & 3);
                            o[at] = -dmin * (sc >> 4);
                        }
                    }
                }
            }
            break;
        }
        case MEMRA_TYPE_Q3_K: { /* ggml dequantize_row_q3_K */
            const double d = ref_f16_value(rd16(xb + 108));
            const uint8_t * hm = xb, * q = xb + 32, * sb = xb + 96;
            int scales[16];
            for (int j = 0; j < 16; j++) {
                const int low = j < 8 ? (sb[j] & 15) : (sb[j - 8] >> 4);
                const int high = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
                scales[j] = (low | high << 4) - 32;
            }
            int is = 0, at = 0, m = 1;
            for (int half = 0; half < 2; half++, q += 32) {
                for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                    for (int part = 0; part < 2; part++) {
                        const double dl = d * scales[is++];
                        for (int l = 16 * part; l < 16 * part + 16; l++, at++)
                            s[at] = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                }
            }
            break;
        }
        case MEMRA_TYPE_Q4_K:
        case MEMRA_TYPE_Q5_K: { /* ggml dequantize_row_q4_K / q5_K */
            const int five = type == MEMRA_TYPE_Q5_K;
            const double d = ref_f16_value(rd16(xb)), dmin = ref_f16_value(rd16(xb + 2));
            const uint8_t * qh = xb + 16, * q = xb + (five ? 48 : 16);
            int at = 0, u1 = 1, u2 = 2;
            for (int j = 0; j < 4; j++, q += 32, u1 <<= 2, u2 <<= 2) {
                int sc, mn;
                scale_min_k4(2 * j, xb + 4, &sc, &mn);
                for (int l = 0; l < 32; l++, at++) {
                    s[at] = d * sc * ((q[l] & 15) + (five && (qh[l] & u1) ? 16 : 0));
                    o[at] = -dmin * mn;
                }
                scale_min_k4(2 * j + 1, xb + 4, &sc, &mn);
                for (int l = 0; l < 32; l++, at++) {
                    s[at] = d * sc * ((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0));
                    o[at] = -dmin * mn;
                }
            }
            break;
        }
        case MEMRA_TYPE_Q6_K: { /* ggml dequantize_row_q6_K */
            const double d = ref_f16_value(rd16(xb + 208));
            const uint8_t * ql = xb, * qh = xb + 128;
            const int8_t * sc = (const int8_t *)(xb + 192);
            for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8) {
                double * y = s + 128 * half;
                for (int l = 0; l < 32; l++) {
                    const int is = l / 16;
                    y[l] = d * sc[is + 0] * (((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
                    y[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
                    y[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                    y[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ4_XS: { /* ggml dequantize_row_iq4_xs */
            const double d = ref_f16_value(rd16(xb));
            const int scales_h = rd16(xb + 2);
            const uint8_t * qs = xb + 8;
            for (int ib = 0; ib < 8; ib++, qs += 16) {
                const int ls = ((xb[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4);
                const double dl = d * (ls - 32);
                for (int j = 0; j < 16; j++) { s[32 * ib + j] = dl * kvalues[qs[j] & 15]; s[32 * ib + 16 + j] = dl * kvalues[qs[j] >> 4]; }
            }
            break;
        }
        /* the i-quants, from ggml's dequantize_row_iq*: w = d * scale * magnitude * sign, the magnitudes
         * being the bytes of a grid entry (8 per entry, 4 for iq3); iq1: w = d * scale * (g + delta) with
         * g the entry's int8 in {-1, 0, 1}: the scale part d*scale*g in ws, d*scale*delta in wo */
        case MEMRA_TYPE_IQ2_XXS: {
            const double d = ref_f16_value(rd16(xb));
            for (int ib = 0; ib < 8; ib++) {
                const uint8_t * q = xb + 2 + 8 * ib;
                uint32_t aux;
                memcpy(&aux, q + 4, 4);
                const double db = d * (0.5 + (aux >> 28)) * 0.25;
                for (int l = 0; l < 4; l++) {
                    const uint64_t grid = memra_iq2xxs_grid[q[l]];
                    const int signs = memra_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                    for (int j = 0; j < 8; j++) s[32 * ib + 8 * l + j] = db * (double)((grid >> (8 * j)) & 255) * ((signs >> j) & 1 ? -1 : 1);
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ2_XS: {
            const double d = ref_f16_value(rd16(xb));
            for (int ib = 0; ib < 8; ib++) {
                for (int l = 0; l < 4; l++) {
                    const int q = rd16(xb + 2 + 8 * ib + 2 * l);
                    const double db = d * (0.5 + ((xb[66 + ib] >> (4 * (l / 2))) & 15)) * 0.25;
                    const uint64_t grid = memra_iq2xs_grid[q & 511];
                    const int signs = memra_ksigns_iq2xs[q >> 9];
                    for (int j = 0; j < 8; j++) s[32 * ib + 8 * l + j] = db * (double)((grid >> (8 * j)) & 255) * ((signs >> j) & 1 ? -1 : 1);
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ2_S: {
            const double d = ref_f16_value(rd16(xb));
            const uint8_t * qs = xb + 2, * signs = xb + 34, * qh = xb + 66, * scales = xb + 74;
            for (int ib = 0; ib < 8; ib++) {
                for (int l = 0; l < 4; l++) {
                    const double db = d * (0.5 + ((scales[ib] >> (4 * (l / 2))) & 15)) * 0.25;
                    const uint64_t grid = memra_iq2s_grid[qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300)];
                    for (int j = 0; j < 8; j++)
                        s[32 * ib + 8 * l + j] = db * (double)((grid >> (8 * j)) & 255) * ((signs[4 * ib + l] >> j) & 1 ? -1 : 1);
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ3_XXS: {
            const double d = ref_f16_value(rd16(xb));
            for (int ib = 0; ib < 8; ib++) {
                uint32_t aux;
                memcpy(&aux, xb + 66 + 4 * ib, 4);
                const double db = d * (0.5 + (aux >> 28)) * 0.5;
                for (int l = 0; l < 4; l++) {
                    const int signs = memra_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                    const uint32_t g1 = memra_iq3xxs_grid[xb[2 + 8 * ib + 2 * l]], g2 = memra_iq3xxs_grid[xb[2 + 8 * ib + 2 * l + 1]];
                    for (int j = 0; j < 4; j++) {
                        s[32 * ib + 8 * l + j] = db * (double)((g1 >> (8 * j)) & 255) * ((signs >> j) & 1 ? -1 : 1);
                        s[32 * ib + 8 * l + 4 + j] = db * (double)((g2 >> (8 * j)) & 255) * ((signs >> (j + 4)) & 1 ? -1 : 1);
                    }
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ3_S: {
            const double d = ref_f16_value(rd16(xb));
            const uint8_t * qs = xb + 2, * qh = xb + 66, * signs = xb + 74, * scales = xb + 106;
            for (int ib = 0; ib < 8; ib++) {
                const double db = d * (1 + 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 15));
                for (int l = 0; l < 4; l++) {
                    const uint32_t g1 = memra_iq3s_grid[qs[8 * ib + 2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)];
                    const uint32_t g2 = memra_iq3s_grid[qs[8 * ib + 2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)];
                    for (int j = 0; j < 4; j++) {
                        s[32 * ib + 8 * l + j] = db * (double)((g1 >> (8 * j)) & 255) * ((signs[4 * ib + l] >> j) & 1 ? -1 : 1);
                        s[32 * ib + 8 * l + 4 + j] = db * (double)((g2 >> (8 * j)) & 255) * ((signs[4 * ib + l] >> (j + 4)) & 1 ? -1 : 1);
                    }
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ1_S: {
            const double d = ref_f16_value(rd16(xb));
            for (int ib = 0; ib < 8; ib++) {
                const int qh = rd16(xb + 34 + 2 * ib);
                const double dl = d * (2 * ((qh >> 12) & 7) + 1), delta = qh & 0x8000 ? -0.125 : 0.125;
                for (int l = 0; l < 4; l++) {
                    const uint64_t grid = memra_iq1s_grid[xb[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
                    for (int j = 0; j < 8; j++) {
                        s[32 * ib + 8 * l + j] = dl * (int8_t)(uint8_t)(grid >> (8 * j));
                        o[32 * ib + 8 * l + j] = dl * delta;
                    }
                }
            }
            break;
        }
        case MEMRA_TYPE_IQ1_M: {
            const int sc[4] = { rd16(xb + 48), rd16(xb + 50), rd16(xb + 52), rd16(xb + 54) };
            const double d = ref_f16_value((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
            const uint8_t * qs = xb, * qh = xb + 32;
            for (int ib = 0; ib < 8; ib++) {
                for (int l = 0; l < 4; l++) {
                    const int h = qh[2 * ib + l / 2] >> (4 * (l % 2));
                    const double dl = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7) + 1), delta = h & 8 ? -0.125 : 0.125;
                    const uint64_t grid = memra_iq1s_grid[qs[4 * ib + l] | ((h & 7) << 8)];
                    for (int j = 0; j < 8; j++) {
                        s[32 * ib + 8 * l + j] = dl * (int8_t)(uint8_t)(grid >> (8 * j));
                        o[32 * ib + 8 * l + j] = dl * delta;
                    }
                }
            }
            break;
        }
        }
    }
}

/* ---------------------------------------------------------------- test data */

typedef struct { int type; const char * name; int block; } type_info;
static const type_info TYPES[] = {
    { MEMRA_TYPE_Q8_0, "q8_0", 32 }, { MEMRA_TYPE_Q4_K, "q4_K", 256 }, { MEMRA_TYPE_Q6_K, "q6_K", 256 },
    { MEMRA_TYPE_Q5_K, "q5_K", 256 }, { MEMRA_TYPE_Q4_0, "q4_0", 32 }, { MEMRA_TYPE_F16, "f16", 1 },
    { MEMRA_TYPE_BF16, "bf16", 1 }, { MEMRA_TYPE_F32, "f32", 1 }, { MEMRA_TYPE_Q4_1, "q4_1", 32 },
    { MEMRA_TYPE_Q5_0, "q5_0", 32 }, { MEMRA_TYPE_Q5_1, "q5_1", 32 }, { MEMRA_TYPE_Q2_K, "q2_K", 256 },
    { MEMRA_TYPE_Q3_K, "q3_K", 256 }, { MEMRA_TYPE_IQ4_NL, "iq4_nl", 32 }, { MEMRA_TYPE_IQ4_XS, "iq4_xs", 256 },
    { MEMRA_TYPE_IQ2_XXS, "iq2_xxs", 256 }, { MEMRA_TYPE_IQ2_XS, "iq2_xs", 256 }, { MEMRA_TYPE_IQ2_S, "iq2_s", 256 },
    { MEMRA_TYPE_IQ3_XXS, "iq3_xxs", 256 }, { MEMRA_TYPE_IQ3_S, "iq3_s", 256 }, { MEMRA_TYPE_IQ1_S, "iq1_s", 256 },
    { MEMRA_TYPE_IQ1_M, "iq1_m", 256 },
};
#define N_TYPES ((int)(sizeof(TYPES) / sizeof(TYPES[0])))

/* every path name the library knows; main() tests those memra_dot_isa_available says this CPU runs */
static const char * ISAS[] = { "scalar", "avx2", "avx512vnni", "neon", "neondot" };
#define N_ISAS ((int)(sizeof(ISAS) / sizeof(ISAS[0])))

/* A random finite f16 of magnitude 2^lo .. 2^hi, random sign if `signed_`. */
static uint16_t random_f16(int lo, int hi, int signed_) {
    const float mag = ldexpf((float)(1.0 + rng_unit()), lo + (int)(rng_u64() % (uint64_t)(hi - lo + 1)));
    return ref_f16_bits((signed_ && (rng_u64() & 1)) ? -mag : mag);
}

/* One random weight row: random bytes with valid (finite) f16 scale fields. */
static void random_weights(int type, uint8_t * x, int64_t n) {
    const size_t bytes = memra_row_bytes(type, n);
    rng_bytes(x, bytes);
    if (type == MEMRA_TYPE_F32) { for (int64_t i = 0; i < n; i++) { const float f = rng_normal(); memcpy(x + 4 * i, &f, 4); } return; }
    if (type == MEMRA_TYPE_F16) { for (int64_t i = 0; i < n; i++) wr16(x + 2 * i, ref_f16_bits(rng_normal())); return; }
    if (type == MEMRA_TYPE_BF16) { for (int64_t i = 0; i < n; i++) wr16(x + 2 * i, ref_bf16_bits(rng_normal())); return; }
    const int bb = (int)memra_row_bytes(type, memra_dot_activation_type(type) == MEMRA_TYPE_Q8_K ? 256 : 32);
    for (size_t off = 0; off < bytes; off += (size_t)bb) {
        uint8_t * b = x + off;
        switch (type) {
        case MEMRA_TYPE_Q8_0: case MEMRA_TYPE_Q4_0: case MEMRA_TYPE_Q5_0: case MEMRA_TYPE_IQ4_NL:
            wr16(b, random_f16(-12, -4, 1)); break;
        case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_1:
            wr16(b, random_f16(-12, -4, 1)); wr16(b + 2, random_f16(-8, -2, 1)); break;
        case MEMRA_TYPE_Q2_K: wr16(b + 80, random_f16(-12, -4, 1)); wr16(b + 82, random_f16(-12, -4, 1)); break;
        case MEMRA_TYPE_Q3_K: wr16(b + 108, random_f16(-12, -4, 1)); break;
        case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K: wr16(b, random_f16(-12, -4, 1)); wr16(b + 2, random_f16(-12, -4, 1)); break;
        case MEMRA_TYPE_Q6_K: wr16(b + 208, random_f16(-14, -6, 1)); break;
        case MEMRA_TYPE_IQ4_XS: wr16(b, random_f16(-12, -4, 1)); break;
        /* the i-quants: any bytes are a valid block; d about 0.001 .. 0.004 */
        case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ2_XS: case MEMRA_TYPE_IQ2_S: case MEMRA_TYPE_IQ3_XXS:
        case MEMRA_TYPE_IQ3_S: case MEMRA_TYPE_IQ1_S: wr16(b, random_f16(-10, -9, 1)); break;
        case MEMRA_TYPE_IQ1_M: { /* d in the top nibbles of the four u16 scale words */
            const uint16_t d = random_f16(-10, -9, 1);
            for (int k = 0; k < 4; k++) wr16(b + 48 + 2 * k, (uint16_t)((rd16(b + 48 + 2 * k) & 0x0fff) | ((d >> (4 * k)) & 15) << 12));
            break;
        }
        }
    }
}

/* Random activations: normal values with a random scale per 32, some all-zero and some huge/tiny blocks. */
static void random_activations(float * x, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) {
        const int kind = (int)(rng_u64() % 16);
        const float scale = kind == 0 ? 0.0f : kind == 1 ? 300.0f : kind == 2 ? 1e-4f : (float)(0.1 + 3.0 * rng_unit());
        for (int64_t i = b; i < b + 32 && i < n; i++) x[i] = scale * rng_normal();
    }
}

/* ---------------------------------------------------------------- checks: metadata */

static void check_metadata(void) {
    static const struct { int type; int block; int bytes; int act; } expect[] = {
        { MEMRA_TYPE_F32, 1, 4, MEMRA_TYPE_F32 }, { MEMRA_TYPE_F16, 1, 2, MEMRA_TYPE_F16 }, { MEMRA_TYPE_BF16, 1, 2, MEMRA_TYPE_BF16 },
        { MEMRA_TYPE_Q4_0, 32, 18, MEMRA_TYPE_Q8_0 }, { MEMRA_TYPE_Q4_1, 32, 20, MEMRA_TYPE_Q8_1 }, { MEMRA_TYPE_Q5_0, 32, 22, MEMRA_TYPE_Q8_0 },
        { MEMRA_TYPE_Q5_1, 32, 24, MEMRA_TYPE_Q8_1 }, { MEMRA_TYPE_Q8_0, 32, 34, MEMRA_TYPE_Q8_0 }, { MEMRA_TYPE_IQ4_NL, 32, 18, MEMRA_TYPE_Q8_0 },
        { MEMRA_TYPE_Q2_K, 256, 84, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_Q3_K, 256, 110, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_Q4_K, 256, 144, MEMRA_TYPE_Q8_K },
        { MEMRA_TYPE_Q5_K, 256, 176, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_Q6_K, 256, 210, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_IQ4_XS, 256, 136, MEMRA_TYPE_Q8_K },
        { MEMRA_TYPE_IQ2_XXS, 256, 66, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_IQ2_XS, 256, 74, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_IQ2_S, 256, 82, MEMRA_TYPE_Q8_K },
        { MEMRA_TYPE_IQ3_XXS, 256, 98, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_IQ3_S, 256, 110, MEMRA_TYPE_Q8_K }, { MEMRA_TYPE_IQ1_S, 256, 50, MEMRA_TYPE_Q8_K },
        { MEMRA_TYPE_IQ1_M, 256, 56, MEMRA_TYPE_Q8_K },
    };
    for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
        if (!memra_dot_supported(expect[i].type)) FAIL("type %d: not supported", expect[i].type);
        if (memra_dot_activation_type(expect[i].type) != expect[i].act) FAIL("type %d: activation type %d", expect[i].type, memra_dot_activation_type(expect[i].type));
        if (memra_row_bytes(expect[i].type, 4 * expect[i].block) != (size_t)(4 * expect[i].bytes)) FAIL("type %d: row bytes", expect[i].type);
    }
    if (memra_row_bytes(MEMRA_TYPE_Q8_1, 64) != 72 || memra_row_bytes(MEMRA_TYPE_Q8_K, 512) != 584) FAIL("q8_1/q8_K row bytes");
    if (memra_dot_supported(MEMRA_TYPE_Q8_K) || memra_dot_supported(99) || memra_row_bytes(99, 32) != 0) FAIL("unknown types");
    if (!isnan(memra_dot_row(99, 32, "", ""))) FAIL("unsupported type must give NaN");
}

/* ---------------------------------------------------------------- checks: activation conversion */

static void compare_conversion(const char * isa, int weight_type, const char * what, const float * x, int64_t n) {
    const int act = memra_dot_activation_type(weight_type);
    const int bytes = activation_bytes(act, n);
    uint8_t * got = malloc((size_t)bytes), * want = malloc((size_t)bytes);
    memset(got, 0xAB, (size_t)bytes);
    ref_activation(act, x, want, n);
    memra_quantize_activation_row_isa(isa, weight_type, x, got, n);
    if (memcmp(got, want, (size_t)bytes) != 0) {
        int at = 0;
        while (got[at] == want[at]) at++;
        FAIL("activation %s (weights type %d) %s, isa %s: byte %d of %d differs (got %02x want %02x)", what, weight_type,
             act == MEMRA_TYPE_Q8_K ? "q8_K" : act == MEMRA_TYPE_Q8_1 ? "q8_1" : act == MEMRA_TYPE_Q8_0 ? "q8_0" : act == MEMRA_TYPE_F16 ? "f16" : act == MEMRA_TYPE_BF16 ? "bf16" : "f32",
             isa, at, bytes, got[at], want[at]);
    }
    free(got);
    free(want);
}

static void check_conversions(const char * isa) {
    enum { N = 4096 };
    static float x[N];
    const int weight_types[] = { MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q4_K, MEMRA_TYPE_F16, MEMRA_TYPE_BF16, MEMRA_TYPE_F32 };
    for (int t = 0; t < 6; t++) {
        const int wt = weight_types[t];
        const int64_t n = memra_dot_activation_type(wt) == MEMRA_TYPE_Q8_K ? N : wt == MEMRA_TYPE_F16 || wt == MEMRA_TYPE_BF16 || wt == MEMRA_TYPE_F32 ? N - 5 : N;
        for (int rep = 0; rep < 8; rep++) {
            random_activations(x, n);
            compare_conversion(isa, wt, "random", x, n);
        }
        /* lengths that exercise the vector tails */
        for (int64_t len = memra_dot_activation_type(wt) == MEMRA_TYPE_Q8_K ? 256 : 32; len <= 1024; len += (len < 64 ? 1 : 97)) {
            const int block = memra_dot_activation_type(wt) == MEMRA_TYPE_Q8_K ? 256 : (wt == MEMRA_TYPE_F16 || wt == MEMRA_TYPE_BF16 || wt == MEMRA_TYPE_F32) ? 1 : 32;
            const int64_t m = len / block * block;
            random_activations(x, m);
            compare_conversion(isa, wt, "tails", x, m);
        }
    }

    /* q8_0 / q8_1 ties: blocks whose max gives 127/max = 1, 0.5 or 2 exactly, so x*id = k + 0.5 */
    for (int b = 0; b < N / 32; b++) {
        float * xb = x + 32 * b;
        const int kind = b % 4;
        const float max = kind == 0 ? 127.0f : kind == 1 ? 254.0f : kind == 2 ? 63.5f : 127.0f;
        const float id = 127.0f / max; /* exact: 1, 0.5, 2 */
        for (int j = 0; j < 32; j++) {
            const int k = (int)(rng_u64() % 253) - 126; /* k + 0.5 in (-126, 127) */
            xb[j] = ((float)k + 0.5f) / id;
            if (kind == 3) xb[j] = (float)(k / 2) + (rng_u64() & 1 ? 0.5f : -0.5f);
        }
        xb[(b * 7) % 32] = (b & 1) ? -max : max;
    }
    compare_conversion(isa, MEMRA_TYPE_Q8_0, "q8_0 ties", x, N);
    compare_conversion(isa, MEMRA_TYPE_Q5_1, "q8_1 ties", x, N);

    /* q8_K ties: iscale = -127/max = -1 or 1 exactly; equal |max| of both signs (the first one wins) */
    for (int b = 0; b < N / 256; b++) {
        float * xb = x + 256 * b;
        for (int j = 0; j < 256; j++) xb[j] = (float)((int)(rng_u64() % 253) - 126) + 0.5f;
        const float max = (b & 1) ? -127.0f : 127.0f;
        const int first = (int)(rng_u64() % 200);
        xb[first] = max;
        xb[first + 1 + (int)(rng_u64() % 50)] = -max;
        if (b % 3 == 0) xb[first + 3] = 126.5f;
    }
    compare_conversion(isa, MEMRA_TYPE_Q4_K, "q8_K ties", x, N);

    /* f16: specials first (so that the vector loops see them), then midpoints between neighbouring
     * halves (normal and subnormal) */
    int64_t m = 0;
    const float specials[] = { 0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e10f, -1e-10f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                               0x1.0p-26f, 0x1p-14f, 0x1.ffcp-15f, 0x1.ffep-15f, INFINITY, -INFINITY, 1.0f, -2.0f, 0x1.002p0f, 0x1.006p0f };
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) x[m++] = specials[i];
    x[m++] = bitsf(0x7fc00000u); x[m++] = bitsf(0xffa12345u); x[m++] = bitsf(0x7f800001u);
    for (int i = 0; i < 2000; i++) {
        const uint16_t h = (uint16_t)(rng_u64() % 0x7bff);
        const double mid = (ref_f16_value(h) + ref_f16_value((uint16_t)(h + 1))) / 2.0; /* exact in f32 */
        x[m++] = (float)((rng_u64() & 1) ? -mid : mid);
    }
    compare_conversion(isa, MEMRA_TYPE_F16, "f16 ties and specials", x, m);

    /* bf16: specials first (overflow to infinity, subnormals, NaNs), then exact ties of both parities */
    m = 0;
    const uint32_t bf_specials[] = { 0x7f7fffffu, 0x7f7f8000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x807fffffu, 0x7f800000u,
                                     0xff800000u, 0x7f800001u, 0xff812345u, 0x7fc00000u, 0x3f808000u, 0x3f818000u, 0x7fff8000u };
    for (size_t i = 0; i < sizeof(bf_specials) / sizeof(bf_specials[0]); i++) x[m++] = bitsf(bf_specials[i]);
    for (int i = 0; i < 2000; i++) {
        const uint32_t hi = (uint32_t)(rng_u64() % 0x7f7f) | ((rng_u64() & 1) ? 0x8000u : 0);
        x[m++] = bitsf(hi << 16 | 0x8000u);
    }
    compare_conversion(isa, MEMRA_TYPE_BF16, "bf16 ties and specials", x, m);
}

/* ---------------------------------------------------------------- checks: dot products */

typedef struct { double ref, mag; } reference;

static reference reference_dot(int type, const uint8_t * w, const uint8_t * act, int64_t n, double * ws, double * wo, double * a, double * s) {
    const int at = memra_dot_activation_type(type);
    dequant_weights(type, w, n, ws, wo);
    dequant_activation(at, act, n, a, s);
    reference r = { 0.0, 0.0 };
    for (int64_t i = 0; i < n; i++) {
        r.ref += ws[i] * a[i];
        r.mag += fabs(ws[i] * a[i]);
        if (at != MEMRA_TYPE_Q8_1) { r.ref += wo[i] * a[i]; r.mag += fabs(wo[i] * a[i]); }
    }
    if (at == MEMRA_TYPE_Q8_1) /* ggml: m_w * s_a per block, s_a = f16(d_a * sum(q_a)) */
        for (int64_t b = 0; b < n / 32; b++) { r.ref += wo[32 * b] * s[b]; r.mag += fabs(wo[32 * b] * s[b]); }
    return r;
}

#define TOLERANCE 1e-5

static double worst[sizeof(ISAS) / sizeof(ISAS[0])]; /* largest |got - ref| / M seen per path (index into isas) */

static void check_dots(const type_info * t, const char ** isas, int n_isas) {
    /* the last sizes pass the matrix-vector kernels' prepared-activation limits (row by row there) */
    static const int64_t sizes32[] = { 32, 64, 96, 128, 160, 224, 4096, 4096 + 96, 16384 + 32 };
    static const int64_t sizes256[] = { 256, 512, 768, 1280, 4096, 16384 + 256 };
    static const int64_t sizes1[] = { 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 4096, 4099 };
    const int64_t * sizes = t->block == 32 ? sizes32 : t->block == 256 ? sizes256 : sizes1;
    const int n_sizes = t->block == 32 ? 9 : t->block == 256 ? 6 : 14;
    const int at = memra_dot_activation_type(t->type);
    for (int si = 0; si < n_sizes; si++) {
        const int64_t n = sizes[si];
        const size_t rb = memra_row_bytes(t->type, n), stride = rb + 64;
        /* exact sizes (no slack after the last row or the activations), so AddressSanitizer builds catch over-reads */
        uint8_t * w = malloc(3 * stride + rb);
        uint8_t * act = malloc(memra_row_bytes(at, n));
        float * x = malloc((size_t)n * sizeof(float));
        double * ws = malloc((size_t)n * sizeof(double)), * wo = malloc((size_t)n * sizeof(double));
        double * a = malloc((size_t)n * sizeof(double)), * s = malloc((size_t)(n / 32 + 1) * sizeof(double));
        for (int rep = 0; rep < 3; rep++) {
            rng_bytes(w, 3 * stride + rb);
            for (int r = 0; r < 4; r++) random_weights(t->type, w + r * stride, n);
            random_activations(x, n);
            /* the activations come from the library's conversion, checked bit-exact above */
            memra_quantize_activation_row_isa("scalar", t->type, x, act, n);
            for (int r = 0; r < 4; r++) {
                const reference ref = reference_dot(t->type, w + r * stride, act, n, ws, wo, a, s);
                const float scalar = memra_dot_row_isa("scalar", t->type, n, w + r * stride, act);
                for (int k = 0; k < n_isas; k++) {
                    const float got = memra_dot_row_isa(isas[k], t->type, n, w + r * stride, act);
                    if (ref.mag > 0 && fabs((double)got - ref.ref) / ref.mag > worst[k]) worst[k] = fabs((double)got - ref.ref) / ref.mag;
                    if (!(fabs((double)got - ref.ref) <= TOLERANCE * ref.mag + 1e-30))
                        FAIL("dot %s isa %s n=%lld row %d: got %.9g want %.9g (|err| %.3g, bound %.3g)", t->name, isas[k], (long long)n, r,
                             got, ref.ref, fabs((double)got - ref.ref), TOLERANCE * ref.mag);
                    if (!(fabs((double)got - (double)scalar) <= TOLERANCE * ref.mag + 1e-30))
                        FAIL("dot %s isa %s n=%lld row %d: %.9g vs scalar %.9g", t->name, isas[k], (long long)n, r, got, scalar);
                }
            }
            for (int k = 0; k < n_isas; k++) {
                float four[4];
                memra_dot_rows4_isa(isas[k], t->type, n, w, stride, act, four);
                for (int r = 0; r < 4; r++) {
                    const float one = memra_dot_row_isa(isas[k], t->type, n, w + r * stride, act);
                    if (memcmp(&one, &four[r], sizeof(float)) != 0)
                        FAIL("rows4 %s isa %s n=%lld row %d: %.9g != dot_row %.9g", t->name, isas[k], (long long)n, r, four[r], one);
                }
                /* decoded rows (the i-quants' matrix-matrix route; on x86 SIMD paths iq4_xs and iq4_nl too): the same bits as rows4 */
                const size_t decoded_bytes = memra_dot_decoded_bytes_isa(isas[k], t->type, n);
                const int is_iq = t->type == MEMRA_TYPE_IQ2_XXS || t->type == MEMRA_TYPE_IQ2_XS || t->type == MEMRA_TYPE_IQ2_S ||
                                  t->type == MEMRA_TYPE_IQ3_XXS || t->type == MEMRA_TYPE_IQ3_S || t->type == MEMRA_TYPE_IQ1_S || t->type == MEMRA_TYPE_IQ1_M;
                const int is_x86_iq4 = (t->type == MEMRA_TYPE_IQ4_XS || t->type == MEMRA_TYPE_IQ4_NL) &&
                                       (strcmp(isas[k], "avx2") == 0 || strcmp(isas[k], "avx512vnni") == 0);
                if ((decoded_bytes > 0) != (is_iq || is_x86_iq4)) FAIL("decoded %s isa %s n=%lld: %zu bytes", t->name, isas[k], (long long)n, decoded_bytes);
                if (decoded_bytes > 0) {
                    /* (the activation row prepared for the decoded kernel where the path asks for it) */
                    const size_t prepared_bytes = memra_dot_decoded_prepared_bytes_isa(isas[k], t->type, n);
                    uint8_t * decoded = malloc(decoded_bytes), * prepared = prepared_bytes ? malloc(prepared_bytes) : NULL;
                    float dec[4];
                    memra_dot_decode_rows4_isa(isas[k], t->type, n, w, stride, decoded);
                    if (prepared) memra_dot_decoded_prepare_isa(isas[k], t->type, n, act, prepared);
                    memra_dot_decoded_rows4_isa(isas[k], t->type, n, decoded, prepared ? prepared : act, dec);
                    for (int r = 0; r < 4; r++)
                        if (memcmp(&dec[r], &four[r], sizeof(float)) != 0)
                            FAIL("decoded %s isa %s n=%lld row %d: %.9g != rows4 %.9g", t->name, isas[k], (long long)n, r, dec[r], four[r]);
                    /* memra_dot_decoded_tile over 7 activation rows (a tile of four and the shapes left over), out_stride 5:
                     * each row's bits are rows4's */
                    enum { TILE_ROWS = 7, TILE_STRIDE = 5 };
                    const size_t arb = prepared ? prepared_bytes : memra_row_bytes(at, n);
                    uint8_t * tile_in = malloc(TILE_ROWS * arb), * tile_act = malloc(memra_row_bytes(at, n));
                    float * tile_x = malloc((size_t)n * sizeof(float)), tile[TILE_ROWS * TILE_STRIDE], want[TILE_ROWS * 4];
                    for (int c = 0; c < TILE_ROWS; c++) {
                        random_activations(tile_x, n);
                        memra_quantize_activation_row_isa("scalar", t->type, tile_x, tile_act, n);
                        memra_dot_rows4_isa(isas[k], t->type, n, w, stride, tile_act, want + 4 * c);
                        if (prepared) memra_dot_decoded_prepare_isa(isas[k], t->type, n, tile_act, tile_in + c * arb);
                        else memcpy(tile_in + c * arb, tile_act, arb);
                    }
                    memra_dot_decoded_tile_isa(isas[k], t->type, n, decoded, tile_in, arb, TILE_ROWS, tile, TILE_STRIDE);
                    for (int c = 0; c < TILE_ROWS; c++)
                        for (int r = 0; r < 4; r++)
                            if (memcmp(&tile[c * TILE_STRIDE + r], &want[4 * c + r], sizeof(float)) != 0)
                                FAIL("decoded tile %s isa %s n=%lld activation row %d row %d: %.9g != rows4 %.9g", t->name, isas[k], (long long)n, c, r,
                                     tile[c * TILE_STRIDE + r], want[4 * c + r]);
                    free(tile_in);
                    free(tile_act);
                    free(tile_x);
                    free(decoded);
                    free(prepared);
                } else if (memra_dot_decoded_prepared_bytes_isa(isas[k], t->type, n) != 0) {
                    FAIL("decoded %s isa %s n=%lld: prepared bytes without a decoded route", t->name, isas[k], (long long)n);
                }
                /* memra_dot_rows (the matrix-vector entry) over 3 of the rows: the same bits too */
                float many[3];
                memra_dot_rows_isa(isas[k], t->type, n, w + stride, stride, 3, act, many);
                for (int r = 0; r < 3; r++) {
                    const float one = memra_dot_row_isa(isas[k], t->type, n, w + (r + 1) * stride, act);
                    if (memcmp(&one, &many[r], sizeof(float)) != 0)
                        FAIL("rows %s isa %s n=%lld row %d: %.9g != dot_row %.9g", t->name, isas[k], (long long)n, r + 1, many[r], one);
                }
            }
        }
        free(w); free(act); free(x); free(ws); free(wo); free(a); free(s);
    }
}

/* dequantize.c (linked in): the reference dequantization rounded to float, exactly. */
void memra_dequantize_row(int type, const void * x, float * y, int64_t n);

static void check_dequantize(void) {
    enum { N = 1024 };
    static uint8_t w[4 * N];
    static float got[N];
    static double ws[N], wo[N];
    for (int i = 0; i < N_TYPES; i++) {
        const int type = TYPES[i].type;
        const int before = failures;
        for (int rep = 0; rep < 16; rep++) {
            random_weights(type, w, N);
            memra_dequantize_row(type, w, got, N);
            dequant_weights(type, w, N, ws, wo);
            for (int k = 0; k < N; k++) {
                const float want = (float)(ws[k] + wo[k]);
                if (!(got[k] == want)) { /* (== : the reference does not track the sign of a zero) */
                    FAIL("dequantize %s value %d: got %.9g want %.9g", TYPES[i].name, k, got[k], want);
                    break;
                }
            }
            if (failures != before) break;
        }
    }
}

/* The dispatched entry points give what the reported path gives. */
static void check_dispatch(void) {
    const char * isa = memra_dot_isa();
    if (!memra_dot_isa_available(isa)) FAIL("memra_dot_isa() = %s is not available", isa);
    const char * forced = getenv("MEMRA_CPU_ISA");
    if (forced != NULL && memra_dot_isa_available(forced) && strcmp(forced, isa) != 0) FAIL("MEMRA_CPU_ISA=%s but memra_dot_isa() = %s", forced, isa);
    enum { N = 1024 };
    static float x[N];
    static uint8_t w[4 * N], act1[4 * N], act2[4 * N]; /* f32 is the largest: 4 bytes a value */
    for (int i = 0; i < N_TYPES; i++) {
        const int type = TYPES[i].type;
        random_weights(type, w, N);
        random_activations(x, N);
        memra_quantize_activation_row(type, x, act1, N);
        memra_quantize_activation_row_isa(isa, type, x, act2, N);
        if (memcmp(act1, act2, memra_row_bytes(memra_dot_activation_type(type), N)) != 0) FAIL("dispatch %s: conversion differs from isa %s", TYPES[i].name, isa);
        const float d1 = memra_dot_row(type, N, w, act1), d2 = memra_dot_row_isa(isa, type, N, w, act1);
        if (memcmp(&d1, &d2, 4) != 0) FAIL("dispatch %s: memra_dot_row differs from isa %s", TYPES[i].name, isa);
    }
}

/* ---------------------------------------------------------------- benchmark */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds for one rows x n matrix-vector product over `copies` matrices in turn (best of several). */
static double time_matvec(int type, int64_t rows, int64_t n, uint8_t * const * mats, int copies, const uint8_t * act, float * y, int use_rows4) {
    const size_t rb = memra_row_bytes(type, n);
    double best = 1e30, total = 0.0;
    int reps = 0;
    while ((total < 0.6 || reps < 5) && reps < 400) {
        const uint8_t * m = mats[reps % copies];
        const double t0 = now_seconds();
        if (use_rows4) for (int64_t r = 0; r < rows; r += 4) memra_dot_rows4(type, n, m + r * rb, rb, act, y + r);
        else for (int64_t r = 0; r < rows; r++) y[r] = memra_dot_row(type, n, m + r * rb, act);
        const double dt = now_seconds() - t0;
        if (reps > 0) total += dt; /* the first one warms up */
        if (reps > 0 && dt < best) best = dt;
        reps++;
    }
    return best;
}

static int bench(int argc, char ** argv) {
    enum { ROWS = 4096, N = 4096 };
    const double cold_bytes = 160e6; /* several matrices in turn: more than the last-level cache */
    printf("path: %s (single thread, %d x %d matrix-vector, GB/s of weight bytes)\n", memra_dot_isa(), ROWS, N);
    printf("%-7s %9s %12s %12s %12s %10s\n", "type", "MB", "hot rows4", "hot row", "cold rows4", "ms/matvec");
    static float x[N], y[ROWS];
    static uint8_t act[N * 4];
    for (int i = 0; i < N; i++) x[i] = rng_normal();
    for (int i = 0; i < N_TYPES; i++) {
        const int type = TYPES[i].type;
        int wanted = argc == 0;
        for (int k = 0; k < argc; k++) wanted |= strcmp(argv[k], TYPES[i].name) == 0;
        if (!wanted) continue;
        const size_t bytes = memra_row_bytes(type, N) * ROWS;
        int copies = (int)(cold_bytes / (double)bytes) + 1;
        uint8_t ** mats = malloc((size_t)copies * sizeof(uint8_t *));
        for (int c = 0; c < copies; c++) {
            mats[c] = malloc(bytes);
            for (int r = 0; r < ROWS; r++) random_weights(type, mats[c] + r * memra_row_bytes(type, N), N);
        }
        memra_quantize_activation_row(type, x, act, N);
        const double hot4 = time_matvec(type, ROWS, N, mats, 1, act, y, 1);
        const double hot1 = time_matvec(type, ROWS, N, mats, 1, act, y, 0);
        const double cold4 = time_matvec(type, ROWS, N, mats, copies, act, y, 1);
        printf("%-7s %9.1f %12.1f %12.1f %12.1f %10.3f\n", TYPES[i].name, (double)bytes / 1e6, (double)bytes / hot4 / 1e9,
               (double)bytes / hot1 / 1e9, (double)bytes / cold4 / 1e9, cold4 * 1e3);
        fflush(stdout);
        for (int c = 0; c < copies; c++) free(mats[c]);
        free(mats);
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char ** argv) {
    if (argc > 1 && strcmp(argv[1], "bench") == 0) return bench(argc - 2, argv + 2); /* optional type names */
    if (argc > 1 && strcmp(argv[1], "isa") == 0) {
        check_dispatch();
        puts(memra_dot_isa());
        return failures ? 1 : 0;
    }

    const char * isas[sizeof(ISAS) / sizeof(ISAS[0])];
    int n_isas = 0;
    for (int k = 0; k < N_ISAS; k++) if (memra_dot_isa_available(ISAS[k])) isas[n_isas++] = ISAS[k];
    printf("paths on this machine:");
    for (int k = 0; k < n_isas; k++) printf(" %s", isas[k]);
    printf("; dispatched: %s\n", memra_dot_isa());

    check_metadata();
    check_dispatch();
    {
        const int before = failures;
        check_dequantize();
        printf("dequantize (dequantize.c), every type: %s\n", failures == before ? "ok (exact)" : "FAILED");
    }
    for (int k = 0; k < n_isas; k++) {
        const int before = failures;
        check_conversions(isas[k]);
        printf("activation conversion, %-10s: %s\n", isas[k], failures == before ? "ok (bit-exact)" : "FAILED");
    }
    for (int i = 0; i < N_TYPES; i++) {
        const int before = failures;
        for (int k = 0; k < n_isas; k++) worst[k] = 0.0;
        check_dots(&TYPES[i], isas, n_isas);
        printf("dot %-7s: %-6s max |err|/M:", TYPES[i].name, failures == before ? "ok" : "FAILED");
        for (int k = 0; k < n_isas; k++) printf(" %s %.1e", isas[k], worst[k]);
        printf("\n");
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all checks passed (dot bound |err| <= %g * sum|w_i a_i| terms; rows4, rows, decoded rows == row bit for bit)\n", TOLERANCE);
    return 0;
}
