/*
 * memra_quantize: float32 values -> the k-quant types (q2_K, q3_K, q4_K, q5_K, q6_K) and the 32-value
 * block types (q4_0, q4_1, q5_0, q5_1, q8_0), iq4_nl / iq4_xs, iq3_s / iq3_xxs (quantize-iq3.c) and iq2_xxs, iq2_xs, iq2_s,
 * iq1_s, iq1_m (quantize-iq2.c, quantize-iq1.c; the first three and iq1_s only with importance), byte for byte as ggml's quantize_row_*_ref without an
 * importance matrix (and with one, memra_quantize_row, as ggml's quantize_row_*_impl), and as @memra/gguf's TypeScript
 * quantizers (packages/gguf/src/quant/quantize-k.ts, scale-search.ts, quantize-blocks-32.ts), which this follows operation
 * for operation. The TypeScript is the reference the golden models were generated with; this is the
 * same arithmetic in C for @memra/synthetic: q4_K at 54 M values/s with AVX2, 10 M without,
 * against 2.5 M in TypeScript (a k-quant golden model's 39 M-value embedding took ~15 s there).
 * packages/synthetic/src/native-quantize.test.ts checks the two agree bit for bit, on both paths.
 *
 * Every operation is one binary32 operation in the order the TypeScript (and ggml) writes it: no
 * FMA contraction, no fast math, sums accumulated sequentially.
 */
#if defined(__FAST_MATH__)
#error "quantize.c must be compiled without -ffast-math: its results must match ggml's bit for bit"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#include "cpu-internal.h"
#include "quantize-common.h"

/* Inlined into each target's copy of the lane searches (DEFINE_LANE_SEARCHES). */
#define INLINE static inline __attribute__((always_inline))
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(MEMRA_NO_SIMD)
#define QUANTIZE_X86 1
#else
#define QUANTIZE_X86 0
#endif

/* Stores `value` as a little-endian half at p; returns the half's value. */
INLINE float store_half(uint8_t * p, float value) {
    const uint16_t bits = memra_f32_to_f16(value);
    p[0] = (uint8_t)(bits & 0xff);
    p[1] = (uint8_t)(bits >> 8);
    return memra_f16_to_f32(bits);
}

