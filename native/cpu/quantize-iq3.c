/*
 * iq3_s quantization, byte for byte as ggml's quantize_iq3_s without an importance matrix (the
 * quantizer llama-quantize runs for IQ3_S and IQ3_M files; ggml-quants.c, quantize_row_iq3_s_impl
 * and iq3xs_init_impl of the 512-entry grid).
 *
 * Each 32-value sub-block: its magnitudes are searched over 19 candidate scales; every group of 4
 * levels (0..7 each, value 2l+1) that is not a grid point is replaced by the best of its nearest grid
 * points (the grid points at the three smallest squared distances, ties in grid order), the scale with
 * the best weighted fit is kept and refitted once; then the super-block's f16 scale and 4-bit
 * sub-block scales. Weights are x² (no importance matrix).
 *
 * Same float rules as quantize.c: one binary32 operation at a time in ggml's order, no FMA
 * contraction, no fast math, sequential sums.
 */
#if defined(__FAST_MATH__)
#error "quantize-iq3.c must be compiled without -ffast-math: its results must match ggml's bit for bit"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-internal.h"
#include "../common/iq-grids.h"

#define IQ3S_GRID 512
#define IQ3S_MAP 4096 /* 4 levels of 3 bits */
#define IQ3S_NEIGHBOUR_DISTANCES 3

/* map[u] >= 0: the grid index of level pattern u; < 0: -(offset + 1) of u's neighbour list in
 * `neighbours` (a count, then that many grid indices in (distance, index) order). */
static int iq3s_map[IQ3S_MAP];
static uint16_t * iq3s_neighbours;
static pthread_once_t iq3s_once = PTHREAD_ONCE_INIT;

static int grid_level(int entry, int i) { /* the level (0..7) of value i of a grid entry: value = 2l + 1 */
    return (int)(((memra_iq3s_grid[entry] >> (8 * i)) & 0xff) - 1) / 2;
}

/* Squared distances of level pattern u's points to every grid entry, sorted by (distance, index)
 * into `order` (pairs). Insertion into buckets by distance keeps the index order within a distance. */
static int nearest_entries(int u, uint16_t * out) {
    int distance[IQ3S_GRID];
    int smallest[IQ3S_NEIGHBOUR_DISTANCES];
    int found = 0;
    for (int j = 0; j < IQ3S_GRID; j++) {
        int d2 = 0;
        for (int k = 0; k < 4; k++) {
            const int diff = 2 * (grid_level(j, k) - ((u >> (3 * k)) & 7));
            d2 += diff * diff;
        }
        distance[j] = d2;
        /* keep the IQ3S_NEIGHBOUR_DISTANCES smallest distinct distances, ascending */
        int at = 0;
        while (at < found && smallest[at] < d2) at++;
        if (at < found && smallest[at] == d2) continue;
        if (at >= IQ3S_NEIGHBOUR_DISTANCES) continue;
        for (int m = (found < IQ3S_NEIGHBOUR_DISTANCES ? found : IQ3S_NEIGHBOUR_DISTANCES - 1); m > at; m--) smallest[m] = smallest[m - 1];
        smallest[at] = d2;
        if (found < IQ3S_NEIGHBOUR_DISTANCES) found++;
    }
    int n = 0;
    for (int level = 0; level < found; level++) {
        for (int j = 0; j < IQ3S_GRID; j++) {
            if (distance[j] != smallest[level]) continue;
            if (out) out[n] = (uint16_t)j;
            n++;
        }
    }
    return n;
}

static void iq3s_init(void) {
    for (int u = 0; u < IQ3S_MAP; u++) iq3s_map[u] = -1;
    for (int j = 0; j < IQ3S_GRID; j++) {
        int u = 0;
        for (int k = 0; k < 4; k++) u |= grid_level(j, k) << (3 * k);
        iq3s_map[u] = j;
    }
    size_t total = 0;
    for (int u = 0; u < IQ3S_MAP; u++) if (iq3s_map[u] < 0) total += 1 + (size_t)nearest_entries(u, NULL);
    uint16_t * neighbours = (uint16_t *)malloc(total * sizeof(uint16_t));
    if (neighbours == NULL) return;
    size_t offset = 0;
    for (int u = 0; u < IQ3S_MAP; u++) {
        if (iq3s_map[u] >= 0) continue;
        const int n = nearest_entries(u, neighbours + offset + 1);
        neighbours[offset] = (uint16_t)n;
        iq3s_map[u] = -(int)offset - 1;
        offset += 1 + (size_t)n;
    }
    iq3s_neighbours = neighbours;
}

int memra_quantize_iq3_ready(void) {
    pthread_once(&iq3s_once, iq3s_init);
    return iq3s_neighbours != NULL;
}

