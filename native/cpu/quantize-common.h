/*
 * What the quantizers share (quantize.c, quantize-iq1.c, quantize-iq2.c, quantize-iq3.c): ggml's
 * nearest_int, a group's weights given an importance matrix, and the pieces of the i-quants' grid
 * searches; packages/gguf/src/quant/quantize-iq-common.ts is the same in TypeScript.
 *
 * Everything is inlined where it is called (on hot paths, with that call's constants), so the
 * including file's float rules apply: include this after its fp-contract pragma, as those files do.
 */
#ifndef MEMRA_QUANTIZE_COMMON_H
#define MEMRA_QUANTIZE_COMMON_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu-internal.h"

#define QK_K 256
/* ggml's GROUP_MAX_EPS: a group whose largest magnitude is below this is treated as all zero. */
#define GROUP_MAX_EPS 1e-15f
#define QUANTIZE_INLINE static inline __attribute__((always_inline))

/* ggml's nearest_int: round half to even for |value| < 2^22 (and ggml's wrapped result beyond). */
QUANTIZE_INLINE int nearest_int(float value) {
    const float shifted = value + 12582912.f;
    int bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

QUANTIZE_INLINE int clamp_int(int value, int low, int high) {
    return value < low ? low : value > high ? high : value;
}

QUANTIZE_INLINE void put_u16(uint8_t * p, uint16_t value) {
    p[0] = (uint8_t)(value & 0xff);
    p[1] = (uint8_t)(value >> 8);
}

QUANTIZE_INLINE void put_u32(uint8_t * p, uint32_t value) {
    for (int b = 0; b < 4; b++) p[b] = (uint8_t)(value >> (8 * b));
}

/* Σ x² over n values, in order. */
QUANTIZE_INLINE float sum_of_squares(int64_t n, const float * x) {
    float sum = 0;
    for (int64_t i = 0; i < n; i++) sum = sum + x[i] * x[i];
    return sum;
}

/* sigma2 of most weighted super-block quantizers: twice the mean of x² over the super-block's 256 values. */
QUANTIZE_INLINE float super_block_sigma2(const float * x) {
    return 2 * sum_of_squares(QK_K, x) / QK_K;
}

/* weights[0..count) = importance * sqrt(sigma2 + x^2); returns their sum, in order (ggml's sw[j]). */
QUANTIZE_INLINE float importance_weights(int count, const float * x, const float * importance, float sigma2, float * weights) {
    float sum = 0;
    for (int l = 0; l < count; l++) {
        weights[l] = importance[l] * sqrtf(sigma2 + x[l] * x[l]);
        sum = sum + weights[l];
    }
    return sum;
}

/* weights[0..n) = importance * sqrt(sigma2 + x^2), or x^2 without an importance matrix. */
QUANTIZE_INLINE void group_weights(int n, const float * x, const float * importance, float sigma2, float * weights) {
    if (importance) importance_weights(n, x, importance, sigma2, weights);
    else for (int i = 0; i < n; i++) weights[i] = x[i] * x[i];
}

/* waux[0..n) = sqrt(weight), ggml's waux. */
QUANTIZE_INLINE void square_roots(int n, const float * weight, float * waux) {
    for (int i = 0; i < n; i++) waux[i] = sqrtf(weight[i]);
}

/* The largest of n values (ggml's MAX chain: a NaN wins where it is compared second). */
QUANTIZE_INLINE float largest(int n, const float * values) {
    float max = values[0];
    for (int i = 1; i < n; i++) max = max > values[i] ? max : values[i];
    return max;
}

/* The 3-bit (high 7) or 4-bit (high 15) code of a group scale under the super-block scale 1/id. */
QUANTIZE_INLINE int scale_code(float id, float scale, int high) {
    return clamp_int(nearest_int(0.5f * (id * scale - 1)), 0, high);
}

/* ---- the i-quants' groups of 8 values: magnitudes and signs ---- */

/* The magnitudes of xb[0..n) to xval; per 8 values their sign bits to signs (iq2_s, iq3_s). */
QUANTIZE_INLINE void magnitudes_and_signs(int n, const float * xb, float * xval, uint8_t * signs) {
    for (int k = 0; k < n / 8; k++) {
        uint8_t s = 0;
        for (int i = 0; i < 8; i++) {
            if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
            else {
                xval[8 * k + i] = -xb[8 * k + i];
                s |= (uint8_t)(1 << i);
            }
        }
        signs[k] = s;
    }
}

/* The same with an even count of negatives in each 8 (iq2_xxs, iq2_xs, iq3_xxs keep 7 sign bits): when
 * odd, the value of least weight * x^2 keeps the wrong sign. */
QUANTIZE_INLINE void even_magnitudes_and_signs(int n, const float * xb, const float * weight, float * xval, uint8_t * signs) {
    magnitudes_and_signs(n, xb, xval, signs);
    for (int k = 0; k < n / 8; k++) {
        if (__builtin_parity(signs[k])) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; i++) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            signs[k] ^= (uint8_t)(1 << imin);
        }
        signs[k] &= 127;
    }
}

/* A scale made non-negative: when negative, the signs of the groups' values flip (`mask`: the sign bits kept). */
QUANTIZE_INLINE float positive_scale(float scale, int groups, uint8_t mask, uint8_t * signs) {
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < groups; k++) signs[k] = (uint8_t)(~signs[k] & mask);
    }
    return scale;
}