/* ggml's make_q3_quants with do_rmse. L[i] = level + nmax; work: n ints. */
INLINE float search_symmetric_scale_q3(int n, int nmax, const float * x, uint8_t * L, int * work) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        work[i] = l;
        const float w = x[i] * x[i];
        sumlx = sumlx + (w * x[i]) * (float)l;
        suml2 = suml2 + (w * (float)l) * (float)l;
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            const int current = work[i];
            float slx = sumlx - (w * x[i]) * (float)current;
            if (slx > 0) {
                float sl2 = suml2 - (w * (float)current) * (float)current;
                const int next = clamp_int(nearest_int((x[i] * sl2) / slx), -nmax, nmax - 1);
                if (next != current) {
                    slx = slx + (w * x[i]) * (float)next;
                    sl2 = sl2 + (w * (float)next) * (float)next;
                    if (sl2 > 0 && (slx * slx) * suml2 > (sumlx * sumlx) * sl2) {
                        work[i] = next;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)(work[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0;
}

/* ---- the same searches for 8 groups at once, one group per vector lane ----
 *
 * Each lane runs exactly the scalar function's operations in the scalar order on its own group (a
 * vector operation is the lane-wise binary32 operation; branches become lane masks), so the results
 * are the scalar ones bit for bit, but the 8 groups' sequential sums overlap instead of waiting on
 * each other: q4_K goes from 10 M values/s (scalar C) to 54 M with AVX2 (the
 * portable build, two SSE halves per vector, stays at about 10 M). */

typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
#define LANES 8

/* Helpers as macros, not functions: GCC notes a vector parameter's ABI without AVX even where the
 * function is always inlined. */
#define splat_f(v) ((f32x8){(v), (v), (v), (v), (v), (v), (v), (v)})
#define splat_i(v) ((i32x8){(v), (v), (v), (v), (v), (v), (v), (v)})
/* mask (all ones or zero per lane) ? a : b */
#define select_f(mask, a, b) ((f32x8)(((mask) & (i32x8)(a)) | (~(mask) & (i32x8)(b))))
#define select_i(mask, a, b) (((mask) & (a)) | (~(mask) & (b)))
#define abs_f(v) ((f32x8)((i32x8)(v) & splat_i(0x7fffffff)))
/* nearest_int lane by lane */
#define nearest_int_x8(v) (((i32x8)((v) + splat_f(12582912.f)) & splat_i(0x007fffff)) - splat_i(0x00400000))
/* v (a variable) clamped to [low, high] */
#define clamp_x8(v, low, high) select_i((v) > splat_i(high), splat_i(high), select_i((v) < splat_i(low), splat_i(low), (v)))
#define to_float_x8(v) __builtin_convertvector((v), f32x8)
/* p[0], p[stride], ..., p[7 * stride] as one vector */
#define gather_x8(p, stride) \
    ((f32x8){(p)[0], (p)[(stride)], (p)[2 * (stride)], (p)[3 * (stride)], (p)[4 * (stride)], (p)[5 * (stride)], (p)[6 * (stride)], (p)[7 * (stride)]})

/* search_scale_and_min on groups g = 0..7 of n values (x + g * stride, weights + g * n): levels to
 * L + g * stride, -min to minus_min[g], scale to scale_out[g]. nstep >= 1. */
INLINE void search_scale_and_min_x8(int n, int nmax, const float * x, int stride, const float * weights, uint8_t * L, float * minus_min,
                                    float * scale_out, float rmin, float rdelta, int nstep, bool use_mad) {
    f32x8 xt[32], wt[32];
    i32x8 best_l[32], work[32];
    /* n >= 1 (16 or 32): the first values are read whatever n is, so the compiler sees them set */
    xt[0] = gather_x8(x, stride);
    wt[0] = gather_x8(weights, n);
    for (int i = 1; i < n; i++) {
        xt[i] = gather_x8(x + i, stride);
        wt[i] = gather_x8(weights + i, n);
    }
    f32x8 min = xt[0], max = xt[0];
    f32x8 sum_w = wt[0];
    f32x8 sum_x = sum_w * xt[0];
    for (int i = 1; i < n; i++) {
        min = select_f(xt[i] < min, xt[i], min);
        max = select_f(xt[i] > max, xt[i], max);
        sum_w = sum_w + wt[i];
        sum_x = sum_x + wt[i] * xt[i];
    }
    min = select_f(min > splat_f(0), splat_f(0), min);
    const i32x8 flat = max == min;
    const f32x8 fnmax = splat_f((float)nmax);
    f32x8 iscale = fnmax / (max - min);
    f32x8 scale = splat_f(1) / iscale;
    f32x8 best_error = splat_f(0);
    for (int i = 0; i < n; i++) {
        const i32x8 nearest = nearest_int_x8(iscale * (xt[i] - min));
        const i32x8 l = clamp_x8(nearest, 0, nmax);
        best_l[i] = l;
        f32x8 diff = (scale * to_float_x8(l) + min) - xt[i];
        diff = use_mad ? abs_f(diff) : diff * diff;
        best_error = best_error + wt[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = splat_f((rmin + rdelta * (float)is) + (float)nmax) / (max - min);
        f32x8 sum_l = splat_f(0), sum_l2 = splat_f(0), sum_xl = splat_f(0);
        for (int i = 0; i < n; i++) {
            const i32x8 nearest = nearest_int_x8(iscale * (xt[i] - min));
        const i32x8 l = clamp_x8(nearest, 0, nmax);
            work[i] = l;
            const f32x8 fl = to_float_x8(l);
            const f32x8 wl = wt[i] * fl;
            sum_l = sum_l + wl;
            sum_l2 = sum_l2 + wl * fl;
            sum_xl = sum_xl + wl * xt[i];
        }
        const f32x8 determinant = sum_w * sum_l2 - sum_l * sum_l;
        const i32x8 solvable = determinant > splat_f(0);
        if (!(solvable[0] | solvable[1] | solvable[2] | solvable[3] | solvable[4] | solvable[5] | solvable[6] | solvable[7])) continue;
        f32x8 this_scale = (sum_w * sum_xl - sum_x * sum_l) / determinant;
        f32x8 this_min = (sum_l2 * sum_x - sum_l * sum_xl) / determinant;
        const i32x8 positive = this_min > splat_f(0);
        this_min = select_f(positive, splat_f(0), this_min);
        this_scale = select_f(positive, sum_xl / sum_l2, this_scale);
        f32x8 error = splat_f(0);
        for (int i = 0; i < n; i++) {
            f32x8 diff = (this_scale * to_float_x8(work[i]) + this_min) - xt[i];
            diff = use_mad ? abs_f(diff) : diff * diff;
            error = error + wt[i] * diff;
        }
        const i32x8 better = solvable & (error < best_error);
        for (int i = 0; i < n; i++) best_l[i] = select_i(better, work[i], best_l[i]);
        best_error = select_f(better, error, best_error);
        scale = select_f(better, this_scale, scale);
        min = select_f(better, this_min, min);
    }
    for (int g = 0; g < LANES; g++) {
        for (int i = 0; i < n; i++) L[g * stride + i] = flat[g] ? 0 : (uint8_t)best_l[i][g];
        minus_min[g] = -min[g]; /* a flat group's min is its first min (never improved: its sums are NaN) */
        scale_out[g] = flat[g] ? 0 : scale[g];
    }
}

/* The levels of x * iscale (clamped to [-nmax, nmax - 1]) and their weighted sums: sumlx = sum w x l,
 * suml2 = sum w l^2, in index order. Vectors by pointer: see the helper macros. */
INLINE void symmetric_levels_x8(int n, int nmax, const f32x8 * xt, const f32x8 * wt, const f32x8 * iscale, i32x8 * levels, f32x8 * sumlx_out,
                                f32x8 * suml2_out) {
    f32x8 sumlx = splat_f(0), suml2 = splat_f(0);
    for (int i = 0; i < n; i++) {
        const i32x8 nearest = nearest_int_x8(*iscale * xt[i]);
        const i32x8 l = clamp_x8(nearest, -nmax, nmax - 1);
        levels[i] = l;
        const f32x8 fl = to_float_x8(l);
        sumlx = sumlx + (wt[i] * xt[i]) * fl;
        suml2 = suml2 + (wt[i] * fl) * fl;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
}

/* ggml's make_qx_quants (rmse_type 1) on groups g = 0..7 of n <= 32 values (x + g * n), weighted by
 * weights + g * n (ggml's quant_weights), or x^2 when weights is NULL: levels to L + g * n, scales to scale_out[g]. */
INLINE void search_symmetric_scale_x8(int n, int nmax, const float * x, const float * weights, uint8_t * L, float * scale_out) {
    f32x8 xt[32], wt[32];
    i32x8 best_l[32];
    for (int i = 0; i < n; i++) {
        xt[i] = gather_x8(x + i, n);
        wt[i] = weights ? gather_x8(weights + i, n) : xt[i] * xt[i];
    }
    f32x8 max = splat_f(0), amax = splat_f(0);
    for (int i = 0; i < n; i++) {
        const f32x8 ax = abs_f(xt[i]);
        const i32x8 larger = ax > amax;
        amax = select_f(larger, ax, amax);
        max = select_f(larger, xt[i], max);
    }
    const i32x8 zero = amax < splat_f(GROUP_MAX_EPS);
    f32x8 iscale = splat_f((float)-nmax) / max;
    f32x8 sumlx, suml2;
    symmetric_levels_x8(n, nmax, xt, wt, &iscale, best_l, &sumlx, &suml2);
    f32x8 scale = select_f(suml2 != splat_f(0), sumlx / suml2, splat_f(0));
    f32x8 best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = splat_f(-((float)nmax + 0.1f * (float)is)) / max;
        i32x8 levels[32];
        symmetric_levels_x8(n, nmax, xt, wt, &iscale, levels, &sumlx, &suml2);
        const i32x8 better = (suml2 > splat_f(0)) & (sumlx * sumlx > best * suml2);
        for (int i = 0; i < n; i++) best_l[i] = select_i(better, levels[i], best_l[i]);
        scale = select_f(better, sumlx / suml2, scale);
        best = select_f(better, scale * sumlx, best);
    }
    for (int g = 0; g < LANES; g++) {
        for (int i = 0; i < n; i++) L[g * n + i] = zero[g] ? 0 : (uint8_t)(best_l[i][g] + nmax);
        scale_out[g] = zero[g] ? 0 : scale[g];
    }
}

/* Each search compiled once per target (the vector bodies above are inlined into these); the block
 * quantizers below call the chosen target's through this table. */
typedef struct {
    void (*scale_and_min)(int n, int nmax, const float * x, int stride, const float * weights, uint8_t * L, float * minus_min, float * scale_out,
                          float rmin, float rdelta, int nstep, bool use_mad);
    void (*symmetric)(int n, int nmax, const float * x, const float * weights, uint8_t * L, float * scale_out);
} lane_searches;

#define DEFINE_LANE_SEARCHES(NAME, TARGET)                                                                                                            \
    TARGET static void NAME##_scale_and_min(int n, int nmax, const float * x, int stride, const float * weights, uint8_t * L, float * minus_min, \
                                            float * scale_out, float rmin, float rdelta, int nstep, bool use_mad) {                            \
        search_scale_and_min_x8(n, nmax, x, stride, weights, L, minus_min, scale_out, rmin, rdelta, nstep, use_mad);                          \
    }                                                                                                                                         \
    TARGET static void NAME##_symmetric(int n, int nmax, const float * x, const float * weights, uint8_t * L, float * scale_out) {            \
        search_symmetric_scale_x8(n, nmax, x, weights, L, scale_out);                                                                         \
    }                                                                                                                                         \
    static const lane_searches NAME = {NAME##_scale_and_min, NAME##_symmetric};

DEFINE_LANE_SEARCHES(portable_searches, )
#if QUANTIZE_X86
/* AVX2 without FMA: each 8-lane vector in one register instead of two SSE halves, ~5x faster here. */
DEFINE_LANE_SEARCHES(avx2_searches, __attribute__((target("avx2"))))
#endif

/* Four 2-bit level planes: byte l of each 32-byte group holds levels l, l+32, l+64, l+96 of 128. */
INLINE void pack_two_bit_levels(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < 256; j += 128) {
        for (int l = 0; l < 32; l++) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

/* ---- the helpers of the weighted quantizers (ggml's quantize_row_*_impl, given an importance matrix) ---- */

/* The search of the weighted k-quants and 32-value affine types: make_qkx3_quants(..., -0.9f, 0.05f, 36, false),
 * which with weights is make_qkx2_quants (the lanes' scale_and_min). */
#define WEIGHTED_RMIN -0.9f
#define WEIGHTED_RDELTA 0.05f
#define WEIGHTED_STEPS 36

/* ggml's make_qp_quants (declared in cpu-internal.h: quantize-iq2.c's iq2_xxs searches with it too). */
float memra_search_positive_scale(int n, int nmax, const float * x, uint8_t * L, const float * weights) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best_error = best_error + (weights[i] * diff) * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float candidate = (0.1f * (float)is + (float)nmax) / max;
        const float candidate_scale = 1 / candidate;
        float error = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(candidate * x[i]);
            if (l > nmax) l = nmax;
            const float diff = x[i] - candidate_scale * (float)l;
            error = error + (weights[i] * diff) * diff;
        }
        if (error < best_error) {
            best_error = error;
            iscale = candidate;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx = sumlx + (weights[i] * x[i]) * (float)l;
        suml2 = suml2 + (weights[i] * (float)l) * (float)l;
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = weights[i];
            const int current = L[i];
            float slx = sumlx - (w * x[i]) * (float)current;
            float sl2 = suml2 - (w * (float)current) * (float)current;
            if (slx > 0 && sl2 > 0) {
                int next = nearest_int((x[i] * sl2) / slx);
                if (next > nmax) next = nmax;
                if (next != current) {
                    slx = slx + (w * x[i]) * (float)next;
                    sl2 = sl2 + (w * (float)next) * (float)next;
                    if ((slx * slx) * suml2 > (sumlx * sumlx) * sl2) {
                        L[i] = (uint8_t)next;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0 ? sumlx / suml2 : 0;
}

/* The lane searches on `groups` groups of n values (x + g * n, weights + g * n), 8 at a time, the
 * last 8 padded with zero groups: make_qx_quants (weighted) levels to L + g * n, scales to scales[g]. */
static void symmetric_groups(const lane_searches * search, int64_t groups, int n, int nmax, const float * x, const float * weights, uint8_t * L,
                             float * scales) {
    for (int64_t first = 0; first < groups; first += LANES) {
        const int64_t count = groups - first < LANES ? groups - first : LANES;
        if (count == LANES) {
            search->symmetric(n, nmax, x + first * n, weights + first * n, L + first * n, scales + first);
            continue;
        }
        float xs[LANES * 32] = {0}, ws[LANES * 32] = {0}, ss[LANES];
        uint8_t ls[LANES * 32];
        memcpy(xs, x + first * n, (size_t)(count * n) * sizeof(float));
        memcpy(ws, weights + first * n, (size_t)(count * n) * sizeof(float));
        search->symmetric(n, nmax, xs, ws, ls, ss);
        memcpy(L + first * n, ls, (size_t)(count * n));
        memcpy(scales + first, ss, (size_t)count * sizeof(float));
    }
}

/* make_qkx3_quants (weighted) on `groups` contiguous groups of 32, as symmetric_groups: levels to L + 32 g, -min to minus_min[g], scales[g]. */
static void scale_and_min_groups(const lane_searches * search, int64_t groups, int nmax, const float * x, const float * weights, uint8_t * L,
                                 float * minus_min, float * scales) {
    for (int64_t first = 0; first < groups; first += LANES) {
        const int64_t count = groups - first < LANES ? groups - first : LANES;
        if (count == LANES) {
            search->scale_and_min(32, nmax, x + first * 32, 32, weights + first * 32, L + first * 32, minus_min + first, scales + first, WEIGHTED_RMIN,
                                  WEIGHTED_RDELTA, WEIGHTED_STEPS, false);
            continue;
        }
        float xs[LANES * 32] = {0}, ws[LANES * 32] = {0}, ms[LANES], ss[LANES];
        uint8_t ls[LANES * 32];
        memcpy(xs, x + first * 32, (size_t)(count * 32) * sizeof(float));
        memcpy(ws, weights + first * 32, (size_t)(count * 32) * sizeof(float));
        search->scale_and_min(32, nmax, xs, 32, ws, ls, ms, ss, WEIGHTED_RMIN, WEIGHTED_RDELTA, WEIGHTED_STEPS, false);
        memcpy(L + first * 32, ls, (size_t)(count * 32));
        memcpy(minus_min + first, ms, (size_t)count * sizeof(float));
        memcpy(scales + first, ss, (size_t)count * sizeof(float));
    }
}

/* q2_K's levels from its stored d, dmin and 4-bit scales and mins (groups whose scale is 0 keep the search's), packed. */
static void q2_K_levels(const float * x, uint8_t * y, uint8_t * L, float d, float dmin) {
    for (int j = 0; j < 16; j++) {
        const float dl = d * (float)(y[j] & 0x0f);
        if (dl == 0) continue;
        const float ml = dmin * (float)(y[j] >> 4);
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clamp_int(nearest_int((x[16 * j + i] + ml) / dl), 0, 3);
    }
    pack_two_bit_levels(L, y + 16);
}

/* q2_K, 84 bytes: scales[16] (4-bit scale | 4-bit min << 4), qs[64], d, dmin. */
static void quantize_q2_K(const lane_searches * search, const float * x, uint8_t * y) {
    uint8_t L[256];
    float weights[256], mins[16], scales[16];
    const float q4scale = 15.f;
    float max_scale = 0, max_min = 0;
    for (int i = 0; i < 256; i++) weights[i] = fabsf(x[i]);
    for (int half = 0; half < 2; half++) {
        search->scale_and_min(16, 3, x + 128 * half, 16, weights + 128 * half, L + 128 * half, mins + 8 * half, scales + 8 * half, -0.5f, 0.1f, 15, true);
    }
    for (int j = 0; j < 16; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float d;
    if (max_scale > 0) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < 16; j++) y[j] = (uint8_t)nearest_int(iscale * scales[j]);
        d = store_half(y + 80, max_scale / q4scale);
    } else {
        memset(y, 0, 16);
        d = store_half(y + 80, 0);
    }
    float dmin;
    if (max_min > 0) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < 16; j++) y[j] = (uint8_t)(y[j] | (nearest_int(iscale * mins[j]) << 4));
        dmin = store_half(y + 82, max_min / q4scale);
    } else {
        dmin = store_half(y + 82, 0);
    }
    q2_K_levels(x, y, L, d, dmin);
}

/* quantize_row_q2_K_impl: the weighted scale-and-min search per group of 16, then the group scales and
 * mins' own 4-bit fits weighted by the groups' summed weights. importance: the block's 256 weights. */
static void quantize_q2_K_weighted(const lane_searches * search, const float * x, uint8_t * y, const float * importance) {
    uint8_t L[256], Ls[16], Lm[16];
    float weights[256], sw[16], mins[16], scales[16];
    const float sigma2 = sum_of_squares(256, x) / 256;
    for (int j = 0; j < 16; j++) sw[j] = importance_weights(16, x + 16 * j, importance + 16 * j, sigma2, weights + 16 * j);
    for (int half = 0; half < 2; half++) {
        search->scale_and_min(16, 3, x + 128 * half, 16, weights + 128 * half, L + 128 * half, mins + 8 * half, scales + 8 * half, WEIGHTED_RMIN,
                              WEIGHTED_RDELTA, WEIGHTED_STEPS, false);
    }
    const float d = store_half(y + 80, memra_search_positive_scale(16, 15, scales, Ls, sw));
    const float dmin = store_half(y + 82, memra_search_positive_scale(16, 15, mins, Lm, sw));
    for (int j = 0; j < 16; j++) y[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
    q2_K_levels(x, y, L, d, dmin);
}

/* q3_K's levels from its stored d and 6-bit scales (groups whose scale is 0 keep the search's): high bits to hmask, 2 low bits packed. */
static void q3_K_levels(const float * x, uint8_t * y, uint8_t * L, float d) {
    const uint8_t * packed = y + 96;
    for (int j = 0; j < 16; j++) {
        const int low = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
        const int scale = (low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        const float dl = d * (float)scale;
        if (dl == 0) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(clamp_int(nearest_int(x[16 * j + i] / dl), -4, 3) + 4);
    }
    memset(y, 0, 32);
    int m = 0;
    uint8_t high_bit = 1;
    for (int j = 0; j < 256; j++) {
        if (L[j] > 3) {
            y[m] |= high_bit;
            L[j] = (uint8_t)(L[j] - 4);
        }
        if (++m == 32) {
            m = 0;
            high_bit = (uint8_t)(high_bit << 1);
        }
    }
    pack_two_bit_levels(L, y + 32);
}

/* q3_K, 110 bytes: hmask[32], qs[64], scales[12] (signed 6-bit), d. */
static void quantize_q3_K(const float * x, uint8_t * y) {
    uint8_t L[256];
    int work[16];
    float scales[16];
    uint8_t * packed = y + 96;
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        scales[j] = search_symmetric_scale_q3(16, 4, x + 16 * j, L + 16 * j, work);
        const float scale = fabsf(scales[j]);
        if (scale > amax) {
            amax = scale;
            max_scale = scales[j];
        }
    }
    memset(packed, 0, 12);
    float d;
    if (max_scale != 0) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; j++) {
            int l = (int8_t)nearest_int(iscale * scales[j]); /* an int8_t in ggml */
            l = clamp_int(l, -32, 31) + 32;
            if (j < 8) packed[j] = (uint8_t)(l & 0x0f);
            else packed[j - 8] = (uint8_t)(packed[j - 8] | ((l & 0x0f) << 4));
            packed[8 + j % 4] = (uint8_t)(packed[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
        }
        d = store_half(y + 108, 1 / iscale);
    } else {
        d = store_half(y + 108, 0);
    }
    q3_K_levels(x, y, L, d);
}

/* quantize_row_q3_K_impl: make_qx_quants weighted per group of 16, then the 16 scales' own weighted
 * 6-bit fit (weights: the groups' summed weights) gives the packed scales and d. */
static void quantize_q3_K_weighted(const lane_searches * search, const float * x, uint8_t * y, const float * importance) {
    uint8_t L[256], Ls[16];
    float weights[256], sw[16], scales[16];
    uint8_t * packed = y + 96;
    const float sigma2 = super_block_sigma2(x);
    for (int j = 0; j < 16; j++) sw[j] = importance_weights(16, x + 16 * j, importance + 16 * j, sigma2, weights + 16 * j);
    symmetric_groups(search, 16, 16, 4, x, weights, L, scales);
    memset(packed, 0, 12);
    float d_block;
    symmetric_groups(search, 1, 16, 32, scales, sw, Ls, &d_block);
    for (int j = 0; j < 16; j++) {
        const int l = Ls[j];
        if (j < 8) packed[j] = (uint8_t)(l & 0x0f);
        else packed[j - 8] = (uint8_t)(packed[j - 8] | ((l & 0x0f) << 4));
        packed[8 + j % 4] = (uint8_t)(packed[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    }
    q3_K_levels(x, y, L, store_half(y + 108, d_block));
}

/* Scale and min levels (6 bits each) of group j packed as get_scale_min_k4 reads them. */
INLINE void pack_scale_and_min_k4(uint8_t * packed, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        packed[j] = ls;
        packed[j + 4] = lm;
    } else {
        packed[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
        packed[j - 4] = (uint8_t)(packed[j - 4] | ((ls >> 4) << 6));
        packed[j] = (uint8_t)(packed[j] | ((lm >> 4) << 6));
    }
}

/* quantize_row_q{4,5}_K_impl's scales: the weighted scale-and-min search per group of 32, then the
 * scales' and mins' own 6-bit fits (make_qp_quants weighted by the groups' summed weights) give d and
 * dmin; q5_K caps the levels at 63 (they exceed it only wrapped), q4_K does not. Returns d and dmin as stored. */
static void pack_scales_and_mins_k4_weighted(const lane_searches * search, const float * x, uint8_t * y, uint8_t * L, int nmax, const float * importance,
                                             float * d, float * dmin) {
    float weights[256], sw[8], mins[8], scales[8];
    uint8_t Ls[8], Lm[8];
    const float sigma2 = super_block_sigma2(x);
    for (int j = 0; j < 8; j++) sw[j] = importance_weights(32, x + 32 * j, importance + 32 * j, sigma2, weights + 32 * j);
    search->scale_and_min(32, nmax, x, 32, weights, L, mins, scales, WEIGHTED_RMIN, WEIGHTED_RDELTA, WEIGHTED_STEPS, false);
    const float d_block = memra_search_positive_scale(8, 63, scales, Ls, sw);
    const float m_block = memra_search_positive_scale(8, 63, mins, Lm, sw);
    const uint8_t cap = nmax == 31 ? 63 : 255;
    for (int j = 0; j < 8; j++) pack_scale_and_min_k4(y + 4, j, Ls[j] < cap ? Ls[j] : cap, Lm[j] < cap ? Lm[j] : cap);
    *d = store_half(y, d_block);
    *dmin = store_half(y + 2, m_block);
}

/* quantize_row_q{4,5}_K_ref's scales: weights sqrt(mean x^2) + |x| per group of 32, levels of max-scaled 6 bits. */
static void pack_scales_and_mins_k4(const lane_searches * search, const float * x, uint8_t * y, uint8_t * L, int nmax, float rmin, int nstep, float * d,
                                    float * dmin) {
    float weights[256], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float * xo = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 = sum_x2 + xo[l] * xo[l];
        const float average = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[32 * j + l] = average + fabsf(xo[l]);
    }
    search->scale_and_min(32, nmax, x, 32, weights, L, mins, scales, rmin, 0.1f, nstep, false);
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inverse_scale = max_scale > 0 ? 63.f / max_scale : 0;
    const float inverse_min = max_min > 0 ? 63.f / max_min : 0;
    for (int j = 0; j < 8; j++) {
        /* uint8_t in ggml: the int wraps to 8 bits before MIN(63, ...) */
        uint8_t ls = (uint8_t)nearest_int(inverse_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inverse_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        pack_scale_and_min_k4(y + 4, j, ls, lm);
    }
    *d = store_half(y, max_scale / 63);
    *dmin = store_half(y + 2, max_min / 63);
}

/* q4_K and q5_K: d, dmin, then scales[12] (6-bit scales and mins as get_scale_min_k4 reads them) at
 * y + 4 (from quantize_row_q{4,5}_K_ref's search, or with importance _impl's); the levels (0..nmax) left in L. */
static void quantize_scales_and_mins_k4(const lane_searches * search, const float * x, uint8_t * y, uint8_t * L, int nmax, float rmin, int nstep,
                                        const float * importance) {
    float d, dmin;
    const uint8_t * packed = y + 4;
    if (importance) pack_scales_and_mins_k4_weighted(search, x, y, L, nmax, importance, &d, &dmin);
    else pack_scales_and_mins_k4(search, x, y, L, nmax, rmin, nstep, &d, &dmin);
    for (int j = 0; j < 8; j++) {
        int scale, min;
        if (j < 4) {
            scale = packed[j] & 63;
            min = packed[j + 4] & 63;
        } else {
            scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
            min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
        }
        const float dl = d * (float)scale;
        if (dl == 0) continue;
        const float ml = dmin * (float)min;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clamp_int(nearest_int((x[32 * j + i] + ml) / dl), 0, nmax);
    }
}

/* q4_K, 144 bytes: d, dmin, scales[12], qs[128] (4-bit levels). */
static void quantize_q4_K(const lane_searches * search, const float * x, uint8_t * y, const float * importance) {
    uint8_t L[256];
    quantize_scales_and_mins_k4(search, x, y, L, 15, -1.f, 20, importance);
    uint8_t * q = y + 16;
    for (int j = 0; j < 256; j += 64, q += 32) {
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* q5_K, 176 bytes: d, dmin, scales[12], qh[32] (fifth bits), qs[128]. */
static void quantize_q5_K(const lane_searches * search, const float * x, uint8_t * y, const float * importance) {
    uint8_t L[256];
    quantize_scales_and_mins_k4(search, x, y, L, 31, -0.5f, 15, importance);
    uint8_t * qh = y + 16;
    uint8_t * ql = y + 48;
    memset(qh, 0, 32);
    uint8_t bit1 = 1, bit2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= bit1;
            }
            int l2 = L[n + j + 32];
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= bit2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        bit1 = (uint8_t)(bit1 << 2);
        bit2 = (uint8_t)(bit2 << 2);
    }
}

/* q6_K, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d. With importance
 * (quantize_row_q6_K_impl), the group scales' fits are weighted by it instead of x^2; nothing else changes. */
static void quantize_q6_K(const lane_searches * search, const float * x, uint8_t * y, const float * importance) {
    uint8_t L[256];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    search->symmetric(16, 32, x, importance, L, scales);
    search->symmetric(16, 32, x + 128, importance ? importance + 128 : NULL, L + 128, scales + 8);
    for (int ib = 0; ib < 16; ib++) {
        const float abs_scale = fabsf(scales[ib]);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, 210);
        return;
    }
    const float iscale = -128.f / max_scale;
    const float d = store_half(y + 208, 1 / iscale);
    for (int ib = 0; ib < 16; ib++) {
        const int l = nearest_int(iscale * scales[ib]);
        y[192 + ib] = (uint8_t)(l < 127 ? l : 127);
    }
    for (int j = 0; j < 16; j++) {
        const float dl = d * (float)(int8_t)y[192 + j];
        if (dl == 0) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(clamp_int(nearest_int(x[16 * j + i] / dl), -32, 31) + 32);
    }
    uint8_t * ql = y;
    uint8_t * qh = y + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const uint8_t l0 = L[j + l], l1 = L[j + l + 32], l2 = L[j + l + 64], l3 = L[j + l + 96];
            ql[l] = (uint8_t)((l0 & 0x0f) | ((l2 & 0x0f) << 4));
            ql[l + 32] = (uint8_t)((l1 & 0x0f) | ((l3 & 0x0f) << 4));
            qh[l] = (uint8_t)((l0 >> 4) | ((l1 >> 4) << 2) | ((l2 >> 4) << 4) | ((l3 >> 4) << 6));
        }
    }
}

/* ---- the 32-value block types (ggml's quantize_row_{q4_0,q4_1,q5_0,q5_1,q8_0}_ref) ---- */

/* C's float -> integer cast as x86-64 performs it (cvttss2si): truncation, INT32_MIN for NaN and
 * out-of-range values (reached when a block's scale is subnormal and its reciprocal overflows).
 * Written out so that the result does not depend on the target: the cast itself is undefined there. */
INLINE int32_t truncate_x86(float value) {
    return value > -2147483648.f && value < 2147483648.f ? (int32_t)value : INT32_MIN;
}

/* (int8_t) of the truncation: the low byte, as a signed value. */
INLINE int truncate_int8(float value) {
    return (int8_t)(uint8_t)(truncate_x86(value) & 0xff);
}

INLINE void store_word(uint8_t * p, uint32_t word) {
    p[0] = (uint8_t)word;
    p[1] = (uint8_t)(word >> 8);
    p[2] = (uint8_t)(word >> 16);
    p[3] = (uint8_t)(word >> 24);
}

/* The value of largest magnitude (the first on ties), sign kept. */
INLINE float signed_absolute_max(const float * x) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

INLINE void min_max(const float * x, float * min, float * max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

static void quantize_q4_0(const float * x, uint8_t * y) {
    const float d = signed_absolute_max(x) / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(y, d);
    for (int j = 0; j < 16; j++) {
        const int q0 = truncate_int8(x[j] * id + 8.5f), q1 = truncate_int8(x[16 + j] * id + 8.5f);
        y[2 + j] = (uint8_t)((q0 < 15 ? q0 : 15) & 0xff) | (uint8_t)(((q1 < 15 ? q1 : 15) & 0xff) << 4);
    }
}

static void quantize_q4_1(const float * x, uint8_t * y) {
    float min, max;
    min_max(x, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(y, d);
    store_half(y + 2, min);
    for (int j = 0; j < 16; j++) {
        const int q0 = truncate_int8((x[j] - min) * id + 0.5f), q1 = truncate_int8((x[16 + j] - min) * id + 0.5f);
        y[4 + j] = (uint8_t)((q0 < 15 ? q0 : 15) & 0xff) | (uint8_t)(((q1 < 15 ? q1 : 15) & 0xff) << 4);
    }
}

static void quantize_q5_0(const float * x, uint8_t * y) {
    const float d = signed_absolute_max(x) / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(y, d);
    uint32_t high = 0;
    for (int j = 0; j < 16; j++) {
        int q0 = truncate_int8(x[j] * id + 16.5f), q1 = truncate_int8(x[16 + j] * id + 16.5f);
        q0 = (q0 < 31 ? q0 : 31) & 0xff;
        q1 = (q1 < 31 ? q1 : 31) & 0xff;
        y[6 + j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        high |= (uint32_t)((q0 & 0x10) >> 4) << j;
        high |= (uint32_t)((q1 & 0x10) >> 4) << (j + 16);
    }
    store_word(y + 2, high);
}

static void quantize_q5_1(const float * x, uint8_t * y) {
    float min, max;
    min_max(x, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(y, d);
    store_half(y + 2, min);
    uint32_t high = 0;
    for (int j = 0; j < 16; j++) {
        const int q0 = truncate_x86((x[j] - min) * id + 0.5f) & 0xff, q1 = truncate_x86((x[16 + j] - min) * id + 0.5f) & 0xff;
        y[8 + j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        high |= (uint32_t)((q0 & 0x10) >> 4) << j;
        high |= (uint32_t)((q1 & 0x10) >> 4) << (j + 16);
    }
    store_word(y + 4, high);
}

static void quantize_q8_0(const float * x, uint8_t * y) {
    float amax = 0;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(y, d);
    for (int j = 0; j < 32; j++) y[2 + j] = (uint8_t)(truncate_x86(roundf(x[j] * id)) & 0xff);
}

/* quantize_row_q4_0_impl / q5_0_impl on a row of `blocks` blocks: per block, make_qx_quants (nmax 8 or
 * 16) weighted by importance * sqrt(sigma2 + x^2), where sigma2 is the mean of x^2 over the whole ROW. */
static void quantize_symmetric_row_weighted(const lane_searches * search, const float * x, uint8_t * y, int64_t blocks, const float * importance,
                                            int nmax) {
    const float sigma2 = sum_of_squares(blocks * 32, x) / (float)(blocks * 32);
    const size_t bytes = nmax == 8 ? 18 : 22;
    for (int64_t first = 0; first < blocks; first += LANES) {
        const int64_t count = blocks - first < LANES ? blocks - first : LANES;
        float weights[LANES * 32], scales[LANES];
        uint8_t L[LANES * 32];
        for (int64_t b = 0; b < count; b++) importance_weights(32, x + (first + b) * 32, importance + (first + b) * 32, sigma2, weights + 32 * b);
        symmetric_groups(search, count, 32, nmax, x + first * 32, weights, L, scales);
        for (int64_t b = 0; b < count; b++) {
            uint8_t * block = y + (size_t)(first + b) * bytes;
            const uint8_t * l = L + 32 * b;
            store_half(block, scales[b]);
            if (nmax == 8) {
                for (int j = 0; j < 16; j++) block[2 + j] = (uint8_t)(l[j] | (l[j + 16] << 4));
            } else {
                uint32_t high = 0;
                for (int j = 0; j < 16; j++) {
                    block[6 + j] = (uint8_t)((l[j] & 0x0f) | ((l[j + 16] & 0x0f) << 4));
                    high |= (uint32_t)((l[j] & 0x10) >> 4) << j;
                    high |= (uint32_t)((l[j + 16] & 0x10) >> 4) << (j + 16);
                }
                store_word(block + 2, high);
            }
        }
    }
}

/* quantize_row_q4_1_impl / q5_1_impl on a row: per block, make_qkx3_quants (nmax 15 or 31) weighted as
 * above; d and m = min as halves. */
static void quantize_affine_row_weighted(const lane_searches * search, const float * x, uint8_t * y, int64_t blocks, const float * importance, int nmax) {
    const float sigma2 = sum_of_squares(blocks * 32, x) / (float)(blocks * 32);
    const size_t bytes = nmax == 15 ? 20 : 24;
    for (int64_t first = 0; first < blocks; first += LANES) {
        const int64_t count = blocks - first < LANES ? blocks - first : LANES;
        float weights[LANES * 32], scales[LANES], minus_min[LANES];
        uint8_t L[LANES * 32];
        for (int64_t b = 0; b < count; b++) importance_weights(32, x + (first + b) * 32, importance + (first + b) * 32, sigma2, weights + 32 * b);
        scale_and_min_groups(search, count, nmax, x + first * 32, weights, L, minus_min, scales);
        for (int64_t b = 0; b < count; b++) {
            uint8_t * block = y + (size_t)(first + b) * bytes;
            const uint8_t * l = L + 32 * b;
            store_half(block, scales[b]);
            store_half(block + 2, -minus_min[b]);
            if (nmax == 15) {
                for (int j = 0; j < 16; j++) block[4 + j] = (uint8_t)(l[j] | (l[j + 16] << 4));
            } else {
                uint32_t high = 0;
                for (int j = 0; j < 16; j++) {
                    block[8 + j] = (uint8_t)((l[j] & 0x0f) | ((l[j + 16] & 0x0f) << 4));
                    high |= (uint32_t)((l[j] & 0x10) >> 4) << j;
                    high |= (uint32_t)((l[j + 16] & 0x10) >> 4) << (j + 16);
                }
                store_word(block + 4, high);
            }
        }
    }
}

/* ---- iq4_nl and iq4_xs: ggml's quantize_iq4_nl / quantize_iq4_xs (what ggml_quantize_chunk, and so
 * llama-quantize, runs: a scale search with ntry 7, weights x^2, or with importance importance *
 * sqrt(sigma2 + x^2), sigma2 = 2 * mean x^2 over the super-block) ---- */

/* kvalues_iq4nl, as floats (every use converts them) */
static const float iq4_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* ggml's best_index_int8 over the 16 levels: the nearest level's index, the upper one on a tie.
 * Its binary search ends at the first level above x; counting the levels at or
 * below x finds the same one without the search's unpredictable branches (iq4_xs on 2 threads: 4.4 ->
 * 6.1 M values/s; the 15-try scale search is what costs, as in ggml). A NaN, which the search walks to the top, gives 15 as there. */
INLINE int iq4_best_index(float x) {
    if (x <= iq4_levels[0]) return 0;
    if (x >= iq4_levels[15]) return 15;
    if (x != x) return 15;
    int above = 1; /* levels[0] < x */
    for (int i = 1; i < 15; i++) above += x >= iq4_levels[i];
    return x - iq4_levels[above - 1] < iq4_levels[above] - x ? above - 1 : above;
}

/* quantize_row_iq4_nl_impl's search for one block of 32: the scale (0 for an all-zero block).
 * importance: the block's 32 weights, or NULL. */
static float iq4_search_block(const float * x, const float * importance, float sigma2) {
    float weight[32];
    group_weights(32, x, importance, sigma2, weight);
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < GROUP_MAX_EPS) return 0;
    float d = -max / iq4_levels[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        const float q = iq4_levels[iq4_best_index(id * x[j])];
        sumqx += weight[j] * q * x[j];
        sumq2 += weight[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        id = (itry + iq4_levels[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const float q = iq4_levels[iq4_best_index(id * x[j])];
            sumqx += weight[j] * q * x[j];
            sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void iq4_pack(const uint8_t * L, uint8_t * q4, int count) {
    for (int i = 0; i < count / 32; i++) {
        for (int j = 0; j < 16; j++) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
}

/* quantize_row_iq4_nl_impl's sigma2: the sum of x^2 over the super-block, times 2 / its size. */
INLINE float iq4_sigma2(int size, const float * x) {
    return sum_of_squares(size, x) * (2.f / (float)size);
}

static void quantize_iq4_nl(const float * x, uint8_t * y, const float * importance) {
    uint8_t L[32];
    const float scale = iq4_search_block(x, importance, importance ? iq4_sigma2(32, x) : 0);
    store_half(y, scale);
    const float id = scale != 0 ? 1 / scale : 0;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)iq4_best_index(id * x[j]);
    iq4_pack(L, y + 2, 32);
}

static void quantize_iq4_xs(const float * x, uint8_t * y, const float * importance) {
    uint8_t L[256];
    float scales[8];
    float max_scale = 0, amax_scale = 0;
    const float sigma2 = importance ? iq4_sigma2(256, x) : 0;
    for (int ib = 0; ib < 8; ib++) {
        scales[ib] = iq4_search_block(x + 32 * ib, importance ? importance + 32 * ib : NULL, sigma2);
        const float abs_d = fabsf(scales[ib]);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = scales[ib];
        }
    }
    const float d = -max_scale / 32;
    store_half(y, d);
    const float id = d != 0 ? 1 / d : 0.f;
    uint16_t high = 0;
    memset(y + 4, 0, 4);
    for (int ib = 0; ib < 8; ib++) {
        int l = nearest_int(id * scales[ib]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        const float dl = d * (float)l;
        const float idl = dl != 0 ? 1 / dl : 0.f;
        for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)iq4_best_index(idl * x[32 * ib + j]);
        l += 32;
        if (ib % 2 == 0) y[4 + ib / 2] = (uint8_t)(l & 0xf);
        else y[4 + ib / 2] |= (uint8_t)((l & 0xf) << 4);
        high |= (uint16_t)((l >> 4) << (2 * ib));
    }
    y[2] = (uint8_t)(high & 0xff);
    y[3] = (uint8_t)(high >> 8);
    iq4_pack(L, y + 8, 256);
}

/* The types memra_quantize_blocks and memra_quantize_row write; their block sizes and bytes are the
 * dequantizer's. The dequantizer reads more (i-quants whose grid searches this library does not
 * have), so this list is explicit. */
static int quantizable(int type) {
    switch (type) {
        case MEMRA_TYPE_Q4_0: case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_0: case MEMRA_TYPE_Q5_1: case MEMRA_TYPE_Q8_0:
        case MEMRA_TYPE_IQ4_NL: case MEMRA_TYPE_IQ4_XS: case MEMRA_TYPE_Q2_K: case MEMRA_TYPE_Q3_K: case MEMRA_TYPE_Q4_K:
        case MEMRA_TYPE_Q5_K: case MEMRA_TYPE_Q6_K:
            return 1;
        case MEMRA_TYPE_IQ3_S: case MEMRA_TYPE_IQ3_XXS:
            return memra_quantize_iq3_ready(type); /* its grid's neighbour tables, built once */
        case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ2_XS: case MEMRA_TYPE_IQ2_S: case MEMRA_TYPE_IQ1_S: case MEMRA_TYPE_IQ1_M:
            return memra_quantize_iq2_ready(type); /* quantize-iq2.c's tables, built once */
        default:
            return 0;
    }
}

int memra_quantize_requires_importance(int type) {
    /* ggml_quantize_requires_imatrix */
    return type == MEMRA_TYPE_IQ2_XXS || type == MEMRA_TYPE_IQ2_XS || type == MEMRA_TYPE_IQ1_S;
}

int64_t memra_quantize_block_values(int type) {
    return quantizable(type) ? memra_dequantize_block_size(type) : 0;
}

size_t memra_quantize_block_bytes(int type) {
    return quantizable(type) ? memra_dequantize_block_bytes(type) : 0;
}

/* The lane searches of this CPU: the dot products' choice (MEMRA_CPU_ISA=scalar forces the portable path for both). */
static const lane_searches * chosen_searches(void) {
#if QUANTIZE_X86
    const char * isa = memra_dot_isa();
    if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512vnni") == 0) return &avx2_searches;
#endif
    return &portable_searches;
}

void memra_quantize_blocks(int type, const float * x, uint8_t * y, int64_t blocks) {
    const lane_searches * search = chosen_searches();
    const size_t bytes = memra_quantize_block_bytes(type);
    const int64_t values = memra_quantize_block_values(type);
    for (int64_t b = 0; b < blocks; b++, x += values, y += bytes) {
        switch (type) {
            case MEMRA_TYPE_Q4_0: quantize_q4_0(x, y); break;
            case MEMRA_TYPE_Q4_1: quantize_q4_1(x, y); break;
            case MEMRA_TYPE_Q5_0: quantize_q5_0(x, y); break;
            case MEMRA_TYPE_Q5_1: quantize_q5_1(x, y); break;
            case MEMRA_TYPE_Q8_0: quantize_q8_0(x, y); break;
            case MEMRA_TYPE_IQ4_NL: quantize_iq4_nl(x, y, NULL); break;
            case MEMRA_TYPE_IQ4_XS: quantize_iq4_xs(x, y, NULL); break;
            case MEMRA_TYPE_Q2_K: quantize_q2_K(search, x, y); break;
            case MEMRA_TYPE_Q3_K: quantize_q3_K(x, y); break;
            case MEMRA_TYPE_Q4_K: quantize_q4_K(search, x, y, NULL); break;
            case MEMRA_TYPE_Q5_K: quantize_q5_K(search, x, y, NULL); break;
            case MEMRA_TYPE_Q6_K: quantize_q6_K(search, x, y, NULL); break;
            case MEMRA_TYPE_IQ3_S: memra_quantize_iq3_s(x, y, NULL); break;
            case MEMRA_TYPE_IQ3_XXS: memra_quantize_iq3_xxs(x, y, NULL); break;
            case MEMRA_TYPE_IQ2_S: memra_quantize_iq2_s_row(x, y, values, NULL); break;
            case MEMRA_TYPE_IQ1_M: memra_quantize_iq1_m_row(x, y, values, NULL); break;
            default: return; /* iq2_xxs, iq2_xs, iq1_s: only with importance (memra_quantize_row) */
        }
    }
}

void memra_quantize_row(int type, const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const int64_t values = memra_quantize_block_values(type);
    const int64_t blocks = n_per_row / values;
    if (!importance) {
        memra_quantize_blocks(type, x, y, blocks);
        return;
    }
    const lane_searches * search = chosen_searches();
    /* the types whose weights take statistics over the whole row */
    switch (type) {
        case MEMRA_TYPE_Q4_0: quantize_symmetric_row_weighted(search, x, y, blocks, importance, 8); return;
        case MEMRA_TYPE_Q5_0: quantize_symmetric_row_weighted(search, x, y, blocks, importance, 16); return;
        case MEMRA_TYPE_Q4_1: quantize_affine_row_weighted(search, x, y, blocks, importance, 15); return;
        case MEMRA_TYPE_Q5_1: quantize_affine_row_weighted(search, x, y, blocks, importance, 31); return;
        case MEMRA_TYPE_Q8_0: memra_quantize_blocks(type, x, y, blocks); return; /* quantize_q8_0 ignores the imatrix */
        case MEMRA_TYPE_IQ2_XXS: memra_quantize_iq2_xxs_row(x, y, n_per_row, importance); return;
        case MEMRA_TYPE_IQ2_XS: memra_quantize_iq2_xs_row(x, y, n_per_row, importance); return;
        case MEMRA_TYPE_IQ2_S: memra_quantize_iq2_s_row(x, y, n_per_row, importance); return;
        case MEMRA_TYPE_IQ1_S: memra_quantize_iq1_s_row(x, y, n_per_row, importance); return;
        case MEMRA_TYPE_IQ1_M: memra_quantize_iq1_m_row(x, y, n_per_row, importance); return;
        default: break;
    }
    /* block by block, each with its own part of the row's importance */
    const size_t bytes = memra_quantize_block_bytes(type);
    for (int64_t b = 0; b < blocks; b++, x += values, y += bytes, importance += values) {
        switch (type) {
            case MEMRA_TYPE_Q2_K: quantize_q2_K_weighted(search, x, y, importance); break;
            case MEMRA_TYPE_Q3_K: quantize_q3_K_weighted(search, x, y, importance); break;
            case MEMRA_TYPE_Q4_K: quantize_q4_K(search, x, y, importance); break;
            case MEMRA_TYPE_Q5_K: quantize_q5_K(search, x, y, importance); break;
            case MEMRA_TYPE_Q6_K: quantize_q6_K(search, x, y, importance); break;
            case MEMRA_TYPE_IQ4_NL: quantize_iq4_nl(x, y, importance); break;
            case MEMRA_TYPE_IQ4_XS: quantize_iq4_xs(x, y, importance); break;
            case MEMRA_TYPE_IQ3_S: memra_quantize_iq3_s(x, y, importance); break;
            case MEMRA_TYPE_IQ3_XXS: memra_quantize_iq3_xxs(x, y, importance); break;
            default: return;
        }
    }
}
