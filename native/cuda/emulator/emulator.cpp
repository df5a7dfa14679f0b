/*
 * emulator.cpp — the CPU implementation behind memra-cuda-emulator.h and include/cuda_runtime.h:
 * fibers for the threads of a block, the collectives that switch between them, launches with the
 * GPU's launch limits, and the runtime API the library calls.
 *
 * Launches are serialised by one mutex (a launch runs start to end on the calling thread), which
 * is what lets __shared__ be plain statics and the coordinates plain globals.
 *
 * Stream capture records kernel launches, cudaMemcpyAsync and cudaMemsetAsync issued on a
 * capturing stream as graph nodes instead of running them; cudaGraphLaunch runs them in order
 * (see "stream capture and graphs" below for the rules it follows). The capture state of streams
 * and events is guarded by capture_mutex, never held while anything runs (lock order: capture,
 * then memory; a launch's own mutex is taken only by running kernels).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "include/cuda_runtime.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define MEMRA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMRA_EMU_ASAN 1
#endif
#endif
#ifdef MEMRA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* ------------------------------------------------------ streams, events, graphs ---- */

/* An operation recorded by a capturing stream: a kernel launch (its configuration, checked when
 * recorded, and its own heap copy of the launcher's packed arguments), a copy (its source is read
 * when the node runs) or a memset. */
struct memra_emu_graph_node {
    enum node_kind { KERNEL, MEMCPY, MEMSET };
    const node_kind kind;
    dim3 grid, block;
    size_t shared_bytes = 0;
    memra_emu::launch_body body{};
    const char * name = nullptr;
    void * target = nullptr;
    const void * source = nullptr;
    size_t bytes = 0;
    cudaMemcpyKind copy_kind = cudaMemcpyDefault;
    int value = 0;

    explicit memra_emu_graph_node(node_kind kind_) : kind(kind_) {}
    memra_emu_graph_node(const memra_emu_graph_node &) = delete;
    memra_emu_graph_node & operator=(const memra_emu_graph_node &) = delete;
    ~memra_emu_graph_node() {
        if (kind == KERNEL && body.context) body.destroy(body.context);
    }
};
typedef std::vector<std::unique_ptr<memra_emu_graph_node>> memra_emu_node_list;

/* A graph and its instantiations share the (immutable) node list: a graph may be destroyed while
 * an exec made from it is still launched. */
struct memra_emu_graph {
    std::shared_ptr<const memra_emu_node_list> nodes;
};
struct memra_emu_graph_exec {
    std::shared_ptr<const memra_emu_node_list> nodes;
};

struct memra_emu_stream {
    unsigned flags = 0;
    /* The capture (capture_mutex): its status, how it began, what it has recorded, and the error
     * that invalidated it. */
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeRelaxed;
    std::thread::id capture_thread;
    memra_emu_node_list recorded;
    char invalidated_by[1024] = ""; /* as large as last_message */
};
struct memra_emu_event {
    unsigned flags = 0;
    bool captured = false; /* last recorded in a capturing stream (capture_mutex) */
    bool recorded = false;
    /* when it was recorded: streams run their work at once, so the host's clock then is when the
     * work before it finished (cudaEventElapsedTime) */
    std::chrono::steady_clock::time_point time;
};

static std::mutex capture_mutex;

