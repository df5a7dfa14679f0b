/*
 * iq1_s quantization with an importance matrix and iq1_m with or without one, byte for byte as
 * ggml's quantize_iq1_s / quantize_iq1_m (ggml-quants.c, quantize_row_iq1_*_impl), searching the
 * 2048-entry grid's tables of quantize-iq2.c. The same arithmetic as
 * packages/gguf/src/quant/quantize-iq1.ts, which describes the method.
 *
 * ggml sorts (value, index) pairs with qsort comparing values only; glibc's qsort, a top-down merge
 * sort for arrays this small, keeps equal values in index order, and merge_sort here repeats it step
 * for step (so even NaN comparisons order alike).
 *
 * Same float rules as quantize.c: one binary32 operation at a time in ggml's order, no FMA
 * contraction, no fast math, sequential sums.
 */
#if defined(__FAST_MATH__)
#error "quantize-iq1.c must be compiled without -ffast-math: its results must match ggml's bit for bit"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu-internal.h"

#define QK_K 256
#define GROUP_MAX_EPS_IQ1_M 1e-7f
#define GROUP_MAX_EPS_IQ1_S 1e-12f
#define IQ1_DELTA 0.125f

/* A level's value (0, 1, 2 -> -1, 0, 1) plus and minus the delta. */
static const float x_p[3] = { -1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA };
static const float x_m[3] = { -1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA };

static inline int nearest_int(float value) {
    const float shifted = value + 12582912.f;
    int bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int clamp_int(int value, int low, int high) { return value < low ? low : value > high ? high : value; }

/* iq1_sort_helper */
static inline int compare(float a, float b) { return a < b ? -1 : a > b ? 1 : 0; }

/* order[0, n) sorted by xb[order[i]] as glibc's msort_with_tmp: halves of n/2 and the rest sorted,
 * then merged taking from the first half while it compares <= 0. */
static void merge_sort(const float * xb, int * order, int n, int * scratch) {
    if (n <= 1) return;
    const int n1 = n / 2;
    merge_sort(xb, order, n1, scratch);
    merge_sort(xb, order + n1, n - n1, scratch);
    int a = 0, b = n1, out = 0;
    while (a < n1 && b < n) scratch[out++] = compare(xb[order[a]], xb[order[b]]) <= 0 ? order[a++] : order[b++];
    while (a < n1) scratch[out++] = order[a++];
    memcpy(order, scratch, (size_t)out * sizeof(int));
}

static float sigma_squared(const float * x) {
    float sum = 0;
    for (int i = 0; i < QK_K; i++) sum += x[i] * x[i];
    return 2 * sum / QK_K;
}

/* weight for n values: importance · √(σ² + x²), else (iq1_m) x². */
static void set_weights(int n, const float * xb, const float * qw, float sigma2, float * weight) {
    if (qw) for (int i = 0; i < n; i++) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    else for (int i = 0; i < n; i++) weight[i] = xb[i] * xb[i];
}

static float largest_magnitude(int n, const float * xb) {
    float max = fabsf(xb[0]);
    for (int i = 1; i < n; i++) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
    return max;
}

/* ggml's iq1_find_best_neighbour2: of the list, the entry whose values xx[level] at `scale` are
 * closest to xval under weight; levels to L. When none is closer than FLT_MAX (non-finite or huge
 * input), ggml scans the whole grid reading xval[grid index] where it means xval[value index], past the
 * row's end if need be; read here only within the super-block (below block_end), else the entry
 * does not count, so rows and chunks split alike. Finding none there either ggml aborts:
 * the first neighbour. */
static int best_neighbour2(const memra_iq2_grid_tables * t, const uint16_t * list, const float * xval, const float * block_end, const float * weight,
                           float scale, const float * xx, int8_t * L) {
    float best_score = FLT_MAX;
    int best = -1;
    for (int j = 1; j <= list[0]; j++) {
        const uint8_t * levels = t->levels + 8 * list[j];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float diff = scale * xx[levels[i]] - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_score) {
            best_score = d2;
            best = list[j];
        }
    }
    if (best < 0) {
        const ptrdiff_t readable = block_end - xval;
        for (int g = 0; g < t->grid_size; g++) {
            const uint8_t * levels = t->levels + 8 * g;
            const float value = g < readable ? xval[g] : NAN;
            float d2 = 0;
            for (int j = 0; j < 8; j++) {
                const float diff = scale * xx[levels[j]] - value;
                d2 += weight[j] * diff * diff;
            }
            if (d2 < best_score) {
                best_score = d2;
                best = g;
            }
        }
    }
    if (best < 0) best = list[1];
    for (int i = 0; i < 8; i++) L[i] = (int8_t)t->levels[8 * best + i];
    return best;
}

