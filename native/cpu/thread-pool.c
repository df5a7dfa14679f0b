/*
 * A persistent thread pool: `threads - 1` workers started once, the calling thread being worker 0.
 *
 * A run splits its work into chunks that workers claim one at a time from an atomic counter, so
 * the work balances itself, and nobody waits for a worker that has not shown up: the caller works
 * through the chunks too, and once none is left it closes the run and waits only for workers that
 * joined it and are still inside a chunk. A worker that wakes late (descheduled, or asleep) finds
 * the run closed and does nothing. This keeps the pool fast when the machine runs other threads
 * (JavaScript's JIT and GC threads, other processes) and there are fewer idle cores than workers.
 *
 * Workers spin on the run state for a short while (ops of one forward pass follow each other
 * within microseconds), then sleep on a condition variable, so an idle pool costs no CPU. Nothing
 * is allocated and no thread is created per run.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu-internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define memra_cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define memra_cpu_relax() __asm__ __volatile__("yield")
#else
#define memra_cpu_relax() ((void)0)
#endif

/* How long a worker spins for the next run before it sleeps. */
#define SPIN_NANOSECONDS 200000

/* Run state, one 64-bit word: generation << 32 | OPEN | workers inside the run. */
#define STATE_OPEN ((uint64_t)1 << 31)
#define STATE_ACTIVE_MASK (STATE_OPEN - 1)
#define STATE_GENERATION(state) ((uint32_t)((state) >> 32))

typedef struct {
    memra_pool * pool;
    int index;
} worker_start;

struct memra_pool {
    int threads;
    pthread_t * workers;   /* threads - 1 */
    worker_start * starts; /* threads - 1 */
    int started;

    /* The current run: written by the caller before it publishes a new generation. */
    memra_task task;
    void * argument;
    int64_t chunks;
    atomic_llong next_chunk;

    _Atomic uint64_t state;
    atomic_int sleeping;
    atomic_int stop;

    pthread_mutex_t mutex;
    pthread_cond_t wake;
};

static int64_t now_nanoseconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Waits until the state's generation differs from `seen` (or stop); returns the state seen. */
static uint64_t wait_for_run(memra_pool * pool, uint32_t seen) {
    const int64_t deadline = now_nanoseconds() + SPIN_NANOSECONDS;
    for (unsigned spin = 0;; spin++) {
        const uint64_t state = atomic_load_explicit(&pool->state, memory_order_acquire);
        if (STATE_GENERATION(state) != seen || atomic_load_explicit(&pool->stop, memory_order_relaxed)) return state;
        memra_cpu_relax();
        if ((spin & 255) == 255 && now_nanoseconds() > deadline) break;
    }
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add(&pool->sleeping, 1);
    uint64_t state;
    while (STATE_GENERATION(state = atomic_load(&pool->state)) == seen && !atomic_load(&pool->stop)) {
        pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    atomic_fetch_sub(&pool->sleeping, 1);
    pthread_mutex_unlock(&pool->mutex);
    return state;
}

/* Claims and runs chunks until none is left. */
static void work_through(memra_pool * pool, int thread_index) {
    const memra_task task = pool->task;
    void * argument = pool->argument;
    const int64_t chunks = pool->chunks;
    for (;;) {
        const int64_t chunk = atomic_fetch_add_explicit(&pool->next_chunk, 1, memory_order_relaxed);
        if (chunk >= chunks) break;
        task(argument, chunk, thread_index);
    }
}

static void * worker_main(void * start_argument) {
    const worker_start * start = start_argument;
    memra_pool * pool = start->pool;
    uint32_t seen = 0;
    for (;;) {
        uint64_t state = wait_for_run(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        seen = STATE_GENERATION(state);
        /* Join the run if it is still open (one more worker inside), else let it go. */
        while ((state & STATE_OPEN) && STATE_GENERATION(state) == seen) {
            if (atomic_compare_exchange_weak_explicit(&pool->state, &state, state + 1, memory_order_acq_rel, memory_order_acquire)) {
                work_through(pool, start->index);
                atomic_fetch_sub_explicit(&pool->state, 1, memory_order_release);
                break;
            }
        }
    }
    return NULL;
}

memra_pool * memra_pool_create(int threads) {
    memra_pool * pool = calloc(1, sizeof *pool);
    if (!pool) {
        memra_fail(MEMRA_ERROR_OUT_OF_MEMORY, "memra_cpu_create: out of memory for the thread pool");
        return NULL;
    }
    pool->threads = threads;
    atomic_init(&pool->next_chunk, 0);
    atomic_init(&pool->state, 0);
    atomic_init(&pool->sleeping, 0);
    atomic_init(&pool->stop, 0);
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    if (threads > 1) {
        pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
        pool->starts = calloc((size_t)threads - 1, sizeof *pool->starts);
        if (!pool->workers || !pool->starts) {
            memra_pool_destroy(pool);
            memra_fail(MEMRA_ERROR_OUT_OF_MEMORY, "memra_cpu_create: out of memory for %d threads", threads);
            return NULL;
        }
        for (int i = 0; i < threads - 1; i++) {
            pool->starts[i] = (worker_start){ pool, i + 1 };
            const int error = pthread_create(&pool->workers[i], NULL, worker_main, &pool->starts[i]);
            if (error != 0) {
                memra_pool_destroy(pool);
                memra_fail(MEMRA_ERROR_THREAD, "memra_cpu_create: could not start worker thread %d of %d: %s", i + 1, threads - 1, strerror(error));
                return NULL;
            }
            pool->started++;
        }
    }
    return pool;
}

void memra_pool_destroy(memra_pool * pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 0; i < pool->started; i++) pthread_join(pool->workers[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->workers);
    free(pool->starts);
    free(pool);
}

int memra_pool_threads(const memra_pool * pool) {
    return pool->threads;
}

void memra_pool_run(memra_pool * pool, memra_task task, void * argument, int64_t chunks) {
    if (chunks <= 0) return;
    if (pool->threads == 1 || chunks == 1) {
        for (int64_t chunk = 0; chunk < chunks; chunk++) task(argument, chunk, 0);
        return;
    }
    pool->task = task;
    pool->argument = argument;
    pool->chunks = chunks;
    atomic_store_explicit(&pool->next_chunk, 0, memory_order_relaxed);
    /* No worker is inside a run here (the previous run waited for them), so the state is just a generation. */
    const uint32_t generation = STATE_GENERATION(atomic_load_explicit(&pool->state, memory_order_relaxed)) + 1;
    atomic_store(&pool->state, ((uint64_t)generation << 32) | STATE_OPEN); /* seq_cst: publishes the run, pairs with `sleeping` */
    if (atomic_load(&pool->sleeping) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mutex);
    }
    work_through(pool, 0);
    /* Every chunk is claimed: close the run, then wait for the workers still inside it. */
    atomic_fetch_and_explicit(&pool->state, ~(uint64_t)STATE_OPEN, memory_order_acq_rel);
    while (atomic_load_explicit(&pool->state, memory_order_acquire) & STATE_ACTIVE_MASK) memra_cpu_relax();
}
