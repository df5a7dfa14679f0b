/*
 * Qwen3-MoE routing as llama.cpp: softmax over all experts, the k largest probabilities (ties to
 * the lower id), renormalised to sum to one. Probabilities in double, as the reference backend.
 */
#include <math.h>

#include "cpu-internal.h"

void memra_moe_route(int32_t * ids, float * weights, const float * logits, int64_t rows, int64_t experts, int64_t k) {
    for (int64_t r = 0; r < rows; r++) {
        const float * row = logits + r * experts;
        float max = -INFINITY;
        for (int64_t e = 0; e < experts; e++) max = row[e] > max ? row[e] : max;
        double sum = 0.0;
        for (int64_t e = 0; e < experts; e++) sum += exp((double)row[e] - (double)max);
        int32_t * selected = ids + r * k;
        double selected_sum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < experts; e++) {
                int taken = 0;
                for (int64_t i = 0; i < j; i++) taken |= selected[i] == e;
                if (!taken && (best < 0 || row[e] > row[best])) best = e;
            }
            selected[j] = (int32_t)best;
            selected_sum += exp((double)row[best] - (double)max) / sum;
        }
        for (int64_t j = 0; j < k; j++) {
            weights[r * k + j] = (float)(exp((double)row[selected[j]] - (double)max) / sum / selected_sum);
        }
    }
}