/* The grid index of 8 levels, or the best neighbour's (*on_grid false). */
static int pattern_index(const memra_iq2_grid_tables * t, int8_t * L, const float * xval, const float * block_end, const float * weight, float scale,
                         const float * xx, bool * on_grid) {
    uint16_t u = 0;
    for (int j = 0; j < 8; j++) u |= (uint16_t)(L[j] << (2 * j));
    const int32_t entry = t->map[u];
    *on_grid = entry >= 0;
    if (entry >= 0) return entry;
    return best_neighbour2(t, t->neighbours + (-entry - 1), xval, block_end, weight, scale, xx, L);
}

/* Levels of the sorted runs: order[0, i1) -> 0, [i1, i2) -> 1, the rest 2. */
static void split_levels(int n, const int * order, int i1, int i2, int8_t * L) {
    for (int j = 0; j < i1; j++) L[order[j]] = 0;
    for (int j = i1; j < i2; j++) L[order[j]] = 1;
    for (int j = i2; j < n; j++) L[order[j]] = 2;
}

void memra_quantize_iq1_s_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    enum { N = 32 };
    const memra_iq2_grid_tables * t = memra_iq2_grid_tables_get(2048);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 50) {
        const float * xbl = x + QK_K * ibl;
        float scales[8], weight[N], sumx[N + 1], sumw[N + 1];
        int8_t L[N], shifts[8];
        int order[N], scratch[N];
        uint16_t index[N / 8];
        memset(y, 0, 50);
        float max_scale = 0;
        const float * block_end = xbl + QK_K;
        const float sigma2 = sigma_squared(xbl);
        for (int ib = 0; ib < 8; ib++) {
            const float * xb = xbl + N * ib;
            set_weights(N, xb, importance + QK_K * ibl + N * ib, sigma2, weight);
            const float max = largest_magnitude(N, xb);
            if (max < GROUP_MAX_EPS_IQ1_S) {
                scales[ib] = 0;
                shifts[ib] = 1;
                continue;
            }
            for (int j = 0; j < N; j++) order[j] = j;
            merge_sort(xb, order, N, scratch);
            sumx[0] = sumw[0] = 0;
            for (int j = 0; j < N; j++) {
                const int i = order[j];
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            float best_score = -FLT_MAX, scale = max;
            int besti1 = -1, besti2 = -1, best_shift = 0;
            for (int i1 = 0; i1 <= N; i1++) {
                for (int i2 = i1; i2 <= N; i2++) {
                    float sumqx = (sumx[i1] - sumx[0]) * x_p[0] + (sumx[i2] - sumx[i1]) * x_p[1] + (sumx[N] - sumx[i2]) * x_p[2];
                    float sumq2 = (sumw[i1] - sumw[0]) * x_p[0] * x_p[0] + (sumw[i2] - sumw[i1]) * x_p[1] * x_p[1] + (sumw[N] - sumw[i2]) * x_p[2] * x_p[2];
                    if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                        scale = sumqx / sumq2;
                        best_score = scale * sumqx;
                        besti1 = i1;
                        besti2 = i2;
                        best_shift = 1;
                    }
                    sumqx = (sumx[i1] - sumx[0]) * x_m[0] + (sumx[i2] - sumx[i1]) * x_m[1] + (sumx[N] - sumx[i2]) * x_m[2];
                    sumq2 = (sumw[i1] - sumw[0]) * x_m[0] * x_m[0] + (sumw[i2] - sumw[i1]) * x_m[1] * x_m[1] + (sumw[N] - sumw[i2]) * x_m[2] * x_m[2];
                    if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                        scale = sumqx / sumq2;
                        best_score = scale * sumqx;
                        besti1 = i1;
                        besti2 = i2;
                        best_shift = -1;
                    }
                }
            }
            if (besti1 < 0 || besti2 < 0 || best_shift == 0) {
                scales[ib] = 0;
                shifts[ib] = 1;
                continue;
            }
            split_levels(N, order, besti1, besti2, L);
            if (scale < 0) {
                for (int j = 0; j < N; j++) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                best_shift = -best_shift;
            }
            bool all_on_grid = true;
            const float * xx = best_shift == 1 ? x_p : x_m;
            for (int k = 0; k < N / 8; k++) {
                bool on_grid;
                index[k] = (uint16_t)pattern_index(t, L + 8 * k, xb + 8 * k, block_end, weight + 8 * k, scale, xx, &on_grid);
                all_on_grid = all_on_grid && on_grid;
            }
            if (!all_on_grid) {
                float sumqx = 0, sumq2 = 0;
                for (int k = 0; k < N / 8; k++) {
                    const uint8_t * levels = t->levels + 8 * index[k];
                    for (int j = 0; j < 8; j++) {
                        const float w = weight[8 * k + j];
                        const float q = xx[levels[j]];
                        sumqx += w * q * xb[8 * k + j];
                        sumq2 += w * q * q;
                    }
                }
                if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
            }
            uint16_t h = 0;
            for (int k = 0; k < N / 8; k++) {
                y[2 + (N / 8) * ib + k] = (uint8_t)(index[k] & 255);
                h |= (uint16_t)((index[k] >> 8) << (3 * k));
            }
            y[34 + 2 * ib] = (uint8_t)(h & 0xff);
            y[35 + 2 * ib] = (uint8_t)(h >> 8);
            scales[ib] = scale;
            shifts[ib] = (int8_t)best_shift;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 15;
        const uint16_t bits = memra_f32_to_f16(d * 1.125f);
        y[0] = (uint8_t)(bits & 0xff);
        y[1] = (uint8_t)(bits >> 8);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            int l = clamp_int(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
            if (shifts[ib] == -1) l |= 8;
            y[35 + 2 * ib] |= (uint8_t)(l << 4);
        }
    }
}

