/* Elementwise ops (swiglu, add) and row movement (gather, scatter-add). */
#include <math.h>
#include <string.h>

#include "cpu-internal.h"

/* Below this many values an elementwise op runs on the calling thread alone; above, in chunks of CHUNK_VALUES. */
#define PARALLEL_VALUES 65536
#define CHUNK_VALUES 16384

typedef struct {
    float * out;
    const float * a;
    const float * b;
    int64_t length;
} binary_job;

/* silu(g) * u, with ggml's silu: g / (1 + e^-g) (e^x from memra_exp, vectorized). */
MEMRA_VECTORIZED static void swiglu_range(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    const binary_job * job = argument;
    int64_t begin, end;
    memra_chunk_range(job->length, CHUNK_VALUES, chunk, &begin, &end);
    for (int64_t i = begin; i < end; i++) {
        const float g = job->a[i];
        job->out[i] = g / (1.0f + memra_exp(-g)) * job->b[i];
    }
}

MEMRA_VECTORIZED static void add_range(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    const binary_job * job = argument;
    int64_t begin, end;
    memra_chunk_range(job->length, CHUNK_VALUES, chunk, &begin, &end);
    float * out = job->out;
    const float * a = job->a;
    const float * b = job->b;
    for (int64_t i = begin; i < end; i++) out[i] = a[i] + b[i];
}

static void run_binary(memra_cpu * cpu, memra_task task, binary_job * job) {
    memra_run_chunks(cpu->pool, job->length >= PARALLEL_VALUES, task, job, memra_chunk_count(job->length, CHUNK_VALUES));
}

void memra_swiglu(memra_cpu * cpu, float * out, const float * gate, const float * up, int64_t length) {
    binary_job job = { out, gate, up, length };
    run_binary(cpu, swiglu_range, &job);
}

void memra_add(memra_cpu * cpu, float * out, const float * a, const float * b, int64_t length) {
    binary_job job = { out, a, b, length };
    run_binary(cpu, add_range, &job);
}

void memra_gather_rows(float * out, const float * x, const int32_t * row_ids, int64_t count, int64_t width) {
    for (int64_t i = 0; i < count; i++) memmove(out + i * width, x + (int64_t)row_ids[i] * width, (size_t)width * sizeof(float));
}

void memra_scatter_add_rows(float * out, const float * x, const int32_t * row_ids, const float * scales, int64_t count, int64_t width) {
    for (int64_t i = 0; i < count; i++) {
        float * y = out + (int64_t)row_ids[i] * width;
        const float * v = x + i * width;
        const float scale = scales[i];
        for (int64_t c = 0; c < width; c++) y[c] += scale * v[c];
    }
}