/* ---- the grid searches of iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s ----
 *
 * `group` is the values of a grid entry: 8 of levels 0..2 (the iq2 grids, 2 bits a level in a
 * pattern) or 4 of levels 0..7 (the iq3 grids, 3 bits); level l stands for the value 2l + 1. */

/* Σ w·x·q and Σ w·q² over n values with levels L (q = 2l + 1), in order. */
QUANTIZE_INLINE void weighted_fit(int n, const float * weight, const float * xval, const int8_t * L, float * sumqx, float * sumq2) {
    float qx = 0, q2 = 0;
    for (int i = 0; i < n; i++) {
        const float w = weight[i];
        const float q = (float)(2 * L[i] + 1);
        qx += w * xval[i] * q;
        q2 += w * q * q;
    }
    *sumqx = qx;
    *sumq2 = q2;
}

/* ggml's iq2_find_best_neighbour / iq3_find_best_neighbour: of the list, the entry closest to xval at
 * `scale` under waux; its levels to L. ggml asserts one is closer than FLT_MAX (false only for
 * non-finite input): then the first. */
QUANTIZE_INLINE void best_neighbour(const memra_iq_grid_tables * t, int group, const uint16_t * list, const float * xval, const float * waux, float scale,
                                    int8_t * L) {
    float best_d2 = FLT_MAX;
    int best = -1;
    for (int j = 1; j <= list[0]; j++) {
        const uint8_t * levels = t->levels + group * list[j];
        float d2 = 0;
        for (int i = 0; i < group; i++) {
            const float q = (float)(2 * levels[i] + 1);
            const float diff = scale * q - xval[i];
            d2 += waux[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    if (best < 0) best = list[1];
    for (int i = 0; i < group; i++) L[i] = (int8_t)t->levels[group * best + i];
}

/* The nearest levels of `group` values at inverse scale id to L, moved to the best neighbour (at
 * `scale`) when not a grid entry; returns whether they were one. */
QUANTIZE_INLINE bool grid_levels(const memra_iq_grid_tables * t, int group, float id, float scale, const float * xval, const float * waux, int8_t * L) {
    const int bits = group == 8 ? 2 : 3, high = group == 8 ? 2 : 7;
    int u = 0;
    for (int i = 0; i < group; i++) {
        const int l = clamp_int(nearest_int(0.5f * (id * xval[i] - 1)), 0, high);
        L[i] = (int8_t)l;
        u |= l << (bits * i);
    }
    const int32_t entry = t->map[u];
    if (entry >= 0) return true;
    best_neighbour(t, group, t->neighbours + (-entry - 1), xval, waux, scale, L);
    return false;
}

/* The grid index of `group` levels (an entry by construction; ggml aborts otherwise, non-finite input only: then 0). */
QUANTIZE_INLINE int grid_index(const memra_iq_grid_tables * t, int group, const int8_t * L) {
    const int bits = group == 8 ? 2 : 3;
    uint16_t u = 0;
    for (int i = 0; i < group; i++) u |= (uint16_t)((unsigned)(int)L[i] << (bits * i));
    const int32_t entry = t->map[u];
    return entry >= 0 ? entry : 0;
}

/* The constants of a quantizer's scale search (search_grid_scale). */
typedef struct {
    int group;
    int candidates; /* the inverse scales tried: (base + step * is) / max for |is| <= candidates */
    float base, step;
    bool refit_all; /* the refit moves every group to its grid entry (iq3_s), not only those off the grid */
} grid_scale_search;

/* The scale search of iq2_xs, iq2_s, iq3_xxs and iq3_s on n values (weight, waux, xval set; max, their
 * largest, > 0): each candidate's grid levels and weighted fit, the best fit's levels to L (zero when
 * none fits); then, if some group was off the grid, one refit with the groups moved to their entries at
 * the best scale. Returns the scale, negative when the best fit is. */
QUANTIZE_INLINE float search_grid_scale(const memra_iq_grid_tables * t, const grid_scale_search * search, int n, float max, const float * weight,
                                        const float * waux, const float * xval, int8_t * L) {
    const int group = search->group, groups = n / group;
    int8_t Laux[32];
    bool on_grid[8], on_grid_aux[8];
    float best = 0, sumqx, sumq2;
    float scale = max / search->base;
    memset(L, 0, (size_t)n);
    for (int k = 0; k < groups; k++) on_grid[k] = !search->refit_all;
    for (int is = -search->candidates; is <= search->candidates; is++) {
        const float id = (search->base + (float)is * search->step) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < groups; k++) on_grid_aux[k] = grid_levels(t, group, id, this_scale, xval + group * k, waux + group * k, Laux + group * k);
        weighted_fit(n, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)n);
            memcpy(on_grid, on_grid_aux, (size_t)groups * sizeof(bool));
        }
    }
    bool off_grid = false;
    for (int k = 0; k < groups; k++) off_grid = off_grid || !on_grid[k];
    if (off_grid && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < groups; k++) {
            if (search->refit_all || !on_grid[k]) grid_levels(t, group, id, scale, xval + group * k, waux + group * k, L + group * k);
        }
        weighted_fit(n, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

#endif
