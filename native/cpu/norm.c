/*
 * RMSNorm as ggml's rms_norm followed by mul: the sum of squares in double (ggml_float), then
 * y = x * scale * w in f32 with scale = 1 / sqrtf(mean + eps).
 */
#include <math.h>

#include "cpu-internal.h"

/* Below this many values a norm runs on the calling thread alone; above, in chunks of about CHUNK_VALUES. */
#define PARALLEL_VALUES 32768
#define CHUNK_VALUES 8192

typedef struct {
    float * out;
    const float * x;
    const float * weight;
    int64_t rows, width, rows_per_chunk;
    float eps;
} norm_job;

MEMRA_VECTORIZED static void norm_rows(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    const norm_job * job = argument;
    int64_t begin, end;
    memra_chunk_range(job->rows, job->rows_per_chunk, chunk, &begin, &end);
    const int64_t width = job->width;
    for (int64_t r = begin; r < end; r++) {
        const float * x = job->x + r * width;
        float * y = job->out + r * width;
        /* ggml sums in one double; eight partial double sums (vectorizable) differ by far less than f32 rounding */
        double partial[8] = { 0 };
        int64_t i = 0;
        for (; i + 8 <= width; i += 8) {
            for (int j = 0; j < 8; j++) partial[j] += (double)(x[i + j] * x[i + j]);
        }
        double sum = 0.0;
        for (; i < width; i++) sum += (double)(x[i] * x[i]);
        for (int j = 0; j < 8; j++) sum += partial[j];
        const float mean = (float)(sum / (double)width);
        const float scale = 1.0f / sqrtf(mean + job->eps);
        for (int64_t i = 0; i < width; i++) y[i] = x[i] * scale * job->weight[i];
    }
}

void memra_rms_norm(memra_cpu * cpu, float * out, const float * x, const float * weight, int64_t rows, int64_t width, float eps) {
    int64_t rows_per_chunk = CHUNK_VALUES / width;
    if (rows_per_chunk < 1) rows_per_chunk = 1;
    norm_job job = { out, x, weight, rows, width, rows_per_chunk, eps };
    memra_run_chunks(cpu->pool, rows * width >= PARALLEL_VALUES, norm_rows, &job, memra_chunk_count(rows, rows_per_chunk));
}