void memra_quantize_iq1_m_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    enum { N = 16 };
    static const uint8_t masks[4] = { 0x00, 0x80, 0x08, 0x88 };
    const memra_iq2_grid_tables * t = memra_iq2_grid_tables_get(2048);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 56) {
        const float * xbl = x + QK_K * ibl;
        float scales[16], weight[N];
        int8_t L[N], shifts[16];
        int order[N], scratch[N];
        uint16_t index[2];
        memset(y, 0, 56);
        float max_scale = 0;
        const float * block_end = xbl + QK_K;
        const float sigma2 = sigma_squared(xbl);
        for (int ib = 0; ib < 16; ib++) {
            const float * xb = xbl + N * ib;
            set_weights(N, xb, importance ? importance + QK_K * ibl + N * ib : NULL, sigma2, weight);
            const float max = largest_magnitude(N, xb);
            if (max < GROUP_MAX_EPS_IQ1_M) {
                scales[ib] = 0;
                shifts[ib] = 0;
                continue;
            }
            for (int j = 0; j < N; j++) order[j] = j;
            merge_sort(xb, order, N, scratch);
            float best_score = -FLT_MAX, scale = max;
            int besti1 = -1, besti2 = -1, best_k = -1;
            /* k: the delta of the first and second 8 values: 0 +,+  1 +,-  2 -,+  3 -,- */
            /* each sorted value's four terms at each level (ggml computes them inside the split loops; same products) */
            float plus_x[N][3], minus_x[N][3], plus_2[N][3], minus_2[N][3];
            int second[N]; /* first half: k 0, 1 take +; second half: k 0, 2 */
            for (int j = 0; j < N; j++) {
                const int i = order[j];
                const float w = weight[i];
                for (int level = 0; level < 3; level++) {
                    plus_x[j][level] = w * x_p[level] * xb[i];
                    minus_x[j][level] = w * x_m[level] * xb[i];
                    plus_2[j][level] = w * x_p[level] * x_p[level];
                    minus_2[j][level] = w * x_m[level] * x_m[level];
                }
                second[j] = i < N / 2 ? 0 : 1;
            }
            for (int i1 = 0; i1 <= N; i1++) {
                for (int i2 = i1; i2 <= N; i2++) {
                    float sumqx[4] = { 0, 0, 0, 0 }, sumq2[4] = { 0, 0, 0, 0 };
                    for (int j = 0; j < N; j++) {
                        const int level = j < i1 ? 0 : j < i2 ? 1 : 2;
                        const float px = plus_x[j][level], mx = minus_x[j][level], p2 = plus_2[j][level], m2 = minus_2[j][level];
                        sumqx[0] += px;
                        sumqx[1 + second[j]] += px;
                        sumqx[2 - second[j]] += mx;
                        sumqx[3] += mx;
                        sumq2[0] += p2;
                        sumq2[1 + second[j]] += p2;
                        sumq2[2 - second[j]] += m2;
                        sumq2[3] += m2;
                    }
                    for (int k = 0; k < 4; k++) {
                        if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            besti1 = i1;
                            besti2 = i2;
                            best_k = k;
                        }
                    }
                }
            }
            if (besti1 < 0 || besti2 < 0 || best_k < 0) {
                scales[ib] = 0;
                shifts[ib] = 0;
                continue;
            }
            split_levels(N, order, besti1, besti2, L);
            if (scale < 0) {
                for (int j = 0; j < N; j++) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                best_k = 3 - best_k;
            }
            bool all_on_grid = true;
            for (int k = 0; k < 2; k++) {
                const float * xx = (k == 0 ? best_k < 2 : best_k % 2 == 0) ? x_p : x_m;
                bool on_grid;
                index[k] = (uint16_t)pattern_index(t, L + 8 * k, xb + 8 * k, block_end, weight + 8 * k, scale, xx, &on_grid);
                all_on_grid = all_on_grid && on_grid;
            }
            if (!all_on_grid) {
                float sumqx = 0, sumq2 = 0;
                for (int k = 0; k < 2; k++) {
                    const float * xx = (k == 0 ? best_k < 2 : best_k % 2 == 0) ? x_p : x_m;
                    const uint8_t * levels = t->levels + 8 * index[k];
                    for (int j = 0; j < 8; j++) {
                        const float w = weight[8 * k + j];
                        const float q = xx[levels[j]];
                        sumqx += w * q * xb[8 * k + j];
                        sumq2 += w * q * q;
                    }
                }
                if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
            }
            y[2 * ib + 0] = (uint8_t)(index[0] & 255);
            y[2 * ib + 1] = (uint8_t)(index[1] & 255);
            y[32 + ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
            scales[ib] = scale;
            shifts[ib] = (int8_t)best_k;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        uint16_t sc[4] = { 0, 0, 0, 0 };
        float d = max_scale / 15;
        const float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < 16; ib++) {
            const int l = clamp_int(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
            sc[ib / 4] |= (uint16_t)(l << (3 * (ib % 4)));
            y[32 + ib] |= masks[shifts[ib]];
            const float * xb = xbl + N * ib;
            set_weights(N, xb, importance ? importance + QK_K * ibl + N * ib : NULL, sigma2, weight);
            for (int k = 0; k < 2; k++) {
                const float * xx = (k == 0 ? shifts[ib] < 2 : shifts[ib] % 2 == 0) ? x_p : x_m;
                const int entry = y[2 * ib + k] + ((y[32 + ib] << (8 - 4 * k)) & 0x700);
                const uint8_t * levels = t->levels + 8 * entry;
                for (int j = 0; j < 8; j++) {
                    const float w = weight[8 * k + j];
                    const float q = xx[levels[j]] * (2 * l + 1);
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if (sumq2 > 0) d = sumqx / sumq2;
        const uint16_t s = memra_f32_to_f16(d * 1.1125f);
        sc[0] |= (uint16_t)((s & 0x000f) << 12);
        sc[1] |= (uint16_t)((s & 0x00f0) << 8);
        sc[2] |= (uint16_t)((s & 0x0f00) << 4);
        sc[3] |= (uint16_t)(s & 0xf000);
        for (int i = 0; i < 4; i++) {
            y[48 + 2 * i] = (uint8_t)(sc[i] & 0xff);
            y[49 + 2 * i] = (uint8_t)(sc[i] >> 8);
        }
    }
}
