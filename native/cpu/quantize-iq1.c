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
#include "quantize-common.h"

#define GROUP_MAX_EPS_IQ1_M 1e-7f
#define GROUP_MAX_EPS_IQ1_S 1e-12f
#define IQ1_DELTA 0.125f

/* A level's value (0, 1, 2 -> -1, 0, 1) plus and minus the delta. */
static const float x_p[3] = { -1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA };
static const float x_m[3] = { -1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA };

/* The deltas of a group as one code k, the delta of its first and second 8 values: 0 +,+  1 +,-  2 -,+
 * 3 -,- (iq1_s, one delta for all 32 values: 0 or 3). The values of levels 0..2 of the 8 values at 8 g. */
static inline const float * delta_values(int k, int g) { return (g == 0 ? k < 2 : k % 2 == 0) ? x_p : x_m; }

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
static int best_neighbour2(const memra_iq_grid_tables * t, const uint16_t * list, const float * xval, const float * block_end, const float * weight,
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
static int pattern_index(const memra_iq_grid_tables * t, int8_t * L, const float * xval, const float * block_end, const float * weight, float scale,
                         const float * xx, bool * on_grid) {
    uint16_t u = 0;
    for (int j = 0; j < 8; j++) u |= (uint16_t)(L[j] << (2 * j));
    const int32_t entry = t->map[u];
    *on_grid = entry >= 0;
    if (entry >= 0) return entry;
    return best_neighbour2(t, t->neighbours + (-entry - 1), xval, block_end, weight, scale, xx, L);
}

/* iq1_s's split search over 32 sorted values (order): every split into runs [0, i1), [i1, i2), [i2, 32) of
 * levels 0, 1, 2 with delta + (k 0) and - (k 3), scored from prefix sums. Returns the best scale (max
 * when none) with its split and k (-1 when none). */
static float best_split_one_delta(const float * xb, const float * weight, const int * order, float max, int * besti1, int * besti2, int * best_k) {
    enum { N = 32 };
    float sumx[N + 1], sumw[N + 1];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < N; j++) {
        const int i = order[j];
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
    }
    float best_score = -FLT_MAX, scale = max;
    *besti1 = *besti2 = *best_k = -1;
    for (int i1 = 0; i1 <= N; i1++) {
        for (int i2 = i1; i2 <= N; i2++) {
            for (int k = 0; k <= 3; k += 3) {
                const float * xs = k == 0 ? x_p : x_m;
                const float sumqx = (sumx[i1] - sumx[0]) * xs[0] + (sumx[i2] - sumx[i1]) * xs[1] + (sumx[N] - sumx[i2]) * xs[2];
                const float sumq2 = (sumw[i1] - sumw[0]) * xs[0] * xs[0] + (sumw[i2] - sumw[i1]) * xs[1] * xs[1] + (sumw[N] - sumw[i2]) * xs[2] * xs[2];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    *besti1 = i1;
                    *besti2 = i2;
                    *best_k = k;
                }
            }
        }
    }
    return scale;
}

/* iq1_m's split search over 16 sorted values, as best_split_one_delta with a delta per 8 values (k 0..3). */
static float best_split_two_deltas(const float * xb, const float * weight, const int * order, float max, int * besti1, int * besti2, int * best_k) {
    enum { N = 16 };
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
    float best_score = -FLT_MAX, scale = max;
    *besti1 = *besti2 = *best_k = -1;
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
                    *besti1 = i1;
                    *besti2 = i2;
                    *best_k = k;
                }
            }
        }
    }
    return scale;
}

/* One group of n values at xb (iq1_s: 32, one delta; iq1_m: 16, a delta per 8) with weights (set): the
 * best split of the sorted values into levels 0, 1, 2 and deltas (code *k), the levels' grid entries to
 * index, the scale refitted when one was not an entry. Returns the scale, or -1 (k 0, index 0) for a group that stays zero. */
QUANTIZE_INLINE float quantize_group(const memra_iq_grid_tables * t, int n, float eps, const float * xb, const float * block_end, const float * weight,
                                     uint16_t * index, int * k) {
    int8_t L[32];
    int order[32], scratch[32], i1, i2;
    *k = 0;
    memset(index, 0, (size_t)(n / 8) * sizeof(uint16_t));
    const float max = largest_magnitude(n, xb);
    if (max < eps) return -1;
    for (int j = 0; j < n; j++) order[j] = j;
    merge_sort(xb, order, n, scratch);
    int best_k;
    float scale = n == 32 ? best_split_one_delta(xb, weight, order, max, &i1, &i2, &best_k) : best_split_two_deltas(xb, weight, order, max, &i1, &i2, &best_k);
    if (i1 < 0 || i2 < 0 || best_k < 0) return -1;
    /* levels of the sorted runs: order[0, i1) -> 0, [i1, i2) -> 1, the rest 2 */
    for (int j = 0; j < i1; j++) L[order[j]] = 0;
    for (int j = i1; j < i2; j++) L[order[j]] = 1;
    for (int j = i2; j < n; j++) L[order[j]] = 2;
    if (scale < 0) {
        for (int j = 0; j < n; j++) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_k = 3 - best_k;
    }
    bool all_on_grid = true;
    for (int g = 0; g < n / 8; g++) {
        bool on_grid;
        index[g] = (uint16_t)pattern_index(t, L + 8 * g, xb + 8 * g, block_end, weight + 8 * g, scale, delta_values(best_k, g), &on_grid);
        all_on_grid = all_on_grid && on_grid;
    }
    if (!all_on_grid) {
        float sumqx = 0, sumq2 = 0;
        for (int g = 0; g < n / 8; g++) {
            const float * xx = delta_values(best_k, g);
            const uint8_t * levels = t->levels + 8 * index[g];
            for (int j = 0; j < 8; j++) {
                const float w = weight[8 * g + j];
                const float q = xx[levels[j]];
                sumqx += w * q * xb[8 * g + j];
                sumq2 += w * q * q;
            }
        }
        if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
    }
    *k = best_k;
    return scale;
}