static inline int nearest_int(float value) {
    const float shifted = value + 12582912.f;
    int bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int clamp_level(int l, int high) { return l < 0 ? 0 : l > high ? high : l; }

/* ggml's iq3_find_best_neighbour: the listed grid entry closest to xval/scale under the weights;
 * writes its levels to L and returns it. */
static int best_neighbour(const uint16_t * list, const float * xval, const float * weight, float scale, int8_t * L) {
    float best_d2 = FLT_MAX;
    int best = list[1];
    for (int j = 1; j <= list[0]; j++) {
        float d2 = 0;
        for (int i = 0; i < 4; i++) {
            const float q = (float)(2 * grid_level(list[j], i) + 1);
            const float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    for (int i = 0; i < 4; i++) L[i] = (int8_t)grid_level(best, i);
    return best;
}

/* The grid entry for 4 values at scale 1/id (on the grid, or the best neighbour); levels to L. */
static int grid_entry(float id, float scale, const float * xval, const float * waux, int8_t * L, bool * on_grid) {
    int u = 0;
    for (int i = 0; i < 4; i++) {
        const int l = clamp_level(nearest_int(0.5f * (id * xval[i] - 1)), 7);
        L[i] = (int8_t)l;
        u |= l << (3 * i);
    }
    int entry = iq3s_map[u];
    *on_grid = entry >= 0;
    if (entry < 0) entry = best_neighbour(iq3s_neighbours + (-entry - 1), xval, waux, scale, L);
    return entry;
}

/* Σ w·x·q and Σ w·q² over a 32-value sub-block with levels L (q = 2l + 1), summed in order. */
static void weighted_fit(const float * weight, const float * xval, const int8_t * L, float * sumqx, float * sumq2) {
    float qx = 0, q2 = 0;
    for (int i = 0; i < 32; i++) {
        const float w = weight[i];
        const float q = (float)(2 * L[i] + 1);
        qx += w * xval[i] * q;
        q2 += w * q * q;
    }
    *sumqx = qx;
    *sumq2 = q2;
}

/* One block of 256 values → 110 bytes (memra_quantize_iq3_ready() must have returned 1). */
void memra_quantize_iq3_s(const float * x, uint8_t * y) {
    enum { BLOCK = 32, GROUPS = BLOCK / 4, SIGN_BYTES = BLOCK / 8 };
    memset(y, 0, 110);
    uint8_t * qs = y + 2;
    uint8_t * qh = y + 66;
    uint8_t * signs = y + 74;
    float scales[8];
    float max_scale = 0;
    for (int ib = 0; ib < 8; ib++) {
        const float * xb = x + BLOCK * ib;
        float weight[BLOCK], waux[BLOCK], xval[BLOCK];
        int8_t L[BLOCK], Laux[BLOCK];
        bool on_grid[GROUPS], on_grid_aux[GROUPS];
        uint8_t block_signs[SIGN_BYTES];
        for (int i = 0; i < BLOCK; i++) weight[i] = xb[i] * xb[i];
        for (int i = 0; i < BLOCK; i++) waux[i] = sqrtf(weight[i]);
        for (int k = 0; k < SIGN_BYTES; k++) {
            uint8_t s = 0;
            for (int i = 0; i < 8; i++) {
                if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
                else {
                    xval[8 * k + i] = -xb[8 * k + i];
                    s |= (uint8_t)(1 << i);
                }
            }
            block_signs[k] = s;
        }
        float max = xval[0];
        for (int i = 1; i < BLOCK; i++) max = max > xval[i] ? max : xval[i];
        memset(L, 0, sizeof L);
        if (!(max != 0)) {
            scales[ib] = 0;
            /* As ggml: an all-zero sub-block writes nothing and does not advance qs and signs, so
             * the next sub-block's indices and signs land in its place (qh is indexed by ib). */
            continue;
        }
        float best = 0;
        float scale = max / 15;
        for (int k = 0; k < GROUPS; k++) on_grid[k] = false;
        for (int is = -9; is <= 9; is++) {
            const float id = (15 + (float)is * 0.2f) / max;
            const float this_scale = 1 / id;
            for (int k = 0; k < GROUPS; k++) grid_entry(id, this_scale, xval + 4 * k, waux + 4 * k, Laux + 4 * k, &on_grid_aux[k]);
            float sumqx, sumq2;
            weighted_fit(weight, xval, Laux, &sumqx, &sumq2);
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                memcpy(L, Laux, sizeof L);
                memcpy(on_grid, on_grid_aux, sizeof on_grid);
            }
        }
        int off_grid = 0;
        for (int k = 0; k < GROUPS; k++) off_grid += !on_grid[k];
        if (off_grid > 0 && scale > 0) {
            const float id = 1 / scale;
            for (int k = 0; k < GROUPS; k++) {
                bool ignored;
                const int entry = grid_entry(id, scale, xval + 4 * k, waux + 4 * k, L + 4 * k, &ignored);
                for (int i = 0; i < 4; i++) L[4 * k + i] = (int8_t)grid_level(entry, i);
            }
            float sumqx, sumq2;
            weighted_fit(weight, xval, L, &sumqx, &sumq2);
            if (sumq2 > 0) scale = sumqx / sumq2;
        }
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < SIGN_BYTES; k++) block_signs[k] = (uint8_t)~block_signs[k];
        }
        for (int k = 0; k < GROUPS; k++) {
            int u = 0;
            for (int i = 0; i < 4; i++) u |= L[4 * k + i] << (3 * i);
            const int entry = iq3s_map[u]; /* on the grid by construction */
            qs[k] = (uint8_t)(entry & 255);
            qh[(ib * GROUPS + k) / 8] |= (uint8_t)((entry >> 8) << ((ib * GROUPS + k) % 8));
        }
        qs += GROUPS;
        memcpy(signs, block_signs, SIGN_BYTES);
        signs += SIGN_BYTES;
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!(max_scale != 0)) return; /* d = +0 (memset) */
    const float d = max_scale / 31;
    const uint16_t bits = memra_f32_to_f16(d * 1.033f);
    y[0] = (uint8_t)(bits & 0xff);
    y[1] = (uint8_t)(bits >> 8);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib += 2) {
        const int l1 = clamp_level(nearest_int(0.5f * (id * scales[ib] - 1)), 15);
        const int l2 = clamp_level(nearest_int(0.5f * (id * scales[ib + 1] - 1)), 15);
        y[106 + ib / 2] = (uint8_t)(l1 | (l2 << 4));
    }
}
