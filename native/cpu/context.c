/* The CPU context: its thread pool and the scratch memory ops reuse from call to call. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu-internal.h"

int memra_cpu_processor_count(void) {
    const long count = sysconf(_SC_NPROCESSORS_ONLN);
    return count > 0 ? (int)count : 1;
}

/* Upper bound on workers, to catch a nonsensical request before starting threads. */
#define MAX_THREADS 1024

memra_cpu * memra_cpu_create(int threads) {
    if (threads < 0 || threads > MAX_THREADS) {
        memra_fail(MEMRA_ERROR_INVALID_ARGUMENT, "memra_cpu_create: threads is %d, expected 0 (one per processor) to %d", threads, MAX_THREADS);
        return NULL;
    }
    if (threads == 0) threads = memra_cpu_processor_count();
    memra_cpu * cpu = calloc(1, sizeof *cpu);
    if (!cpu) {
        memra_fail(MEMRA_ERROR_OUT_OF_MEMORY, "memra_cpu_create: out of memory");
        return NULL;
    }
    cpu->threads = threads;
    cpu->pool = memra_pool_create(threads);
    if (!cpu->pool) {
        free(cpu);
        return NULL;
    }
    /* Room for a few rows of the usual widths, so that decode never grows it. */
    if (memra_cpu_reserve_converted(cpu, 1 << 20) != MEMRA_OK || memra_cpu_reserve_scores(cpu, 4096) != MEMRA_OK) {
        memra_cpu_destroy(cpu);
        memra_fail(MEMRA_ERROR_OUT_OF_MEMORY, "memra_cpu_create: out of memory for scratch buffers");
        return NULL;
    }
    return cpu;
}

void memra_cpu_destroy(memra_cpu * cpu) {
    if (!cpu) return;
    memra_pool_destroy(cpu->pool);
    free(cpu->converted);
    free(cpu->scores);
    free(cpu);
}

int memra_cpu_thread_count(const memra_cpu * cpu) {
    return cpu ? cpu->threads : 0;
}

int memra_cpu_set_batch_invariant(memra_cpu * cpu, int on) {
    if (!cpu) return memra_fail(MEMRA_ERROR_INVALID_ARGUMENT, "memra_cpu_set_batch_invariant: cpu is NULL");
    if (on != 0 && on != 1) return memra_fail(MEMRA_ERROR_INVALID_ARGUMENT, "memra_cpu_set_batch_invariant: on is %d, expected 0 or 1", on);
    cpu->batch_invariant = on;
    return MEMRA_OK;
}

static size_t round_up(size_t value, size_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
}

int memra_cpu_reserve_converted(memra_cpu * cpu, size_t bytes) {
    if (bytes <= cpu->converted_bytes) return MEMRA_OK;
    size_t capacity = cpu->converted_bytes ? cpu->converted_bytes : 4096;
    while (capacity < bytes) capacity *= 2;
    void * memory = aligned_alloc(64, round_up(capacity, 64));
    if (!memory) return memra_fail(MEMRA_ERROR_OUT_OF_MEMORY, "out of memory for %zu bytes of converted activations", capacity);
    free(cpu->converted);
    cpu->converted = memory;
    cpu->converted_bytes = capacity;
    return MEMRA_OK;
}

int memra_cpu_reserve_scores(memra_cpu * cpu, size_t count) {
    if (count <= cpu->scores_per_thread) return MEMRA_OK;
    size_t capacity = cpu->scores_per_thread ? cpu->scores_per_thread : 1024;
    while (capacity < count) capacity *= 2;
    capacity = round_up(capacity, 16);
    float * memory = aligned_alloc(64, capacity * sizeof(float) * (size_t)cpu->threads);
    if (!memory) return memra_fail(MEMRA_ERROR_OUT_OF_MEMORY, "out of memory for %zu attention scores per thread", capacity);
    free(cpu->scores);
    cpu->scores = memory;
    cpu->scores_per_thread = capacity;
    return MEMRA_OK;
}