namespace memra_emu {

/* Plain globals, as __shared__ variables are plain statics: launches hold launch_mutex, and a
 * thread_local read in a dlopen'ed library is a call (__tls_get_addr) at every threadIdx. */
thread_state * current;
uint3 block_idx;
dim3 block_dim, grid_dim;
unsigned char * dynamic_shared_memory;

/* ---------------------------------------------------------------- context switching ---- */

#if defined(__x86_64__)
/* Saves the callee-saved registers, MXCSR and the x87 control word on the current stack, stores
 * the stack pointer in *save and continues on the stack `load` (saved the same way). */
extern "C" void memra_emu_switch(void ** save, void * load);
asm(R"(
    .text
    .globl memra_emu_switch
    .hidden memra_emu_switch
    .type memra_emu_switch, @function
memra_emu_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size memra_emu_switch, .-memra_emu_switch
)");
#endif

static const size_t STACK_BYTES =
#ifdef MEMRA_EMU_ASAN
    512 * 1024;
#else
    128 * 1024;
#endif
static const size_t GUARD_BYTES = 4096;

/* A thread's cp.async not yet written to shared memory: its source bytes (read when issued, zeros
 * past source_bytes) and its group (cp_async). */
struct pending_copy {
    unsigned char * destination;
    unsigned char bytes[16];
    int count;
    int64_t group;
};

struct fiber {
#if defined(__x86_64__)
    void * sp;
#else
    ucontext_t context;
#endif
    thread_state state;
    unsigned char * stack; /* lowest usable byte (a guard page below) */
    int done;
    std::vector<pending_copy> copies; /* in issue order */
    int64_t open_group;               /* the group cp_async adds to: the number of commits so far */
};

struct mma_operands {
    void * c; /* float[4] (f16 inputs) or int32_t[4] (s8 inputs) */
    const uint32_t * a;
    const uint32_t * b;
};

/* A warp collective is completed by the last of its lanes to arrive, for all of them, before any
 * of them runs again: so what the lanes post (values, where their results go, fragments) needs no
 * record of which collective each lane is at, and lanes with different histories (half-warp
 * collectives, then the whole warp) still meet correctly. */
struct warp_state {
    unsigned live;           /* lanes that exist and have not exited */
    unsigned waiting;        /* lanes waiting in a warp collective, cleared as each completes */
    unsigned arrived;        /* lanes that have arrived at the collective now forming */
    unsigned masks[32];      /* the lanes each waiting lane waits for */
    uint64_t posted[32];     /* each lane's value in an exchange */
    uint64_t * received[32]; /* where each lane of an exchange wants all the values (on its stack, which stays put while it waits) */
    int wanted[32];          /* the lane each lane of a shuffle reads */
    uint64_t delivered[32];  /* that lane's value, until the lane's next collective */
    mma_operands mma[32];
};

struct block_state {
    std::vector<fiber> fibers;
    std::vector<warp_state> warps;
    int count = 0, live = 0;
    int barrier_arrived = 0;
    unsigned barrier_generation = 0;
    uint64_t progress = 0, round_progress = 0;
    std::vector<int> order, position; /* the schedule: order[i] runs i-th; position[order[i]] = i */
    bool deadlocked = false;
#if defined(__x86_64__)
    void * scheduler_sp = nullptr;
#else
    ucontext_t scheduler;
#endif
    launch_body body{};
    fiber * running = nullptr;
#ifdef MEMRA_EMU_ASAN
    /* The scheduler's (the launching thread's) stack, learnt when it first switches to a fiber:
     * fibers also start and resume one another, and only a switch from the scheduler reports it. */
    const void * scheduler_stack_bottom = nullptr;
    size_t scheduler_stack_size = 0;
    bool leaving_scheduler = false;
#endif
};

static std::mutex launch_mutex;
static block_state block;
static std::vector<unsigned char *> stacks; /* one per thread slot, reused by every launch */
static bool launch_failed;
static char launch_message[1024];

void fail(const char * format, ...) {
    if (launch_failed) return; /* the first failure is the one reported */
    launch_failed = true;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(launch_message, sizeof launch_message, format, arguments);
    va_end(arguments);
}

static bool ensure_stacks(size_t count) {
    while (stacks.size() < count) {
        void * memory = mmap(nullptr, STACK_BYTES + GUARD_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (memory == MAP_FAILED) return false;
        mprotect(memory, GUARD_BYTES, PROT_NONE); /* a stack overflow faults instead of corrupting */
        stacks.push_back((unsigned char *)memory + GUARD_BYTES);
    }
    return true;
}

static void fiber_main();

#ifdef MEMRA_EMU_ASAN
/* Per stack (stacks[i]): the lowest byte whose ASan shadow a finished fiber may have left poisoned,
 * or the stack's end when none. */
static std::vector<unsigned char *> stack_poisoned_from;
/* Below a finished fiber's last frame (switch_between's locals), what may still be poisoned. */
static const size_t FINAL_FRAMES_BYTES = 4096;
#endif

/* A stack is reused by every launch, and the frames a fiber leaves when it finishes (fiber_main's
 * and switch_between's, which never return) keep their redzones in ASan's shadow: cleared before
 * the next fiber on that stack, from just below where those frames were (not the whole stack: a
 * block of 128 threads would clear 8 MB of shadow per block). */
static inline void clear_stack_shadow(fiber & f, size_t index) {
#ifdef MEMRA_EMU_ASAN
    if (stack_poisoned_from.size() <= index) stack_poisoned_from.resize(index + 1, nullptr);
    unsigned char * from = stack_poisoned_from[index];
    if (from && from < f.stack + STACK_BYTES) {
        if (from < f.stack) from = f.stack;
        ASAN_UNPOISON_MEMORY_REGION(from, (size_t)(f.stack + STACK_BYTES - from));
    }
    stack_poisoned_from[index] = f.stack + STACK_BYTES;
#else
    (void)f;
    (void)index;
#endif
}

#if defined(__x86_64__)
static void start_fiber(fiber & f, size_t index) {
    clear_stack_shadow(f, index);
    /* The frame memra_emu_switch pops: MXCSR/x87 word, r15 r14 r13 r12 rbx rbp, return address
     * (fiber_main, entered with the stack aligned as after a call), then a null return address. */
    uintptr_t top = ((uintptr_t)(f.stack + STACK_BYTES)) & ~(uintptr_t)15;
    uint64_t * frame = (uint64_t *)(top - 72);
    uint32_t control[2];
    asm volatile("stmxcsr %0" : "=m"(control[0]));
    asm volatile("fnstcw %0" : "=m"(control[1]));
    memcpy(&frame[0], control, 8);
    for (int i = 1; i <= 6; i++) frame[i] = 0;
    frame[7] = (uint64_t)(uintptr_t)&fiber_main;
    frame[8] = 0;
    f.sp = frame;
}
static inline void raw_switch(void ** save, void * load) { memra_emu_switch(save, load); }
#else
static void start_fiber(fiber & f, size_t index) {
    clear_stack_shadow(f, index);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = STACK_BYTES;
    f.context.uc_link = nullptr;
    makecontext(&f.context, (void (*)())fiber_main, 0);
}
#endif

/* Continues in fiber `to` (NULL: the scheduler); `from` is the fiber leaving (NULL: the scheduler),
 * `finished` when it will never be resumed. Returns when something switches back to `from`. */
static void switch_between(fiber * from, fiber * to, bool finished) {
    block.running = to;
    current = to ? &to->state : nullptr;
#ifdef MEMRA_EMU_ASAN
    void * fake = nullptr;
    block.leaving_scheduler = from == nullptr;
    if (finished && from) {
        /* this frame and fiber_main's stay on the stack, as they were, until clear_stack_shadow */
        unsigned char * low = (unsigned char *)__builtin_frame_address(0) - FINAL_FRAMES_BYTES;
        const size_t index = (size_t)(from - block.fibers.data());
        if (index < stack_poisoned_from.size() && low < stack_poisoned_from[index]) stack_poisoned_from[index] = low;
    }
    if (to) __sanitizer_start_switch_fiber(finished ? nullptr : &fake, to->stack, STACK_BYTES);
    else __sanitizer_start_switch_fiber(finished ? nullptr : &fake, block.scheduler_stack_bottom, block.scheduler_stack_size);
#endif
#if defined(__x86_64__)
    raw_switch(from ? &from->sp : &block.scheduler_sp, to ? to->sp : block.scheduler_sp);
#else
    swapcontext(from ? &from->context : &block.scheduler, to ? &to->context : &block.scheduler);
#endif
#ifdef MEMRA_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr); /* back from a fiber's stack (a resumed fiber never comes from the scheduler) */
#endif
    (void)finished;
}

/* The next fiber to run after index `from` in round-robin order, or NULL when none is left or a
 * whole round has passed without any thread arriving anywhere (a deadlock: block.deadlocked). */
/* MEMRA_CUDA_EMULATOR_SCHEDULE: the order in which a block's threads run between collectives, and
 * a launch's blocks one after another. "forward" (default) runs thread 0 and block 0 first;
 * "reverse" and "random" (a shuffle per block and launch) make a kernel that reads shared or global
 * memory another thread writes without a barrier between them see a different interleaving, so
 * that such a race changes its results, and one that counts on blocks finishing in index order
 * see them finish in another. */
enum schedule_kind { SCHEDULE_FORWARD, SCHEDULE_REVERSE, SCHEDULE_RANDOM };
static schedule_kind schedule_from_environment() {
    const char * named = getenv("MEMRA_CUDA_EMULATOR_SCHEDULE");
    if (named && strcmp(named, "reverse") == 0) return SCHEDULE_REVERSE;
    if (named && strcmp(named, "random") == 0) return SCHEDULE_RANDOM;
    return SCHEDULE_FORWARD;
}
static uint64_t launches_started;

static void arrange_schedule(int threads, uint64_t block_number) {
    static const schedule_kind kind = schedule_from_environment();
    block.order.resize(threads);
    block.position.resize(threads);
    for (int i = 0; i < threads; i++) block.order[i] = kind == SCHEDULE_REVERSE ? threads - 1 - i : i;
    if (kind == SCHEDULE_RANDOM) {
        uint64_t state = (block_number + 1) * 0x9e3779b97f4a7c15ull ^ (launches_started * 0xbf58476d1ce4e5b9ull);
        for (int i = threads - 1; i > 0; i--) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            const int j = (int)(state % (uint64_t)(i + 1));
            const int t = block.order[i];
            block.order[i] = block.order[j];
            block.order[j] = t;
        }
    }
    for (int i = 0; i < threads; i++) block.position[block.order[i]] = i;
}

/* The order a launch's blocks run in under the schedule: empty for forward (index order). */
static std::vector<uint64_t> arrange_blocks(uint64_t count) {
    static const schedule_kind kind = schedule_from_environment();
    std::vector<uint64_t> order;
    if (kind == SCHEDULE_FORWARD || count < 2) return order;
    order.resize(count);
    for (uint64_t i = 0; i < count; i++) order[i] = kind == SCHEDULE_REVERSE ? count - 1 - i : i;
    if (kind == SCHEDULE_RANDOM) {
        uint64_t state = (launches_started + 1) * 0x94d049bb133111ebull;
        for (uint64_t i = count - 1; i > 0; i--) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            const uint64_t j = state % (i + 1);
            const uint64_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    return order;
}

static fiber * next_fiber(int from) {
    /* Round-robin in the block's schedule order (order[], position[]: forward, reverse or shuffled). */
    for (int i = block.position[from] + 1; i < block.count; i++)
        if (!block.fibers[block.order[i]].done) return &block.fibers[block.order[i]];
    if (block.live == 0) return nullptr;
    if (block.progress == block.round_progress) { /* a full round in which nobody moved */
        block.deadlocked = true;
        return nullptr;
    }
    block.round_progress = block.progress;
    for (int i = 0; i <= block.position[from] && i < block.count; i++)
        if (!block.fibers[block.order[i]].done) return &block.fibers[block.order[i]];
    return nullptr;
}

/* This fiber waits: the next one runs; this one continues when the round comes back to it. */
static void yield() {
    fiber * self = block.running;
    fiber * next = next_fiber((int)(self - block.fibers.data()));
    if (next == self) return;
    switch_between(self, next, false);
}

static void fiber_main() {
#ifdef MEMRA_EMU_ASAN
    if (block.leaving_scheduler) __sanitizer_finish_switch_fiber(nullptr, &block.scheduler_stack_bottom, &block.scheduler_stack_size);
    else __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    block.body.run(block.body.context);
    fiber & f = *block.running;
    f.done = 1;
    block.live--;
    block.progress++;
    warp_state & w = block.warps[f.state.warp];
    const unsigned bit = 1u << f.state.lane;
    w.live &= ~bit;
    /* Lanes already waiting for this one in a warp collective wait forever (a GPU hangs); the block
     * ends as a deadlock, reported as this. */
    for (int lane = 0; lane < 32; lane++)
        if ((w.waiting >> lane & 1u) && (w.masks[lane] & bit))
            fail("lane %d of warp %d (block %u,%u,%u) exited while lane %d waits for it in a warp collective with the mask 0x%08x: on a GPU this hangs",
                 f.state.lane, f.state.warp, block_idx.x, block_idx.y, block_idx.z, lane, w.masks[lane]);
    /* An exited thread no longer counts at the block barrier (as on sm_70 and newer). */
    if (block.barrier_arrived > 0 && block.barrier_arrived == block.live) {
        block.barrier_arrived = 0;
        block.barrier_generation++;
    }
    switch_between(&f, next_fiber((int)(&f - block.fibers.data())), true);
    abort(); /* a finished fiber is never resumed */
}

void sync_block() {
    const unsigned generation = block.barrier_generation;
    block.progress++;
    if (++block.barrier_arrived == block.live) {
        block.barrier_arrived = 0;
        block.barrier_generation++;
        return;
    }
    while (block.barrier_generation == generation) yield();
}

/* The lanes of `mask` meet. The last to arrive returns true, with `mask` reduced to the lanes
 * that took part, and completes the collective for them (see warp_state); the others return
 * false once it has. */
static bool warp_meet(unsigned & mask, const char * what) {
    fiber & f = *block.running;
    warp_state & w = block.warps[f.state.warp];
    const unsigned bit = 1u << f.state.lane;
    if (!(mask & bit)) fail("%s: lane %d of warp %d calls it with mask 0x%08x, which leaves it out", what, f.state.lane, f.state.warp, mask);
    const unsigned missing = mask & ~w.live;
    if (missing) {
        fail("%s: the mask 0x%08x of warp %d (block %u,%u,%u) names lanes that have exited or do not exist (0x%08x): on a GPU this hangs or is undefined",
             what, mask, f.state.warp, block_idx.x, block_idx.y, block_idx.z, missing);
        mask &= w.live;
    }
    block.progress++;
    w.arrived |= bit;
    w.waiting |= bit;
    w.masks[f.state.lane] = mask;
    if ((w.arrived & mask) == mask) {
        w.arrived &= ~mask;
        w.waiting &= ~mask;
        return true;
    }
    while (w.waiting & bit) yield();
    return false;
}

void sync_warp(unsigned mask) { warp_meet(mask, "__syncwarp"); }

void warp_exchange(unsigned mask, uint64_t value, uint64_t all[32], const char * what) {
    fiber & f = *block.running;
    warp_state & w = block.warps[f.state.warp];
    w.posted[f.state.lane] = value;
    w.received[f.state.lane] = all;
    if (!warp_meet(mask, what)) return;
    /* The last to arrive hands every lane of the mask all the values (itself too, should its mask
     * have left it out: that has failed the launch, but `all` is still read). */
    const unsigned receivers = mask | 1u << f.state.lane;
    for (int lane = 0; lane < 32; lane++)
        if (receivers >> lane & 1u)
            for (int l = 0; l < 32; l++) w.received[lane][l] = (mask >> l & 1u) ? w.posted[l] : 0;
}

uint64_t warp_shuffle(unsigned mask, uint64_t value, int source, const char * what) {
    fiber & f = *block.running;
    warp_state & w = block.warps[f.state.warp];
    const int self = f.state.lane;
    w.posted[self] = value;
    w.wanted[self] = source & 31; /* the callers keep it in 0..31 */
    if (warp_meet(mask, what)) {
        /* The last to arrive hands every lane of the mask the one value it reads (0 from a lane
         * outside the mask), as warp_exchange hands all of them; a lane's slot is not written
         * again before it has read it: that takes a collective it has arrived at. */
        const unsigned receivers = mask | 1u << self;
        for (int lane = 0; lane < 32; lane++)
            if (receivers >> lane & 1u) w.delivered[lane] = (mask >> w.wanted[lane] & 1u) ? w.posted[w.wanted[lane]] : 0;
    }
    return w.delivered[self];
}

void mma_m16n8k16_f16_f32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    /* Every lane posts where its fragments are (its stack stays put while it waits); the last lane
     * to arrive computes the warp's whole 16 × 8 product from them and writes every lane's
     * accumulators. With lanes missing (exited: the launch has failed) there is no whole product.
     * Each accumulator is c + A[row][0] · B[0][column] + ... + A[row][15] · B[15][column], every
     * product and sum rounded to f32, k in order (the emulator's order: a GPU's is its own). */
    fiber & f = *block.running;
    warp_state & w = block.warps[f.state.warp];
    w.mma[f.state.lane] = mma_operands{c, a, b};
    unsigned mask = 0xffffffffu;
    if (warp_meet(mask, "mma.sync.aligned.m16n8k16") && mask == 0xffffffffu) {
        uint32_t a_bits[16][16], b_bits[16][8];
        float accumulators[16][8];
        for (int lane = 0; lane < 32; lane++) {
            const int group = lane >> 2, quad = lane & 3;
            const uint32_t * fa = w.mma[lane].a;
            const uint32_t * fb = w.mma[lane].b;
            const float * lane_c = static_cast<const float *>(w.mma[lane].c);
            for (int r = 0; r < 4; r++) {
                const int row = group + (r & 1) * 8, column = quad * 2 + (r >> 1) * 8;
                a_bits[row][column] = fa[r] & 0xffffu;
                a_bits[row][column + 1] = fa[r] >> 16;
                accumulators[group + (r >> 1) * 8][quad * 2 + (r & 1)] = lane_c[r];
            }
            for (int r = 0; r < 2; r++) {
                const int k = quad * 2 + r * 8;
                b_bits[k][group] = fb[r] & 0xffffu;
                b_bits[k + 1][group] = fb[r] >> 16;
            }
        }
        /* rows of 8 columns as two vectors of 4 */
        f32x4 B[16][2];
        for (int k = 0; k < 16; k++)
            for (int half = 0; half < 2; half++) {
                u32x4 bits;
                memcpy(&bits, &b_bits[k][4 * half], sizeof bits);
                B[k][half] = halves_to_floats(bits);
            }
        for (int row = 0; row < 16; row++) {
            float A[16];
            for (int quarter = 0; quarter < 4; quarter++) {
                u32x4 bits;
                memcpy(&bits, &a_bits[row][4 * quarter], sizeof bits);
                const f32x4 values = halves_to_floats(bits);
                memcpy(&A[4 * quarter], &values, sizeof values);
            }
            f32x4 sum[2];
            memcpy(sum, accumulators[row], sizeof sum);
            for (int k = 0; k < 16; k++) { /* -ffp-contract=off: a product, then a sum */
                sum[0] += A[k] * B[k][0];
                sum[1] += A[k] * B[k][1];
            }
            memcpy(accumulators[row], sum, sizeof sum);
        }
        for (int lane = 0; lane < 32; lane++) {
            const int group = lane >> 2, quad = lane & 3;
            float * out = static_cast<float *>(w.mma[lane].c);
            for (int i = 0; i < 4; i++) out[i] = accumulators[group + (i >> 1) * 8][quad * 2 + (i & 1)];
        }
    }
}

void ldmatrix_x4(uint32_t r[4], const void * row) {
    uint64_t rows[32];
    if ((uintptr_t)row % 16 != 0) fail("ldmatrix: lane %d's row address %p is not 16-byte aligned", current->lane, row);
    warp_exchange(0xffffffffu, (uint64_t)(uintptr_t)row, rows, "ldmatrix.sync.aligned.m8n8.x4");
    const int lane = current->lane;
    for (int i = 0; i < 4; i++) {
        const unsigned char * source = (const unsigned char *)(uintptr_t)rows[8 * i + (lane >> 2)];
        if (!source || (uintptr_t)source % 16 != 0) {
            r[i] = 0; /* the launch has failed (an unaligned row, or a lane missing) */
            continue;
        }
        memcpy(&r[i], source + 4 * (lane & 3), 4);
    }
}

void cp_async(void * destination, const void * source, int bytes, int source_bytes) {
    if ((bytes != 4 && bytes != 8 && bytes != 16) || source_bytes < 0 || source_bytes > bytes) {
        fail("cp.async: %d bytes with %d from the source (4, 8 or 16; at most all from the source)", bytes, source_bytes);
        return;
    }
    if ((uintptr_t)destination % (uintptr_t)bytes != 0 || (uintptr_t)source % (uintptr_t)bytes != 0) {
        fail("cp.async of %d bytes: destination %p or source %p not aligned to it", bytes, destination, source);
        return;
    }
    fiber & f = *block.running;
    pending_copy copy;
    copy.destination = static_cast<unsigned char *>(destination);
    memset(copy.bytes, 0, sizeof copy.bytes);
    if (source_bytes > 0) memcpy(copy.bytes, source, (size_t)source_bytes);
    copy.count = bytes;
    copy.group = f.open_group;
    f.copies.push_back(copy);
}

void cp_async_commit() { block.running->open_group++; }

void cp_async_wait(int pending) {
    fiber & f = *block.running;
    const int64_t complete_below = f.open_group - pending; /* groups older than the newest `pending` committed ones */
    size_t kept = 0;
    for (size_t i = 0; i < f.copies.size(); i++) {
        pending_copy & copy = f.copies[i];
        if (copy.group < complete_below) memcpy(copy.destination, copy.bytes, (size_t)copy.count);
        else f.copies[kept++] = copy;
    }
    f.copies.resize(kept);
}

void mma_m16n8k32_s8_s32(int32_t c[4], const uint32_t a[4], const uint32_t b[2]) {
    /* As mma_m16n8k16_f16_f32: the last lane to arrive computes the warp's 16 × 8 product, in
     * 32-bit two's complement (wrapping, so any order of the sums gives the same result). */
    fiber & f = *block.running;
    warp_state & w = block.warps[f.state.warp];
    w.mma[f.state.lane] = mma_operands{c, a, b};
    unsigned mask = 0xffffffffu;
    if (warp_meet(mask, "mma.sync.aligned.m16n8k32") && mask == 0xffffffffu) {
        int32_t A[16][32];
        uint32_t b_values[32][8], accumulators[16][8];
        for (int lane = 0; lane < 32; lane++) {
            const int group = lane >> 2, quad = lane & 3;
            const uint32_t * fa = w.mma[lane].a;
            const uint32_t * fb = w.mma[lane].b;
            const int32_t * lane_c = static_cast<const int32_t *>(w.mma[lane].c);
            for (int r = 0; r < 4; r++) {
                const int row = group + (r & 1) * 8, column = quad * 4 + (r >> 1) * 16;
                for (int i = 0; i < 4; i++) A[row][column + i] = (int8_t)(uint8_t)(fa[r] >> (8 * i));
                accumulators[group + (r >> 1) * 8][quad * 2 + (r & 1)] = (uint32_t)lane_c[r];
            }
            for (int r = 0; r < 2; r++) {
                const int k = quad * 4 + r * 16;
                for (int i = 0; i < 4; i++) b_values[k + i][group] = (uint32_t)(int32_t)(int8_t)(uint8_t)(fb[r] >> (8 * i));
            }
        }
        u32x4 B[32][2];
        memcpy(B, b_values, sizeof B);
        for (int row = 0; row < 16; row++) {
            u32x4 sum[2];
            memcpy(sum, accumulators[row], sizeof sum);
            for (int k = 0; k < 32; k++) {
                sum[0] += (uint32_t)A[row][k] * B[k][0];
                sum[1] += (uint32_t)A[row][k] * B[k][1];
            }
            memcpy(accumulators[row], sum, sizeof sum);
        }
        for (int lane = 0; lane < 32; lane++) {
            const int group = lane >> 2, quad = lane & 3;
            int32_t * out = static_cast<int32_t *>(w.mma[lane].c);
            for (int i = 0; i < 4; i++) out[i] = (int32_t)accumulators[group + (i >> 1) * 8][quad * 2 + (i & 1)];
        }
    }
}

/* ------------------------------------------------------------------------- launches ---- */

static thread_local cudaError_t last_error = cudaSuccess;
/* The latest error's message and code, kept when cudaGetLastError clears last_error: callers read
 * the error, then format cudaGetErrorString of it. */
static thread_local cudaError_t last_message_error = cudaSuccess;
static thread_local char last_message[1024];

static cudaError_t set_error(cudaError_t error, const char * format, ...) __attribute__((format(printf, 2, 3)));
static cudaError_t set_error(cudaError_t error, const char * format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(last_message, sizeof last_message, format, arguments);
    va_end(arguments);
    last_error = last_message_error = error;
    return error;
}

static std::vector<unsigned char> dynamic_shared;

/* cudaFuncSetAttribute's cudaFuncAttributeMaxDynamicSharedMemorySize per kernel (the default: 48 KiB). */
static std::mutex attribute_mutex;
static std::unordered_map<const void *, int> dynamic_shared_limits;
static size_t dynamic_shared_limit(const void * kernel) {
    std::lock_guard<std::mutex> lock(attribute_mutex);
    const auto found = dynamic_shared_limits.find(kernel);
    return found == dynamic_shared_limits.end() ? (size_t)MEMRA_EMU_STATIC_SHARED_BYTES : (size_t)found->second;
}

/* The checks a launch's configuration gets when it is issued (run or recorded). */
static cudaError_t check_configuration(const void * kernel, dim3 grid, dim3 block_size, size_t shared_bytes, const char * kernel_name) {
    const uint64_t threads = (uint64_t)block_size.x * block_size.y * block_size.z;
    if (threads == 0 || threads > MEMRA_EMU_MAX_THREADS_PER_BLOCK || block_size.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        return set_error(cudaErrorInvalidConfiguration, "invalid configuration argument: %s with grid (%u, %u, %u) and block (%u, %u, %u)", kernel_name, grid.x,
                         grid.y, grid.z, block_size.x, block_size.y, block_size.z);
    const size_t limit = dynamic_shared_limit(kernel);
    if (shared_bytes > limit)
        return set_error(cudaErrorInvalidValue,
                         "invalid argument: %s asks for %zu bytes of dynamic shared memory, over its limit of %zu (more than 48 KiB needs cudaFuncSetAttribute)",
                         kernel_name, shared_bytes, limit);
    return cudaSuccess;
}

/* An operation on a capturing stream has failed (its error is the thread's latest): the capture is
 * invalidated, what it recorded freed; the first such error is kept for cudaStreamEndCapture's
 * message. With capture_mutex held. */
static void invalidate_capture(memra_emu_stream * stream) {
    if (stream->capture == cudaStreamCaptureStatusActive) snprintf(stream->invalidated_by, sizeof stream->invalidated_by, "%s", last_message);
    stream->capture = cudaStreamCaptureStatusInvalidated;
    stream->recorded.clear();
}

/* The error of an operation issued on a stream whose capture has been invalidated. */
static cudaError_t capture_invalidated(const char * what) {
    return set_error(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture: %s on a stream whose capture is invalidated", what);
}

/* A launch issued on `stream`: recorded when it captures (true: handled), else false (run it). */
static bool record_launch(memra_emu_stream * stream, cudaError_t configuration, dim3 grid, dim3 block_size, size_t shared_bytes, launch_body body,
                          const char * kernel_name) {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (stream->capture == cudaStreamCaptureStatusNone) return false;
    if (configuration != cudaSuccess) { /* the real runtime invalidates the capture too */
        invalidate_capture(stream);
        return true;
    }
    if (stream->capture == cudaStreamCaptureStatusInvalidated) {
        capture_invalidated(kernel_name);
        return true;
    }
    if (!body.clone || !body.destroy) {
        set_error(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing: %s has no copy of its arguments to record", kernel_name);
        invalidate_capture(stream);
        return true;
    }
    std::unique_ptr<memra_emu_graph_node> node(new memra_emu_graph_node(memra_emu_graph_node::KERNEL));
    node->grid = grid;
    node->block = block_size;
    node->shared_bytes = shared_bytes;
    node->name = kernel_name;
    node->body = launch_body{body.run, body.clone(body.context), body.clone, body.destroy};
    stream->recorded.push_back(std::move(node));
    return true;
}

/* MEMRA_CUDA_EMULATOR_PROFILE=1: at exit, each kernel's launches and the seconds the emulator spent
 * running them, most first, on stderr (what makes an emulated test slow; nothing about a GPU). */
struct kernel_profile {
    std::map<std::string, std::pair<uint64_t, double>> kernels; /* name → launches, seconds */
    ~kernel_profile() { report(); }
    void report() {
        if (kernels.empty()) return;
        std::vector<std::pair<double, std::string>> order;
        double total = 0;
        for (const auto & [name, entry] : kernels) {
            order.emplace_back(entry.second, name);
            total += entry.second;
        }
        std::sort(order.rbegin(), order.rend());
        fprintf(stderr, "memra cuda emulator profile: %.2f s in kernels\n", total);
        for (const auto & [seconds, name] : order) fprintf(stderr, "  %9.3f s %8llu launches  %s\n", seconds, (unsigned long long)kernels[name].first, name.c_str());
    }
};
static kernel_profile * profile_from_environment() {
    const char * named = getenv("MEMRA_CUDA_EMULATOR_PROFILE");
    if (!named || strcmp(named, "1") != 0) return nullptr;
    static kernel_profile profile;
    return &profile;
}
/* The profile so far, on stderr, and cleared (a host that exits without running destructors, as
 * Bun does, calls this itself: bun:ffi's dlopen of the same library). */
extern "C" __attribute__((visibility("default"))) void memra_cuda_emulator_profile_report(void) {
    kernel_profile * profile = profile_from_environment();
    if (!profile) return;
    std::lock_guard<std::mutex> lock(launch_mutex);
    profile->report();
    profile->kernels.clear();
}

/* Runs a launch whose configuration has passed check_configuration (issued now, or a kernel node
 * of a graph); returns its error, which is also the thread's last error. */
static cudaError_t execute_blocks(dim3 grid, dim3 block_size, size_t shared_bytes, launch_body body, const char * kernel_name);
static cudaError_t execute(dim3 grid, dim3 block_size, size_t shared_bytes, launch_body body, const char * kernel_name) {
    static kernel_profile * const profile = profile_from_environment();
    if (!profile) return execute_blocks(grid, block_size, shared_bytes, body, kernel_name);
    const auto start = std::chrono::steady_clock::now();
    const cudaError_t error = execute_blocks(grid, block_size, shared_bytes, body, kernel_name);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(launch_mutex);
    auto & entry = profile->kernels[kernel_name ? kernel_name : "?"];
    entry.first++;
    entry.second += seconds;
    return error;
}
static cudaError_t execute_blocks(dim3 grid, dim3 block_size, size_t shared_bytes, launch_body body, const char * kernel_name) {
    const uint64_t threads = (uint64_t)block_size.x * block_size.y * block_size.z;
    std::lock_guard<std::mutex> lock(launch_mutex);
    if (!ensure_stacks(threads)) return set_error(cudaErrorMemoryAllocation, "out of memory: no stacks for %llu emulated threads", (unsigned long long)threads);
    launch_failed = false;
    launches_started++;
    launch_message[0] = 0;
    dynamic_shared.assign(shared_bytes > 0 ? shared_bytes : 16, 0xff); /* 0xffffffff: a NaN */
    dynamic_shared_memory = dynamic_shared.data();
    block_dim = block_size;
    grid_dim = grid;
    block.body = body;
    block.count = (int)threads;
    block.fibers.resize(threads);
    block.warps.resize((threads + 31) / 32);
    /* Blocks run one after another in the schedule's order too (forward; reverse: the last block
     * first; random: a shuffle per launch), so that a kernel that counts on blocks finishing in
     * index order (rather than on a ticket) gives other results under another schedule. */
    const uint64_t block_count = (uint64_t)grid.x * grid.y * grid.z;
    const std::vector<uint64_t> block_order = arrange_blocks(block_count);
    for (uint64_t n = 0; n < block_count && !launch_failed; n++) {
        const uint64_t linear = block_order.empty() ? n : block_order[n];
        const unsigned x = (unsigned)(linear % grid.x), y = (unsigned)(linear / grid.x % grid.y), z = (unsigned)(linear / ((uint64_t)grid.x * grid.y));
        block_idx = uint3{x, y, z};
        if (shared_bytes > 0) memset(dynamic_shared.data(), 0xff, shared_bytes);
        for (uint64_t t = 0; t < threads; t++) {
            fiber & f = block.fibers[t];
            f.state.thread_idx = uint3{(unsigned)(t % block_size.x), (unsigned)(t / block_size.x % block_size.y), (unsigned)(t / ((uint64_t)block_size.x * block_size.y))};
            f.state.lane = (int)(t & 31);
            f.state.warp = (int)(t >> 5);
            f.stack = stacks[t];
            f.done = 0;
            f.copies.clear();
            f.open_group = 0;
            start_fiber(f, t);
        }
        for (size_t w = 0; w < block.warps.size(); w++) {
            const uint64_t lanes = threads - w * 32 >= 32 ? 32 : threads - w * 32;
            block.warps[w].live = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
            block.warps[w].waiting = block.warps[w].arrived = 0;
        }
        block.live = (int)threads;
        block.barrier_arrived = 0;
        block.deadlocked = false;
        block.round_progress = block.progress - 1;
        arrange_schedule((int)threads, ((uint64_t)z * grid.y + y) * grid.x + x);
        switch_between(nullptr, &block.fibers[block.order[0]], false); /* back when every thread has exited, or on a deadlock */
        if (block.deadlocked) {
            int in_warp = 0;
            for (const warp_state & w : block.warps) in_warp += __builtin_popcount(w.waiting);
            fail("%s: deadlock in block (%u, %u, %u): %d threads wait at __syncthreads, %d in warp collectives, %d have exited", kernel_name, x, y, z,
                 block.barrier_arrived, in_warp, block.count - block.live);
#ifdef MEMRA_EMU_ASAN
            /* The waiting threads are abandoned mid-call, as by a longjmp: their frames'
             * redzones would stay poisoned in the stacks that the next threads reuse. */
            for (const fiber & f : block.fibers)
                if (!f.done) __asan_unpoison_memory_region(f.stack, STACK_BYTES);
#endif
        }
    }
    block.running = nullptr;
    current = nullptr;
    if (launch_failed) return set_error(cudaErrorLaunchFailure, "unspecified launch failure: %s", launch_message);
    return cudaSuccess;
}

void launch(const void * kernel, dim3 grid, dim3 block_size, size_t shared_bytes, void * stream, launch_body body, const char * kernel_name) {
    const cudaError_t configuration = check_configuration(kernel, grid, block_size, shared_bytes, kernel_name);
    if (stream && record_launch(static_cast<memra_emu_stream *>(stream), configuration, grid, block_size, shared_bytes, body, kernel_name)) return;
    if (configuration == cudaSuccess) execute(grid, block_size, shared_bytes, body, kernel_name);
}

}  // namespace memra_emu

/* ---------------------------------------------------------------------- runtime API ---- */

using memra_emu::set_error;

static std::mutex memory_mutex;
static std::map<uintptr_t, size_t> device_allocations; /* start → bytes */
static size_t device_allocated;

static size_t device_capacity() {
    const char * named = getenv("MEMRA_CUDA_EMULATOR_MEMORY_MB");
    if (named && *named) return (size_t)strtoull(named, nullptr, 10) << 20;
    return (size_t)8 << 30;
}

/* A limit lowered below what is allocated leaves nothing free (not a wrapped-around size). */
static size_t device_free() {
    const size_t capacity = device_capacity();
    return device_allocated < capacity ? capacity - device_allocated : 0;
}

static int device_count() {
    const char * named = getenv("MEMRA_CUDA_EMULATOR_DEVICES");
    return named && *named ? atoi(named) : 1;
}

static const char * error_name(cudaError_t error) {
    switch (error) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInitializationError: return "cudaErrorInitializationError";
        case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorIllegalState: return "cudaErrorIllegalState";
        case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
        case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
        default: return "cudaErrorUnknown";
    }
}

const char * cudaGetErrorName(cudaError_t error) { return error_name(error); }
/* The emulator's errors carry a message of their own: the last one's, when asked about its code. */
const char * cudaGetErrorString(cudaError_t error) {
    if (error != cudaSuccess && error == memra_emu::last_message_error && memra_emu::last_message[0]) return memra_emu::last_message;
    switch (error) {
        case cudaSuccess: return "no error";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulator: MEMRA_CUDA_EMULATOR_DEVICES=0)";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidValue: return "invalid argument";
        default: return error_name(error);
    }
}
cudaError_t cudaGetLastError(void) {
    const cudaError_t error = memra_emu::last_error;
    memra_emu::last_error = cudaSuccess;
    return error;
}
cudaError_t cudaPeekAtLastError(void) { return memra_emu::last_error; }

cudaError_t cudaGetDeviceCount(int * count) {
    *count = device_count();
    if (*count <= 0) {
        *count = 0;
        return set_error(cudaErrorNoDevice, "no CUDA-capable device is detected (emulator: MEMRA_CUDA_EMULATOR_DEVICES=0)");
    }
    return cudaSuccess;
}
static thread_local int current_device;
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return set_error(cudaErrorInvalidDevice, "invalid device ordinal %d", device);
    current_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int * device) {
    *device = current_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp * properties, int device) {
    if (device < 0 || device >= device_count()) return set_error(cudaErrorInvalidDevice, "invalid device ordinal %d", device);
    memset(properties, 0, sizeof *properties);
    snprintf(properties->name, sizeof properties->name, "memra CUDA emulator (CPU)");
    properties->totalGlobalMem = device_capacity();
    properties->sharedMemPerBlock = MEMRA_EMU_STATIC_SHARED_BYTES;
    properties->sharedMemPerBlockOptin = MEMRA_EMU_MAX_SHARED_BYTES;
    properties->warpSize = 32;
    properties->maxThreadsPerBlock = MEMRA_EMU_MAX_THREADS_PER_BLOCK;
    properties->maxThreadsDim[0] = properties->maxThreadsDim[1] = 1024;
    properties->maxThreadsDim[2] = 64;
    properties->maxGridSize[0] = 2147483647;
    properties->maxGridSize[1] = properties->maxGridSize[2] = 65535;
    properties->major = 9;
    properties->minor = 0;
    properties->multiProcessorCount = 132;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t * free_bytes, size_t * total_bytes) {
    std::lock_guard<std::mutex> lock(memory_mutex);
    *total_bytes = device_capacity();
    *free_bytes = device_free();
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaMalloc(void ** pointer, size_t bytes) {
    *pointer = nullptr;
    std::lock_guard<std::mutex> lock(memory_mutex);
    if (bytes > device_free()) return set_error(cudaErrorMemoryAllocation, "out of memory (emulated device: %zu bytes requested, %zu free)", bytes, device_free());
    void * memory = nullptr;
    if (posix_memalign(&memory, 256, bytes > 0 ? bytes : 1) != 0) return set_error(cudaErrorMemoryAllocation, "out of memory (host)");
    device_allocations[(uintptr_t)memory] = bytes;
    device_allocated += bytes;
    *pointer = memory;
    return cudaSuccess;
}
cudaError_t cudaFree(void * pointer) {
    if (!pointer) return cudaSuccess;
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto found = device_allocations.find((uintptr_t)pointer);
    if (found == device_allocations.end()) return set_error(cudaErrorInvalidValue, "invalid argument: cudaFree of %p, which cudaMalloc did not return", pointer);
    device_allocated -= found->second;
    device_allocations.erase(found);
    free(pointer);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void ** pointer, size_t bytes) {
    *pointer = nullptr;
    if (posix_memalign(pointer, 4096, bytes > 0 ? bytes : 1) != 0) return set_error(cudaErrorMemoryAllocation, "out of memory (pinned host)");
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void * pointer) {
    free(pointer);
    return cudaSuccess;
}

/* [pointer, pointer + bytes) lies inside one cudaMalloc allocation. */
static bool in_device_memory(const void * pointer, size_t bytes) {
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto after = device_allocations.upper_bound((uintptr_t)pointer);
    if (after == device_allocations.begin()) return false;
    --after;
    return (uintptr_t)pointer + bytes <= after->first + after->second;
}

static cudaError_t check_copy(const char * what, void * target, const void * source, size_t bytes, cudaMemcpyKind kind) {
    const bool device_target = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool device_source = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (bytes == 0) return cudaSuccess;
    if (device_target && !in_device_memory(target, bytes))
        return set_error(cudaErrorInvalidValue, "invalid argument: %s writes %zu bytes at %p, outside every device allocation", what, bytes, target);
    if (device_source && !in_device_memory(source, bytes))
        return set_error(cudaErrorInvalidValue, "invalid argument: %s reads %zu bytes at %p, outside every device allocation", what, bytes, source);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void * target, const void * source, size_t bytes, cudaMemcpyKind kind) {
    const cudaError_t error = check_copy("cudaMemcpy", target, source, bytes, kind);
    if (error != cudaSuccess) return error;
    if (bytes) memmove(target, source, bytes);
    return cudaSuccess;
}
static cudaError_t check_set(const char * what, void * target, size_t bytes) {
    if (bytes && !in_device_memory(target, bytes)) return set_error(cudaErrorInvalidValue, "invalid argument: %s of %zu bytes at %p, outside every device allocation", what, bytes, target);
    return cudaSuccess;
}

/* ------------------------------------------------------- stream capture and graphs ---- */
/*
 * As the real runtime (CUDA 12/13) behaves, for one stream capturing on its own:
 *   - cudaStreamBeginCapture: not on the NULL stream (cudaErrorStreamCaptureUnsupported), not on a
 *     stream that captures already (cudaErrorIllegalState);
 *   - kernel launches, cudaMemcpyAsync and cudaMemsetAsync issued on the capturing stream are
 *     recorded, checked as when they run (a launch's configuration, a copy's device ranges); one
 *     that fails returns (or leaves for cudaGetLastError) its error and invalidates the capture;
 *     on an invalidated capture they fail with cudaErrorStreamCaptureInvalidated;
 *   - cudaStreamSynchronize of a capturing stream fails (cudaErrorStreamCaptureUnsupported) and
 *     invalidates the capture; cudaEventRecord and cudaStreamWaitEvent are allowed (they order
 *     nothing in a chain), and an event last recorded in a capture cannot be synchronised with
 *     (cudaErrorCapturedEvent) until it is recorded again outside one;
 *   - cudaStreamEndCapture: cudaErrorIllegalState when the stream does not capture; a capture
 *     begun in Global or ThreadLocal mode ends on the thread that began it
 *     (cudaErrorStreamCaptureWrongThread); an invalidated one ends with
 *     cudaErrorStreamCaptureInvalidated and no graph;
 *   - cudaGraphLaunch runs the nodes in order on the calling thread; a copy is checked again when
 *     it runs (its memory may have been freed since) and reads its source then; the first node
 *     that fails stops the launch with its error. Not on a capturing stream (the real runtime
 *     would record a child graph: cudaErrorIllegalState here).
 * Other streams, the NULL stream among them, run what is issued on them at once during a capture
 * (the emulator does not model the legacy stream's implicit synchronisation with blocking streams,
 * the capture modes' bans of unsafe calls, nor captures joined across streams through events).
 */

cudaError_t cudaMemcpyAsync(void * target, const void * source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    if (stream) {
        std::lock_guard<std::mutex> lock(capture_mutex);
        if (stream->capture == cudaStreamCaptureStatusInvalidated) return memra_emu::capture_invalidated("cudaMemcpyAsync");
        if (stream->capture == cudaStreamCaptureStatusActive) {
            const cudaError_t error = check_copy("cudaMemcpyAsync (captured)", target, source, bytes, kind);
            if (error != cudaSuccess) {
                memra_emu::invalidate_capture(stream);
                return error;
            }
            std::unique_ptr<memra_emu_graph_node> node(new memra_emu_graph_node(memra_emu_graph_node::MEMCPY));
            node->target = target;
            node->source = source;
            node->bytes = bytes;
            node->copy_kind = kind;
            stream->recorded.push_back(std::move(node));
            return cudaSuccess;
        }
    }
    const cudaError_t error = check_copy("cudaMemcpyAsync", target, source, bytes, kind);
    if (error != cudaSuccess) return error;
    if (bytes) memmove(target, source, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void * target, int value, size_t bytes, cudaStream_t stream) {
    if (stream) {
        std::lock_guard<std::mutex> lock(capture_mutex);
        if (stream->capture == cudaStreamCaptureStatusInvalidated) return memra_emu::capture_invalidated("cudaMemsetAsync");
        if (stream->capture == cudaStreamCaptureStatusActive) {
            const cudaError_t error = check_set("cudaMemsetAsync (captured)", target, bytes);
            if (error != cudaSuccess) {
                memra_emu::invalidate_capture(stream);
                return error;
            }
            std::unique_ptr<memra_emu_graph_node> node(new memra_emu_graph_node(memra_emu_graph_node::MEMSET));
            node->target = target;
            node->value = value;
            node->bytes = bytes;
            stream->recorded.push_back(std::move(node));
            return cudaSuccess;
        }
    }
    const cudaError_t error = check_set("cudaMemsetAsync", target, bytes);
    if (error != cudaSuccess) return error;
    if (bytes) memset(target, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t * stream, unsigned int flags) {
    *stream = new memra_emu_stream();
    (*stream)->flags = flags;
    return cudaSuccess;
}
/* A stream destroyed while it captures frees what it has recorded. */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete stream;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!stream) return cudaSuccess;
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (stream->capture == cudaStreamCaptureStatusNone) return cudaSuccess;
    const cudaError_t error = set_error(cudaErrorStreamCaptureUnsupported,
                                        "operation not permitted when stream is capturing: cudaStreamSynchronize of a stream that is capturing (the capture is invalidated)");
    memra_emu::invalidate_capture(stream);
    return error;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t * event, unsigned int flags) {
    *event = new memra_emu_event();
    (*event)->flags = flags;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (!event) return set_error(cudaErrorInvalidResourceHandle, "invalid resource handle: cudaEventRecord of a NULL event");
    std::lock_guard<std::mutex> lock(capture_mutex);
    const cudaStreamCaptureStatus capture = stream ? stream->capture : cudaStreamCaptureStatusNone;
    if (capture == cudaStreamCaptureStatusInvalidated) return memra_emu::capture_invalidated("cudaEventRecord");
    event->captured = capture == cudaStreamCaptureStatusActive;
    if (!event->captured) {
        event->recorded = true;
        event->time = std::chrono::steady_clock::now();
    }
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float * ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return set_error(cudaErrorInvalidValue, "invalid argument: cudaEventElapsedTime with no place for the time");
    if (!start || !end) return set_error(cudaErrorInvalidResourceHandle, "invalid resource handle: cudaEventElapsedTime of a NULL event");
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return set_error(cudaErrorInvalidResourceHandle, "invalid resource handle: cudaEventElapsedTime of an event created with cudaEventDisableTiming");
    if (!start->recorded || !end->recorded) return set_error(cudaErrorInvalidResourceHandle, "invalid resource handle: cudaEventElapsedTime of an event not recorded");
    *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (!event) return set_error(cudaErrorInvalidResourceHandle, "invalid resource handle: cudaEventSynchronize of a NULL event");
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (event->captured)
        return set_error(cudaErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing stream: cudaEventSynchronize of an event recorded during a capture");
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t, unsigned int) {
    if (!stream) return cudaSuccess;
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (stream->capture == cudaStreamCaptureStatusInvalidated) return memra_emu::capture_invalidated("cudaStreamWaitEvent");
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    if (!stream) return set_error(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing: cudaStreamBeginCapture on the NULL (legacy) stream");
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeRelaxed)
        return set_error(cudaErrorInvalidValue, "invalid argument: cudaStreamBeginCapture with the mode %d", (int)mode);
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (stream->capture != cudaStreamCaptureStatusNone)
        return set_error(cudaErrorIllegalState, "the operation cannot be performed in the present state: cudaStreamBeginCapture on a stream that is capturing already");
    stream->capture = cudaStreamCaptureStatusActive;
    stream->capture_mode = mode;
    stream->capture_thread = std::this_thread::get_id();
    stream->recorded.clear();
    stream->invalidated_by[0] = 0;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t * graph) {
    if (!graph) return set_error(cudaErrorInvalidValue, "invalid argument: cudaStreamEndCapture with no place for the graph");
    memra_emu_node_list recorded;
    {
        std::lock_guard<std::mutex> lock(capture_mutex);
        if (!stream || stream->capture == cudaStreamCaptureStatusNone)
            return set_error(cudaErrorIllegalState, "the operation cannot be performed in the present state: cudaStreamEndCapture on a stream that is not capturing");
        if (stream->capture_mode != cudaStreamCaptureModeRelaxed && stream->capture_thread != std::this_thread::get_id())
            return set_error(cudaErrorStreamCaptureWrongThread,
                             "a capture sequence not initiated with cudaStreamCaptureModeRelaxed was passed to cudaStreamEndCapture in a different thread");
        const bool invalidated = stream->capture == cudaStreamCaptureStatusInvalidated;
        stream->capture = cudaStreamCaptureStatusNone;
        recorded.swap(stream->recorded);
        if (invalidated) {
            *graph = nullptr;
            return set_error(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture: cudaStreamEndCapture of a capture invalidated by: %s",
                             stream->invalidated_by[0] ? stream->invalidated_by : "an earlier error");
        }
    }
    *graph = new memra_emu_graph{std::make_shared<const memra_emu_node_list>(std::move(recorded))};
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus * status) {
    if (!status) return set_error(cudaErrorInvalidValue, "invalid argument: cudaStreamIsCapturing with no place for the status");
    std::lock_guard<std::mutex> lock(capture_mutex);
    *status = stream ? stream->capture : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t * exec, cudaGraph_t graph, unsigned long long flags) {
    (void)flags; /* none changes what the emulator does */
    if (!exec || !graph) return set_error(cudaErrorInvalidValue, "invalid argument: cudaGraphInstantiate without %s", exec ? "a graph" : "a place for the exec");
    *exec = new memra_emu_graph_exec{graph->nodes};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    if (!exec) return set_error(cudaErrorInvalidValue, "invalid argument: cudaGraphLaunch of a NULL exec");
    if (stream) {
        std::lock_guard<std::mutex> lock(capture_mutex);
        if (stream->capture != cudaStreamCaptureStatusNone)
            return set_error(cudaErrorIllegalState, "the operation cannot be performed in the present state: cudaGraphLaunch on a capturing stream (the emulator does not capture graph launches)");
    }
    const memra_emu_node_list & nodes = *exec->nodes;
    for (size_t i = 0; i < nodes.size(); i++) {
        const memra_emu_graph_node & node = *nodes[i];
        char what[96];
        cudaError_t error = cudaSuccess;
        switch (node.kind) {
            case memra_emu_graph_node::KERNEL: error = memra_emu::execute(node.grid, node.block, node.shared_bytes, node.body, node.name); break;
            case memra_emu_graph_node::MEMCPY:
                snprintf(what, sizeof what, "cudaGraphLaunch: the memcpy node (%zu of %zu)", i + 1, nodes.size());
                error = check_copy(what, node.target, node.source, node.bytes, node.copy_kind);
                if (error == cudaSuccess && node.bytes) memmove(node.target, node.source, node.bytes);
                break;
            case memra_emu_graph_node::MEMSET:
                snprintf(what, sizeof what, "cudaGraphLaunch: the memset node (%zu of %zu)", i + 1, nodes.size());
                error = check_set(what, node.target, node.bytes);
                if (error == cudaSuccess && node.bytes) memset(node.target, node.value, node.bytes);
                break;
        }
        if (error != cudaSuccess) return error;
    }
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    if (!exec) return set_error(cudaErrorInvalidValue, "invalid argument: cudaGraphExecDestroy of a NULL exec");
    delete exec;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    if (!graph) return set_error(cudaErrorInvalidValue, "invalid argument: cudaGraphDestroy of a NULL graph");
    delete graph;
    return cudaSuccess;
}
/* nodes NULL: the count; else the first *count nodes, NULL past the last, *count the number given. */
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t * nodes, size_t * count) {
    if (!graph || !count) return set_error(cudaErrorInvalidValue, "invalid argument: cudaGraphGetNodes without %s", graph ? "a count" : "a graph");
    const memra_emu_node_list & list = *graph->nodes;
    if (!nodes) {
        *count = list.size();
        return cudaSuccess;
    }
    for (size_t i = 0; i < *count; i++) nodes[i] = i < list.size() ? list[i].get() : nullptr;
    if (*count > list.size()) *count = list.size();
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void * function, int attribute, int value) {
    if (!function) return set_error(cudaErrorInvalidValue, "invalid argument: no function");
    if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess; /* no other attribute changes what the emulator does */
    if (value < 0 || value > MEMRA_EMU_MAX_SHARED_BYTES)
        return set_error(cudaErrorInvalidValue, "invalid argument: %d bytes of dynamic shared memory (at most %d)", value, MEMRA_EMU_MAX_SHARED_BYTES);
    std::lock_guard<std::mutex> lock(memra_emu::attribute_mutex);
    memra_emu::dynamic_shared_limits[function] = value;
    return cudaSuccess;
}