/* Every group of n values of the super-block at xbl (importance: its weights, or NULL) as quantize_group:
 * scales (0 for a group that stays zero), delta codes, and n / 8 grid indices a group to index. Returns
 * the largest scale. */
QUANTIZE_INLINE float quantize_groups(const memra_iq_grid_tables * t, int n, float eps, const float * xbl, const float * importance, float sigma2,
                                      float * scales, int * deltas, uint16_t * index) {
    float weight[32], max_scale = 0;
    for (int ib = 0; ib < QK_K / n; ib++) {
        const float * xb = xbl + n * ib;
        group_weights(n, xb, importance ? importance + n * ib : NULL, sigma2, weight);
        const float scale = quantize_group(t, n, eps, xb, xbl + QK_K, weight, index + n / 8 * ib, &deltas[ib]);
        if (scale < 0) {
            scales[ib] = 0;
            continue;
        }
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    return max_scale;
}

void memra_quantize_iq1_s_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const memra_iq_grid_tables * t = memra_iq2_grid_tables_get(2048);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 50) {
        const float * xbl = x + QK_K * ibl;
        float scales[8];
        int deltas[8];
        uint16_t index[32];
        memset(y, 0, 50);
        const float max_scale = quantize_groups(t, 32, GROUP_MAX_EPS_IQ1_S, xbl, importance + QK_K * ibl, super_block_sigma2(xbl), scales, deltas, index);
        for (int ib = 0; ib < 8; ib++) {
            uint16_t h = 0;
            for (int k = 0; k < 4; k++) {
                y[2 + 4 * ib + k] = (uint8_t)(index[4 * ib + k] & 255);
                h |= (uint16_t)((index[4 * ib + k] >> 8) << (3 * k));
            }
            put_u16(y + 34 + 2 * ib, h);
        }
        if (!max_scale) continue;
        const float d = max_scale / 15;
        put_u16(y, memra_f32_to_f16(d * 1.125f));
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) y[35 + 2 * ib] |= (uint8_t)((scale_code(id, scales[ib], 7) | (deltas[ib] == 3 ? 8 : 0)) << 4);
    }
}

void memra_quantize_iq1_m_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    static const uint8_t masks[4] = { 0x00, 0x80, 0x08, 0x88 };
    const memra_iq_grid_tables * t = memra_iq2_grid_tables_get(2048);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 56) {
        const float * xbl = x + QK_K * ibl;
        const float * qw = importance ? importance + QK_K * ibl : NULL;
        float scales[16], weight[16];
        int deltas[16];
        uint16_t index[32];
        memset(y, 0, 56);
        const float sigma2 = super_block_sigma2(xbl);
        const float max_scale = quantize_groups(t, 16, GROUP_MAX_EPS_IQ1_M, xbl, qw, sigma2, scales, deltas, index);
        for (int ib = 0; ib < 16; ib++) {
            y[2 * ib + 0] = (uint8_t)(index[2 * ib] & 255);
            y[2 * ib + 1] = (uint8_t)(index[2 * ib + 1] & 255);
            y[32 + ib] = (uint8_t)((index[2 * ib] >> 8) | ((index[2 * ib + 1] >> 8) << 4));
        }
        if (!max_scale) continue;
        uint16_t sc[4] = { 0, 0, 0, 0 };
        float d = max_scale / 15;
        const float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < 16; ib++) {
            const int l = scale_code(id, scales[ib], 7);
            sc[ib / 4] |= (uint16_t)(l << (3 * (ib % 4)));
            y[32 + ib] |= masks[deltas[ib]];
            const float * xb = xbl + 16 * ib;
            group_weights(16, xb, qw ? qw + 16 * ib : NULL, sigma2, weight);
            for (int k = 0; k < 2; k++) {
                const float * xx = delta_values(deltas[ib], k);
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
        for (int i = 0; i < 4; i++) put_u16(y + 48 + 2 * i, sc[i]);
    }
}
