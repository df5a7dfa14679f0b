/*
 * Tests of the CPU emulator of CUDA (native/cuda/emulator), which the emulated build of
 * libmemra_cuda runs its kernels on: the half conversions against the compiler's own (_Float16;
 * an ldexp reference where there is none) and bfloat16 against round to nearest even, block
 * barriers, warp collectives against CUDA's documented semantics, mma.sync fragment layouts,
 * launch errors (bad configurations, deadlocks and bad masks become errors, never hangs), the
 * device memory bookkeeping, a launch of many blocks, and stream capture into graphs and their
 * replay (the real runtime's rules: what is recorded, what runs when, what invalidates a capture).
 * Also two device functions of the kernels, called on the host: small_int_to_float, and the
 * i-quants' codes (kernels/quant.cuh, kernels/matmul.cuh) against ggml's dequantization.
 *
 * Built by run.sh with the system C++ compiler and the emulated build's flags, together with
 * emulator.cpp (kernels are written here as the library writes them, launched with MEMRA_LAUNCH),
 * once plainly and once with AddressSanitizer. Prints one line per failed check; exits non-zero
 * when any failed.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/matmul.cuh"
#include <time.h>

#include <thread>
#include <algorithm>
#include <string>
#include <vector>

static int checks, failures;
static const char * program = "test-emulator"; /* the ASan build says so in its lines */

static void check(bool ok, int line, const char * format, ...) __attribute__((format(printf, 3, 4)));
static void check(bool ok, int line, const char * format, ...) {
    checks++;
    if (ok) return;
    failures++;
    fprintf(stderr, "test-emulator.cpp:%d: FAIL: ", line);
    va_list arguments;
    va_start(arguments, format);
    vfprintf(stderr, format, arguments);
    va_end(arguments);
    fputc('\n', stderr);
}
#define CHECK(condition, ...) check((condition), __LINE__, __VA_ARGS__)

/* A sweep checks many values as one check; its first few mismatches are printed as detail, just
 * before the check's own line. */
static const int SHOWN_MISMATCHES = 5;
static void detail(int & mismatches, const char * format, ...) __attribute__((format(printf, 2, 3)));
static void detail(int & mismatches, const char * format, ...) {
    if (mismatches++ >= SHOWN_MISMATCHES) return;
    fputs("    ", stderr);
    va_list arguments;
    va_start(arguments, format);
    vfprintf(stderr, format, arguments);
    va_end(arguments);
    fputc('\n', stderr);
}

static uint32_t float_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}
static float bits_float(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Launches report errors through cudaGetLastError; a test that expects none reads it here. */
static void expect_launch_ok(int line, const char * what) {
    const cudaError_t error = cudaGetLastError();
    check(error == cudaSuccess, line, "%s: launch failed: %s (%s)", what, cudaGetErrorName(error), cudaGetErrorString(error));
}
#define EXPECT_LAUNCH_OK(what) expect_launch_ok(__LINE__, what)

/* ------------------------------------------------------------------ 1. conversions ---- */

#ifdef __FLT16_MAX__
/* The compiler's own conversions (_Float16). */
static const char REFERENCE[] = "_Float16";
static float reference_half_to_float(uint16_t bits) {
    _Float16 h;
    memcpy(&h, &bits, 2);
    return (float)h;
}
static uint16_t reference_half_bits(float f) {
    const _Float16 h = (_Float16)f;
    uint16_t bits;
    memcpy(&bits, &h, 2);
    return bits;
}
#else
/* Compilers without _Float16 (clang before 15 on x86): every half's value built with ldexp, and
 * float → half as the nearest of them (ties to the even one), found by bisection. */
static const char REFERENCE[] = "the ldexp reference";
static float reference_half_to_float(uint16_t bits) {
    const int exponent = bits >> 10 & 0x1f, mantissa = bits & 0x3ff;
    const float magnitude = exponent == 0x1f ? (mantissa ? NAN : INFINITY) : exponent == 0 ? ldexpf((float)mantissa, -24) : ldexpf((float)(1024 + mantissa), exponent - 25);
    return bits & 0x8000u ? -magnitude : magnitude;
}
static uint16_t reference_half_bits(float f) {
    if (isnan(f)) return 0x7e00;
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    const double x = fabs((double)f);
    if (x >= 65520.0) return sign | 0x7c00; /* 65504 + half its ulp, a tie that goes to the even infinity */
    int low = 0, high = 0x7bff;             /* the largest finite half ≤ x */
    while (low < high) {
        const int middle = (low + high + 1) / 2;
        if (reference_half_to_float((uint16_t)middle) <= x) low = middle;
        else high = middle - 1;
    }
    if (low == 0x7bff) return sign | 0x7bff;
    const double below = reference_half_to_float((uint16_t)low), above = reference_half_to_float((uint16_t)(low + 1));
    const int chosen = x - below < above - x ? low : x - below > above - x ? low + 1 : (low & 1) ? low + 1 : low;
    return (uint16_t)(sign | chosen);
}
#endif
static bool half_bits_nan(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }

/* The bfloat16 nearest to f, ties to the even mantissa, by comparing distances to the two
 * candidates in double (exact for floats); beyond the largest bfloat16 the upper candidate is
 * 2^128, where an unbounded exponent would put it, and rounding to it means infinity. */
static uint16_t reference_bfloat16_bits(float f) {
    const uint32_t bits = float_bits(f), sign = bits & 0x80000000u, magnitude = bits & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) return (uint16_t)((sign | magnitude) >> 16); /* inf (NaNs are compared as NaN only) */
    const uint32_t below = magnitude & 0xffff0000u, above = below + 0x10000u;
    const double exact = bits_float(magnitude), low = bits_float(below), high = above == 0x7f800000u ? ldexp(1.0, 128) : (double)bits_float(above);
    uint32_t chosen;
    if (exact - low < high - exact) chosen = below;
    else if (exact - low > high - exact) chosen = above;
    else chosen = (below >> 16 & 1u) ? above : below;
    return (uint16_t)((sign | chosen) >> 16);
}

static void check_float_to_half(float f, int & mismatches) {
    const uint16_t expected = reference_half_bits(f), got = __half_as_ushort(__float2half_rn(f));
    if (half_bits_nan(expected) ? half_bits_nan(got) : expected == got) return;
    detail(mismatches, "__float2half_rn(%a = 0x%08x) = 0x%04x, %s gives 0x%04x", (double)f, float_bits(f), got, REFERENCE, expected);
}
static void check_float_to_bfloat16(float f, int & mismatches) {
    const uint16_t expected = reference_bfloat16_bits(f), got = __float2bfloat16_rn(f).__x;
    const bool nan = isnan(f), got_nan = (got & 0x7f80u) == 0x7f80u && (got & 0x7fu) != 0;
    if (nan ? got_nan : expected == got) return;
    detail(mismatches, "__float2bfloat16_rn(%a = 0x%08x) = 0x%04x, round to nearest even gives 0x%04x", (double)f, float_bits(f), got, expected);
}

static void test_conversions() {
    int mismatches = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t bits = (uint16_t)h;
        const float expected = reference_half_to_float(bits), got = __half2float(__ushort_as_half(bits));
        if (isnan(expected) ? isnan(got) : float_bits(expected) == float_bits(got)) continue;
        detail(mismatches, "__half2float(0x%04x) = %a (0x%08x), %s gives %a (0x%08x)", bits, (double)got, float_bits(got), REFERENCE, (double)expected, float_bits(expected));
    }
    CHECK(mismatches == 0, "__half2float differs from %s for %d of the 65536 halves", REFERENCE, mismatches);

    /* the emulated f16 mma's conversion of 4 halves at once: half_to_float's bits for every half */
    mismatches = 0;
    for (uint32_t first = 0; first < 65536; first += 4) {
        memra_emu::u32x4 bits;
        for (int i = 0; i < 4; i++) bits[i] = first + (uint32_t)i;
        const memra_emu::f32x4 got = memra_emu::halves_to_floats(bits);
        for (int i = 0; i < 4; i++) {
            const float expected = memra_emu::half_to_float((unsigned short)(first + (uint32_t)i));
            if (float_bits(got[i]) != float_bits(expected))
                detail(mismatches, "halves_to_floats(0x%04x) = 0x%08x, half_to_float gives 0x%08x", first + (uint32_t)i, float_bits(got[i]), float_bits(expected));
        }
    }
    CHECK(mismatches == 0, "halves_to_floats differs from half_to_float for %d of the 65536 halves", mismatches);

    /* Every 4099th float bit pattern (4099 is prime, so the sweep meets every exponent and
     * varied low mantissa bits, sign included), then the edges: the overflow threshold 65520, the
     * smallest subnormal and the ties around it, the subnormal/normal boundary, halfway cases. */
    std::vector<float> edges = {65504.0f,
                                65519.99f,
                                65520.0f,
                                nextafterf(65520.0f, 0.0f),
                                65536.0f,
                                ldexpf(1.0f, -24),
                                ldexpf(1.0f, -25),
                                ldexpf(1.0f, -25) * 1.0001f,
                                nextafterf(ldexpf(1.0f, -25), 0.0f),
                                ldexpf(3.0f, -25),
                                ldexpf(5.0f, -25),
                                ldexpf(1.0f, -26),
                                ldexpf(1.0f, -14),
                                nextafterf(ldexpf(1.0f, -14), 0.0f),
                                ldexpf(1.0f, -14) - ldexpf(1.0f, -25),
                                ldexpf(1023.0f, -24),
                                ldexpf(1023.5f, -24),
                                ldexpf(1022.5f, -24),
                                1.0f + ldexpf(1.0f, -11),
                                1.0f + ldexpf(3.0f, -11),
                                nextafterf(1.0f + ldexpf(1.0f, -11), 2.0f),
                                2049.0f,
                                2051.0f,
                                0.1f,
                                1.0f / 3.0f,
                                0.0f,
                                3.4028235e38f,
                                1e-45f,
                                INFINITY,
                                NAN,
                                bits_float(0x7f800001u), /* a signalling NaN */
                                bits_float(0x7fffffffu)};
    const size_t count = edges.size();
    for (size_t i = 0; i < count; i++) edges.push_back(-edges[i]);

    mismatches = 0;
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) check_float_to_half(bits_float((uint32_t)bits), mismatches);
    for (float f : edges) check_float_to_half(f, mismatches);
    CHECK(mismatches == 0, "__float2half_rn differs from %s for %d floats", REFERENCE, mismatches);

    mismatches = 0;
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) check_float_to_bfloat16(bits_float((uint32_t)bits), mismatches);
    for (float f : edges) check_float_to_bfloat16(f, mismatches);
    for (float f : {3.3895314e38f, 3.3961775e38f, 3.4028235e38f, 1.00390625f, 1.01171875f, 1.0078125f})
        for (float signed_f : {f, -f}) check_float_to_bfloat16(signed_f, mismatches); /* near the largest bfloat16, and ties */
    CHECK(mismatches == 0, "__float2bfloat16_rn differs from round to nearest even for %d floats", mismatches);

    mismatches = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = __bfloat162float(__nv_bfloat16{(unsigned short)h});
        if (float_bits(f) != h << 16) detail(mismatches, "__bfloat162float(0x%04x) = 0x%08x", h, float_bits(f));
    }
    CHECK(mismatches == 0, "__bfloat162float is not the upper half of the float for %d values", mismatches);
}

/* ----------------------------------------------------------------- 2. block barrier ---- */

/* Each thread writes shared memory, then reads what its neighbour wrote, overwrites its own slot
 * after a second barrier and reads the other neighbour's new value after a third: any barrier
 * that let a thread through early shows as a stale or future value. */
__global__ void neighbour_kernel(int * out) {
    __shared__ int values[1024];
    const int n = (int)(blockDim.x * blockDim.y * blockDim.z);
    const int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    values[t] = 1 + t + 10000 * (int)blockIdx.x;
    __syncthreads();
    const int next = values[(t + 1) % n];
    __syncthreads();
    values[t] = 2 * next;
    __syncthreads();
    int * mine = out + 3 * ((int)blockIdx.x * n + t);
    mine[0] = next;
    mine[1] = values[(t + n - 1) % n];
    mine[2] = (int)(threadIdx.x | threadIdx.y << 10 | threadIdx.z << 20);
}

/* The kernels' int-to-float conversion without I2F (kernels/quant.cuh) against the C conversion,
 * for every value it is documented for. */
static void test_small_int_to_float() {
    int mismatches = 0;
    for (int32_t v = -(1 << 22) + 1; v < (1 << 22); v++) {
        const float got = memra_cuda_kernels::small_int_to_float(v);
        if (float_bits(got) == float_bits((float)v)) continue;
        detail(mismatches, "small_int_to_float(%d) = %a, (float)%d = %a", v, (double)got, v, (double)(float)v);
    }
    CHECK(mismatches == 0, "small_int_to_float differs from (float)v for %d values of |v| < 2^22", mismatches);
}

static void test_block_barrier() {
    const dim3 shapes[] = {dim3(96), dim3(1024), dim3(16, 8), dim3(8, 4, 4), dim3(1), dim3(33)};
    const int blocks = 3;
    for (const dim3 & shape : shapes) {
        const int n = (int)(shape.x * shape.y * shape.z);
        std::vector<int> out((size_t)3 * blocks * n, -1);
        MEMRA_LAUNCH(blocks, shape, 0, 0, neighbour_kernel)(out.data());
        EXPECT_LAUNCH_OK("neighbour_kernel");
        int mismatches = 0;
        for (int b = 0; b < blocks; b++) {
            for (int t = 0; t < n; t++) {
                const int * got = &out[3 * ((size_t)b * n + t)];
                const int next = 1 + (t + 1) % n + 10000 * b, previous = 2 * (1 + t + 10000 * b);
                const int x = t % (int)shape.x, y = t / (int)shape.x % (int)shape.y, z = t / (int)(shape.x * shape.y);
                const int coordinates = x | y << 10 | z << 20;
                if (got[0] != next || got[1] != previous || got[2] != coordinates)
                    detail(mismatches, "block %d thread %d: (%d, %d, 0x%x), expected (%d, %d, 0x%x)", b, t, got[0], got[1], got[2], next, previous, coordinates);
            }
        }
        CHECK(mismatches == 0, "__syncthreads in blocks of (%u, %u, %u): %d wrong threads", shape.x, shape.y, shape.z, mismatches);
    }
}

/* Each block's place in the launch's order of blocks (a ticket), by linear block index. */
__global__ void block_order_kernel(int * counter, int * place) {
    if (threadIdx.x == 0) place[(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x] = atomicAdd(counter, 1);
}

/* Blocks run in index order, last first, or shuffled, as MEMRA_CUDA_EMULATOR_SCHEDULE says (run.sh
 * runs this program under each): every block exactly once either way. */
static void test_block_order() {
    const char * named = getenv("MEMRA_CUDA_EMULATOR_SCHEDULE");
    const std::string schedule = named ? named : "forward";
    const dim3 grid(5, 3, 2);
    const int count = 30;
    std::vector<int> place(count, -1);
    int counter = 0;
    MEMRA_LAUNCH(grid, 64, 0, 0, block_order_kernel)(&counter, place.data());
    EXPECT_LAUNCH_OK("block_order_kernel");
    std::vector<int> sorted(place);
    std::sort(sorted.begin(), sorted.end());
    bool permutation = counter == count;
    for (int i = 0; i < count; i++) permutation = permutation && sorted[i] == i;
    CHECK(permutation, "blocks of a (5, 3, 2) grid: each runs once (%d ran)", counter);
    int forward = 0, reverse = 0;
    for (int i = 0; i < count; i++) {
        forward += place[i] == i;
        reverse += place[i] == count - 1 - i;
    }
    if (schedule == "reverse") CHECK(reverse == count, "schedule reverse: the last block first (%d of %d in place)", reverse, count);
    else if (schedule == "random") CHECK(forward < count && reverse < count, "schedule random: the blocks shuffled (%d in index order)", forward);
    else CHECK(forward == count, "schedule forward: blocks in index order (%d of %d in place)", forward, count);
}

/* Dynamic shared memory: unwritten, it reads as the emulator's NaN pattern (refilled for every
 * block); written, it is shared by the block. */
__global__ void dynamic_shared_kernel(float * out) {
    MEMRA_DYNAMIC_SHARED(float, buffer);
    const int t = (int)threadIdx.x, n = (int)blockDim.x;
    const float before = buffer[t];
    __syncthreads();
    buffer[t] = (float)(t + n * (int)blockIdx.x);
    __syncthreads();
    out[2 * (blockIdx.x * n + t)] = before;
    out[2 * (blockIdx.x * n + t) + 1] = buffer[(t + 1) % n];
}

static void test_dynamic_shared() {
    const int n = 64, blocks = 2;
    std::vector<float> out(2 * n * blocks, 0.0f);
    MEMRA_LAUNCH(blocks, n, n * sizeof(float), 0, dynamic_shared_kernel)(out.data());
    EXPECT_LAUNCH_OK("dynamic_shared_kernel");
    int mismatches = 0;
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < n; t++)
            if (!isnan(out[2 * (b * n + t)]) || out[2 * (b * n + t) + 1] != (float)((t + 1) % n + n * b))
                detail(mismatches, "block %d thread %d: before %g, neighbour %g", b, t, (double)out[2 * (b * n + t)], (double)out[2 * (b * n + t) + 1]);
    CHECK(mismatches == 0, "dynamic shared memory: %d wrong threads", mismatches);
}

/* ------------------------------------------------------------- 3. exited threads ---- */

__device__ static bool leaves_early(int t, int n, int mode) {
    switch (mode) {
        case 0: return t < n / 2;  /* they exit before the others reach the barrier */
        case 1: return t >= n / 2; /* after the others wait at it */
        default: return t % 3 == 1;
    }
}

/* Half the threads return at once; the rest pass two barriers, exchanging values with the next
 * thread that stayed. */
__global__ void early_exit_kernel(int * out, int mode) {
    __shared__ int values[1024];
    const int t = (int)threadIdx.x, n = (int)blockDim.x;
    if (leaves_early(t, n, mode)) return;
    values[t] = 7 * t + 1;
    __syncthreads();
    int partner = t;
    do partner = (partner + 1) % n;
    while (leaves_early(partner, n, mode));
    const int read = values[partner];
    __syncthreads();
    values[t] = -read;
    out[t] = read;
}

static void test_exited_threads() {
    for (int n : {96, 128, 1024}) {
        for (int mode = 0; mode < 3; mode++) {
            std::vector<int> out(n, 0);
            MEMRA_LAUNCH(2, n, 0, 0, early_exit_kernel)(out.data(), mode);
            EXPECT_LAUNCH_OK("early_exit_kernel");
            int mismatches = 0;
            for (int t = 0; t < n; t++) {
                int expected = 0;
                if (!leaves_early(t, n, mode)) {
                    int partner = t;
                    do partner = (partner + 1) % n;
                    while (leaves_early(partner, n, mode));
                    expected = 7 * partner + 1;
                }
                if (out[t] != expected) detail(mismatches, "thread %d: %d, expected %d", t, out[t], expected);
            }
            CHECK(mismatches == 0, "barriers after early exits (block %d, mode %d): %d wrong threads", n, mode, mismatches);
        }
    }
}

/* -------------------------------------------------------------- 4. warp collectives ---- */

/* The lane each shuffle reads, as CUDA's programming guide specifies them: width splits the warp
 * into segments; __shfl_sync reads srcLane modulo width in the caller's segment; __shfl_up_sync
 * and __shfl_down_sync keep the caller's value when the source lies outside its segment;
 * __shfl_xor_sync may read earlier segments but keeps its own value for later ones. */
static int idx_source(int lane, int source, int width) { return lane / width * width + (source & (width - 1)); }
static int down_source(int lane, int delta, int width) { return (lane + delta) / width == lane / width ? lane + delta : lane; }
static int up_source(int lane, int delta, int width) { return lane - delta >= 0 && (lane - delta) / width == lane / width ? lane - delta : lane; }
static int xor_source(int lane, int lane_mask, int width) { return (lane ^ lane_mask) / width > lane / width ? lane : lane ^ lane_mask; }

static int64_t lane_value(int t) { return (int64_t)(t * t * 37 + 11) ^ ((int64_t)t << 40); }

enum shuffle_case {
    SHFL_IDX_7,
    SHFL_IDX_37,
    SHFL_IDX_REVERSE,
    SHFL_IDX_W8_3,
    SHFL_IDX_W8_11,
    SHFL_IDX_W16_NEGATIVE,
    SHFL_DOWN_5,
    SHFL_DOWN_W16_3,
    SHFL_DOWN_W8_3,
    SHFL_DOWN_0,
    SHFL_UP_3,
    SHFL_UP_W16_5,
    SHFL_UP_W4_1,
    SHFL_XOR_1,
    SHFL_XOR_W8_4,
    SHFL_XOR_W8_8,
    SHFL_XOR_W4_16,
    SHFL_CASES
};
static const char * const shuffle_case_names[SHFL_CASES] = {
    "__shfl_sync(src 7)",
    "__shfl_sync(src 37)",
    "__shfl_sync(src 31 - lane)",
    "__shfl_sync(src 3, width 8)",
    "__shfl_sync(src 11, width 8)",
    "__shfl_sync(src -1, width 16)",
    "__shfl_down_sync(5)",
    "__shfl_down_sync(3, width 16)",
    "__shfl_down_sync(3, width 8)",
    "__shfl_down_sync(0)",
    "__shfl_up_sync(3)",
    "__shfl_up_sync(5, width 16)",
    "__shfl_up_sync(1, width 4)",
    "__shfl_xor_sync(1)",
    "__shfl_xor_sync(4, width 8)",
    "__shfl_xor_sync(8, width 8)",
    "__shfl_xor_sync(16, width 4)",
};

static int expected_source(int which, int lane) {
    switch (which) {
        case SHFL_IDX_7: return idx_source(lane, 7, 32);
        case SHFL_IDX_37: return idx_source(lane, 37, 32);
        case SHFL_IDX_REVERSE: return idx_source(lane, 31 - lane, 32);
        case SHFL_IDX_W8_3: return idx_source(lane, 3, 8);
        case SHFL_IDX_W8_11: return idx_source(lane, 11, 8);
        case SHFL_IDX_W16_NEGATIVE: return idx_source(lane, -1, 16);
        case SHFL_DOWN_5: return down_source(lane, 5, 32);
        case SHFL_DOWN_W16_3: return down_source(lane, 3, 16);
        case SHFL_DOWN_W8_3: return down_source(lane, 3, 8);
        case SHFL_DOWN_0: return down_source(lane, 0, 32);
        case SHFL_UP_3: return up_source(lane, 3, 32);
        case SHFL_UP_W16_5: return up_source(lane, 5, 16);
        case SHFL_UP_W4_1: return up_source(lane, 1, 4);
        case SHFL_XOR_1: return xor_source(lane, 1, 32);
        case SHFL_XOR_W8_4: return xor_source(lane, 4, 8);
        case SHFL_XOR_W8_8: return xor_source(lane, 8, 8);
        default: return xor_source(lane, 16, 4);
    }
}

/* Every case shuffles an int, a float, a double and an int64 (out: 4 values per thread per case). */
template <typename T>
__device__ static T shuffle(int which, T v) {
    const unsigned full = 0xffffffffu;
    switch (which) {
        case SHFL_IDX_7: return __shfl_sync(full, v, 7);
        case SHFL_IDX_37: return __shfl_sync(full, v, 37);
        case SHFL_IDX_REVERSE: return __shfl_sync(full, v, 31 - (int)(threadIdx.x & 31));
        case SHFL_IDX_W8_3: return __shfl_sync(full, v, 3, 8);
        case SHFL_IDX_W8_11: return __shfl_sync(full, v, 11, 8);
        case SHFL_IDX_W16_NEGATIVE: return __shfl_sync(full, v, -1, 16);
        case SHFL_DOWN_5: return __shfl_down_sync(full, v, 5);
        case SHFL_DOWN_W16_3: return __shfl_down_sync(full, v, 3, 16);
        case SHFL_DOWN_W8_3: return __shfl_down_sync(full, v, 3, 8);
        case SHFL_DOWN_0: return __shfl_down_sync(full, v, 0);
        case SHFL_UP_3: return __shfl_up_sync(full, v, 3);
        case SHFL_UP_W16_5: return __shfl_up_sync(full, v, 5, 16);
        case SHFL_UP_W4_1: return __shfl_up_sync(full, v, 1, 4);
        case SHFL_XOR_1: return __shfl_xor_sync(full, v, 1);
        case SHFL_XOR_W8_4: return __shfl_xor_sync(full, v, 4, 8);
        case SHFL_XOR_W8_8: return __shfl_xor_sync(full, v, 8, 8);
        default: return __shfl_xor_sync(full, v, 16, 4);
    }
}

__global__ void shuffle_kernel(int64_t * out) {
    const int t = (int)threadIdx.x;
    const int64_t v = lane_value(t);
    for (int which = 0; which < SHFL_CASES; which++) {
        int64_t * mine = out + ((size_t)which * blockDim.x + t) * 4;
        mine[0] = shuffle(which, (int)v);
        mine[1] = (int64_t)(shuffle(which, (float)v) * 4.0f);
        const double d = shuffle(which, (double)v + 0.25);
        memcpy(&mine[2], &d, 8);
        mine[3] = shuffle(which, v);
    }
}

/* Reductions and votes: a butterfly sum (every lane ends with the warp's sum), a shuffle of a
 * __half2, the votes over the full warp and over half a warp, and lanes that take part in
 * different collectives: half-warp shuffles with different masks at the same time, then the full
 * warp again (each lane's history of collectives differs, the values must still meet). */
__global__ void reduce_vote_kernel(int64_t * out) {
    const int t = (int)threadIdx.x, lane = t & 31;
    int64_t * mine = out + (size_t)t * 16;
    int sum = t + 1;
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    mine[0] = sum;
    double dsum = 1.0 / (t + 1);
    for (int offset = 1; offset < 32; offset <<= 1) dsum += __shfl_xor_sync(0xffffffffu, dsum, offset);
    memcpy(&mine[1], &dsum, 8);
    const __half2 h = __shfl_down_sync(0xffffffffu, __floats2half2_rn((float)t, (float)-t), 1);
    mine[2] = (int64_t)__low2float(h) * 1000 + (int64_t)__high2float(h);
    mine[3] = __ballot_sync(0xffffffffu, lane % 3 == 0);
    /* One collective per statement: every lane calls them in the same order. */
    mine[4] = __any_sync(0xffffffffu, lane == 17);
    mine[4] |= __any_sync(0xffffffffu, 0) << 1;
    mine[4] |= __all_sync(0xffffffffu, lane < 32) << 2;
    mine[4] |= __all_sync(0xffffffffu, lane != 5) << 3;
    if (lane < 16) {
        mine[5] = __ballot_sync(0x0000ffffu, lane & 1);
        mine[6] = __all_sync(0x0000ffffu, 1);
        mine[6] |= __any_sync(0x0000ffffu, lane == 20) << 1;
    } else {
        mine[5] = __ballot_sync(0xffff0000u, lane >= 24);
        mine[6] = 0;
    }
    int swapped = 100 + t;
    if (lane < 16) swapped = __shfl_xor_sync(0x0000ffffu, swapped, 1);
    else swapped = __shfl_xor_sync(0xffff0000u, swapped, 2);
    if (lane < 8) swapped += 1000 * __shfl_sync(0x000000ffu, swapped, 7);
    __syncwarp(lane < 16 ? 0x0000ffffu : 0xffff0000u);
    mine[7] = swapped;
    int64_t total = swapped;
    for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
    mine[8] = total;
    mine[9] = __shfl_down_sync(0xffffffffu, swapped, 1);
}

static void test_warp_collectives() {
    const int n = 64; /* two warps */
    {
        std::vector<int64_t> out((size_t)SHFL_CASES * n * 4, -1);
        MEMRA_LAUNCH(1, n, 0, 0, shuffle_kernel)(out.data());
        EXPECT_LAUNCH_OK("shuffle_kernel");
        for (int which = 0; which < SHFL_CASES; which++) {
            int mismatches = 0;
            for (int t = 0; t < n; t++) {
                const int source = (t & ~31) + expected_source(which, t & 31);
                const int64_t v = lane_value(source);
                const double d = (double)v + 0.25;
                const int64_t * got = &out[((size_t)which * n + t) * 4];
                double got_d;
                memcpy(&got_d, &got[2], 8);
                if (got[0] != (int)v || got[1] != (int64_t)((float)v * 4.0f) || got_d != d || got[3] != v)
                    detail(mismatches, "thread %d: (%lld, %lld, %.17g, %lld), expected lane %d's (%d, %lld, %.17g, %lld)", t, (long long)got[0],
                           (long long)got[1], got_d, (long long)got[3], source & 31, (int)v, (long long)((float)v * 4.0f), d, (long long)v);
            }
            CHECK(mismatches == 0, "%s: %d wrong threads", shuffle_case_names[which], mismatches);
        }
    }
    std::vector<int64_t> out((size_t)n * 16, -1);
    MEMRA_LAUNCH(1, n, 0, 0, reduce_vote_kernel)(out.data());
    EXPECT_LAUNCH_OK("reduce_vote_kernel");
    int64_t swapped[64];
    for (int t = 0; t < n; t++) {
        const int lane = t & 31;
        swapped[t] = 100 + (lane < 16 ? (t ^ 1) : (t ^ 2));
    }
    for (int t = 0; t < n; t++)
        if ((t & 31) < 8) swapped[t] += 1000 * swapped[(t & ~31) + 7];
    const char * const names[] = {
        "__shfl_xor_sync butterfly sum (int)",
        "__shfl_xor_sync butterfly sum (double)",
        "__shfl_down_sync of a __half2",
        "__ballot_sync",
        "__any_sync / __all_sync",
        "__ballot_sync with half-warp masks",
        "__all_sync / __any_sync with a half-warp mask",
        "half-warp shuffles with different masks",
        "full-warp sum after half-warp collectives",
        "full-warp __shfl_down_sync after half-warp collectives",
    };
    for (int item = 0; item < 10; item++) {
        int mismatches = 0;
        for (int t = 0; t < n; t++) {
            const int lane = t & 31, warp = t & ~31;
            int64_t expected = 0;
            switch (item) {
                case 0: expected = 32 * warp + 528; break; /* Σ (warp + lane + 1) over the 32 lanes */
                case 1: {
                    /* every lane adds the same values in the same butterfly order as its partners
                     * did: the sum is the warp's, in the order lane 0's tree adds them */
                    double partial[32];
                    for (int l = 0; l < 32; l++) partial[l] = 1.0 / (warp + l + 1);
                    for (int offset = 1; offset < 32; offset <<= 1) {
                        double next[32];
                        for (int l = 0; l < 32; l++) next[l] = partial[l] + partial[l ^ offset];
                        memcpy(partial, next, sizeof partial);
                    }
                    memcpy(&expected, &partial[lane], 8);
                    break;
                }
                case 2: {
                    const int source = down_source(lane, 1, 32) + warp;
                    expected = (int64_t)source * 1000 - source;
                    break;
                }
                case 3: expected = 0x49249249u; break;
                case 4: expected = 1 | 0 << 1 | 1 << 2 | 0 << 3; break;
                case 5: expected = lane < 16 ? 0x0000aaaau : 0xff000000u; break;
                case 6: expected = lane < 16 ? 1 : 0; break;
                case 7: expected = swapped[t]; break;
                case 8: {
                    int64_t total = 0;
                    for (int l = 0; l < 32; l++) total += swapped[warp + l];
                    expected = total;
                    break;
                }
                default: expected = swapped[warp + down_source(lane, 1, 32)]; break;
            }
            const int64_t got = out[(size_t)t * 16 + item];
            if (got != expected) detail(mismatches, "thread %d: %lld (0x%llx), expected %lld (0x%llx)", t, (long long)got, (unsigned long long)got, (long long)expected, (unsigned long long)expected);
        }
        CHECK(mismatches == 0, "%s: %d wrong threads", names[item], mismatches);
    }
}

/* ------------------------------------------------------------ 5. errors, not hangs ---- */

__global__ void exited_lane_shuffle_kernel(int * out) {
    if (threadIdx.x == 0) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

/* Lane 0 leaves only after the others wait for it in a full-warp shuffle (lane 1 lets it go). */
__global__ void late_exit_shuffle_kernel(int * out) {
    const int lane = (int)threadIdx.x;
    if (lane < 2) out[lane] = __shfl_sync(0x3u, lane, 1 - lane);
    if (lane == 0) return;
    out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
}

/* Lane 5 of warp 0 waits at the block barrier, the other lanes of warp 0 in __syncwarp for it,
 * warp 1 at the block barrier for them: nobody can move. */
__global__ void deadlock_kernel(int * out) {
    if (threadIdx.x == 5 || threadIdx.x >= 32) __syncthreads();
    else __syncwarp();
    out[threadIdx.x] = 1;
}

__global__ void outside_mask_kernel(int * out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, (int)threadIdx.x, 20);
}

__global__ void exited_lane_mma_kernel(float * out) {
    if (threadIdx.x == 0) return;
    const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    memra_emu::mma_m16n8k16_f16_f32(c, a, b);
    out[threadIdx.x] = c[0];
}

__global__ void trivial_kernel(int * out) { out[blockIdx.x * blockDim.x + threadIdx.x] = (int)(blockIdx.x * 1000 + threadIdx.x); }
/* trivial_kernel again: a kernel of its own for cudaFuncSetAttribute. */
__global__ void opted_in_kernel(int * out) { out[blockIdx.x * blockDim.x + threadIdx.x] = (int)(blockIdx.x * 1000 + threadIdx.x); }

static bool contains(const char * text, const char * part) { return text && strstr(text, part) != nullptr; }

/* The launch failed with `expected` and a message containing `part`; the error was cleared by
 * reading it; the message stays available for the code, as the library formats it after reading. */
static void expect_launch_error(int line, const char * what, cudaError_t expected, const char * part) {
    const cudaError_t error = cudaGetLastError();
    const char * message = cudaGetErrorString(error);
    check(error == expected, line, "%s: cudaGetLastError() = %s (%s), expected %s", what, cudaGetErrorName(error), message, cudaGetErrorName(expected));
    if (part) check(contains(message, part), line, "%s: message \"%s\" does not mention \"%s\"", what, message, part);
    const cudaError_t after = cudaGetLastError();
    check(after == cudaSuccess, line, "%s: the error is not cleared by reading it (then %s)", what, cudaGetErrorName(after));
}
#define EXPECT_LAUNCH_ERROR(what, expected, part) expect_launch_error(__LINE__, what, expected, part)

/* A kernel that runs right after a failed one: the emulator recovers (abandoned fibers and
 * half-finished collectives leave nothing behind). */
static void expect_recovered(int line, const char * after) {
    std::vector<int> out(4 * 96, -1);
    MEMRA_LAUNCH(4, 96, 0, 0, trivial_kernel)(out.data());
    const cudaError_t error = cudaGetLastError();
    check(error == cudaSuccess, line, "a launch after %s failed: %s", after, cudaGetErrorString(error));
    int mismatches = 0;
    for (int i = 0; i < 4 * 96; i++)
        if (out[i] != i / 96 * 1000 + i % 96) mismatches++;
    check(mismatches == 0, line, "a launch after %s: %d wrong threads", after, mismatches);
}
#define EXPECT_RECOVERED(after) expect_recovered(__LINE__, after)

static void test_errors() {
    std::vector<int> out(1024, 0);
    std::vector<float> floats(1024, 0.0f);

    MEMRA_LAUNCH(1, 32, 0, 0, exited_lane_shuffle_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("a shuffle naming an exited lane", cudaErrorLaunchFailure, "0xffffffff");
    EXPECT_RECOVERED("a shuffle naming an exited lane");

    MEMRA_LAUNCH(1, 32, 0, 0, late_exit_shuffle_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("a lane exiting while the warp waits for it", cudaErrorLaunchFailure, "exited while");
    EXPECT_RECOVERED("a lane exiting while the warp waits for it");

    MEMRA_LAUNCH(2, 64, 0, 0, deadlock_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("a deadlock", cudaErrorLaunchFailure, "deadlock");
    EXPECT_RECOVERED("a deadlock");

    MEMRA_LAUNCH(1, 32, 0, 0, outside_mask_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("a shuffle from a lane outside the mask", cudaErrorLaunchFailure, "not in the mask");
    EXPECT_RECOVERED("a shuffle from a lane outside the mask");

    MEMRA_LAUNCH(1, 32, 0, 0, exited_lane_mma_kernel)(floats.data());
    /* lanes in index order reach the mma after lane 0 has exited (the mma names itself); in another
     * order lane 0 may exit while the others wait in it */
    const char * schedule = getenv("MEMRA_CUDA_EMULATOR_SCHEDULE");
    const bool forward = !schedule || (strcmp(schedule, "reverse") != 0 && strcmp(schedule, "random") != 0);
    EXPECT_LAUNCH_ERROR("mma with an exited lane", cudaErrorLaunchFailure, forward ? "mma.sync" : "exited");
    EXPECT_RECOVERED("mma with an exited lane");

    MEMRA_LAUNCH(1, 1025, 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("a block of 1025 threads", cudaErrorInvalidConfiguration, "1025");
    MEMRA_LAUNCH(1, dim3(32, 32, 2), 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("a block of 32 × 32 × 2 threads", cudaErrorInvalidConfiguration, nullptr);
    MEMRA_LAUNCH(1, dim3(1, 1, 65), 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("block.z 65", cudaErrorInvalidConfiguration, nullptr);
    MEMRA_LAUNCH(dim3(1, 65536), 32, 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("grid.y 65536", cudaErrorInvalidConfiguration, "65536");
    MEMRA_LAUNCH(dim3(1, 1, 65536), 32, 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("grid.z 65536", cudaErrorInvalidConfiguration, nullptr);
    MEMRA_LAUNCH(0, 32, 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("an empty grid", cudaErrorInvalidConfiguration, nullptr);
    MEMRA_LAUNCH(1, 0, 0, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("an empty block", cudaErrorInvalidConfiguration, nullptr);
    MEMRA_LAUNCH(1, 32, 48 * 1024 + 4, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("48 KiB + 4 of dynamic shared memory", cudaErrorInvalidValue, nullptr);
    MEMRA_LAUNCH(1, 32, 48 * 1024, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_OK("a launch with 48 KiB of dynamic shared memory");
    /* more, once cudaFuncSetAttribute has raised that kernel's limit (and only that kernel's), up to 227 KiB */
    MEMRA_LAUNCH(1, 32, 140 * 1024, 0, opted_in_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("140 KiB of dynamic shared memory before opting in", cudaErrorInvalidValue, "over its limit");
    CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(opted_in_kernel), cudaFuncAttributeMaxDynamicSharedMemorySize, 140 * 1024) == cudaSuccess,
          "cudaFuncSetAttribute of 140 KiB");
    MEMRA_LAUNCH(1, 32, 140 * 1024, 0, opted_in_kernel)(out.data());
    EXPECT_LAUNCH_OK("140 KiB of dynamic shared memory after opting in");
    MEMRA_LAUNCH(1, 32, 140 * 1024 + 4, 0, opted_in_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("past the raised limit", cudaErrorInvalidValue, "over its limit");
    MEMRA_LAUNCH(1, 32, 140 * 1024, 0, trivial_kernel)(out.data());
    EXPECT_LAUNCH_ERROR("another kernel's limit stays 48 KiB", cudaErrorInvalidValue, "over its limit");
    CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(opted_in_kernel), cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) == cudaErrorInvalidValue,
          "cudaFuncSetAttribute past 227 KiB");
    cudaGetLastError();
    EXPECT_RECOVERED("invalid configurations");

    /* cudaPeekAtLastError leaves the error for cudaGetLastError. */
    MEMRA_LAUNCH(1, 2048, 0, 0, trivial_kernel)(out.data());
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration, "cudaPeekAtLastError after a bad launch");
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration, "cudaPeekAtLastError cleared the error");
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "cudaGetLastError after cudaPeekAtLastError");
    CHECK(cudaGetLastError() == cudaSuccess, "cudaGetLastError twice");
}

/* ---------------------------------------------------------------------- 6. mma ---- */

/* ldmatrix.x4 from rows placed out of order in shared memory: lane l names row l & 7 of matrix
 * l >> 3, and gets word l & 3 of row l >> 2 of matrix i in r[i]. Byte b of row j of matrix i holds
 * 16 (8i + j) + b (mod 256), so a word says where it came from. */
__global__ void ldmatrix_kernel(uint32_t * out, int misalign) {
    __shared__ __align__(16) unsigned char rows[32 * 16];
    const int lane = (int)threadIdx.x;
    for (int b = 0; b < 16; b++) rows[lane * 16 + b] = (unsigned char)(16 * lane + b);
    __syncwarp();
    const int placed = (lane * 13 + 5) & 31; /* row (matrix l >> 3, row l & 7) is rows[placed], placed = 13 (8i + j) + 5 mod 32 */
    uint32_t r[4];
    memra_emu::ldmatrix_x4(r, rows + ((placed * 13 + 5) & 31) * 16 + (misalign && lane == 3 ? 4 : 0));
    for (int i = 0; i < 4; i++) out[lane * 4 + i] = r[i];
}

static void test_ldmatrix() {
    /* lane l's address: rows[p(p(l))] with p(x) = 13x + 5 mod 32, whose contents name row p(p(l)) */
    std::vector<uint32_t> out(128, 0);
    MEMRA_LAUNCH(1, 32, 0, 0, ldmatrix_kernel)(out.data(), 0);
    EXPECT_LAUNCH_OK("ldmatrix_kernel");
    int mismatches = 0;
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            const int giver = 8 * i + (lane >> 2), p1 = (giver * 13 + 5) & 31, stored = (p1 * 13 + 5) & 31, word = lane & 3;
            uint32_t expected = 0;
            for (int b = 0; b < 4; b++) expected |= (uint32_t)(unsigned char)(16 * stored + 4 * word + b) << (8 * b);
            if (out[lane * 4 + i] != expected) detail(mismatches, "lane %d r[%d] = 0x%08x, expected 0x%08x", lane, i, out[lane * 4 + i], expected);
        }
    CHECK(mismatches == 0, "ldmatrix.x4: %d wrong words", mismatches);
    MEMRA_LAUNCH(1, 32, 0, 0, ldmatrix_kernel)(out.data(), 1);
    EXPECT_LAUNCH_ERROR("ldmatrix from an unaligned row", cudaErrorLaunchFailure, "16-byte aligned");
    EXPECT_RECOVERED("ldmatrix from an unaligned row");
}

/* cp.async: thread t copies 16 bytes (group 0), 8 bytes with no source bytes (zeros, group 1) and 4
 * bytes (group 2) into dynamic shared memory, and reads its destinations back before any wait, after
 * wait_group 2 (group 0 landed), 1 and 0. Dynamic shared memory starts as the 0xff pattern. */
__global__ void cp_async_kernel(const uint32_t * source, uint32_t * out, int bad) {
    MEMRA_DYNAMIC_SHARED(uint32_t, shared);
    const int t = (int)threadIdx.x;
    uint32_t * wide = shared + 4 * t, * pair = shared + 128 + 2 * t, * single = shared + 192 + t;
    if (bad == 1) memra_emu::cp_async(shared + 1, source, 16, 16); /* misaligned destination */
    if (bad == 2) memra_emu::cp_async(wide, source, 16, 17);       /* more source bytes than copied */
    memra_emu::cp_async(wide, source + 4 * t, 16, 16);
    memra_emu::cp_async_commit();
    memra_emu::cp_async(pair, source + 2 * t, 8, 0);
    memra_emu::cp_async_commit();
    memra_emu::cp_async(single, source + 100 + t, 4, 4);
    memra_emu::cp_async_commit();
    uint32_t * o = out + 16 * t;
    o[0] = wide[0], o[1] = pair[0], o[2] = single[0];
    memra_emu::cp_async_wait(2);
    o[3] = wide[0], o[4] = wide[3], o[5] = pair[1], o[6] = single[0];
    memra_emu::cp_async_wait(1);
    o[7] = pair[0], o[8] = pair[1], o[9] = single[0];
    memra_emu::cp_async_wait(0);
    o[10] = single[0];
    __syncthreads();
    o[11] = shared[4 * ((t + 1) % 32)]; /* a neighbour's copy, after its wait and a barrier */
}

static void test_cp_async() {
    std::vector<uint32_t> source(160), out(16 * 32, 7);
    for (size_t i = 0; i < source.size(); i++) source[i] = 0x1000u + (uint32_t)i;
    MEMRA_LAUNCH(1, 32, 256 * 4, 0, cp_async_kernel)(source.data(), out.data(), 0);
    EXPECT_LAUNCH_OK("cp_async_kernel");
    int mismatches = 0;
    for (int t = 0; t < 32; t++) {
        const uint32_t * o = out.data() + 16 * t;
        const uint32_t expected[12] = {0xffffffffu, 0xffffffffu, 0xffffffffu, source[4 * t], source[4 * t + 3], 0xffffffffu, 0xffffffffu,
                                       0u,          0u,          0xffffffffu, source[100 + t], source[4 * ((t + 1) % 32)]};
        for (int i = 0; i < 12; i++)
            if (o[i] != expected[i]) detail(mismatches, "thread %d read %d: 0x%08x, expected 0x%08x", t, i, o[i], expected[i]);
    }
    CHECK(mismatches == 0, "cp.async lands at its wait_group: %d wrong reads", mismatches);
    MEMRA_LAUNCH(1, 32, 256 * 4, 0, cp_async_kernel)(source.data(), out.data(), 1);
    EXPECT_LAUNCH_ERROR("cp.async to a misaligned destination", cudaErrorLaunchFailure, "not aligned");
    MEMRA_LAUNCH(1, 32, 256 * 4, 0, cp_async_kernel)(source.data(), out.data(), 2);
    EXPECT_LAUNCH_ERROR("cp.async of more source bytes than it copies", cudaErrorLaunchFailure, "at most all");
    EXPECT_RECOVERED("bad cp.async");
}

static uint32_t pack_halves(float low, float high) { return (uint32_t)__half_as_ushort(__float2half_rn(low)) | (uint32_t)__half_as_ushort(__float2half_rn(high)) << 16; }

/* Warp w accumulates C_w += A_w,0 · B_w,0 + A_w,1 · B_w,1 with the fragments of the PTX ISA's
 * m16n8k16 layout: A 16 × 16 row-major, B 16 × 8 stored k-major (B[k][n] at k · 8 + n), C 16 × 8.
 * With `diverge`, lanes 0..15 first meet in a __syncwarp of their own, so that the lanes arrive at
 * the mma with different histories of collectives. */
__global__ void mma_kernel(const float * a, const float * b, float * c, int diverge) {
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, group = lane >> 2, quad = lane & 3;
    if (diverge && lane < 16) __syncwarp(0x0000ffffu);
    float * C = c + warp * 128;
    float accumulator[4] = {C[group * 8 + 2 * quad], C[group * 8 + 2 * quad + 1], C[(group + 8) * 8 + 2 * quad], C[(group + 8) * 8 + 2 * quad + 1]};
    for (int step = 0; step < 2; step++) {
        const float * A = a + (warp * 2 + step) * 256;
        const float * B = b + (warp * 2 + step) * 128;
        const uint32_t fa[4] = {pack_halves(A[group * 16 + 2 * quad], A[group * 16 + 2 * quad + 1]),
                                pack_halves(A[(group + 8) * 16 + 2 * quad], A[(group + 8) * 16 + 2 * quad + 1]),
                                pack_halves(A[group * 16 + 2 * quad + 8], A[group * 16 + 2 * quad + 9]),
                                pack_halves(A[(group + 8) * 16 + 2 * quad + 8], A[(group + 8) * 16 + 2 * quad + 9])};
        const uint32_t fb[2] = {pack_halves(B[(2 * quad) * 8 + group], B[(2 * quad + 1) * 8 + group]),
                                pack_halves(B[(2 * quad + 8) * 8 + group], B[(2 * quad + 9) * 8 + group])};
        memra_emu::mma_m16n8k16_f16_f32(accumulator, fa, fb);
    }
    C[group * 8 + 2 * quad] = accumulator[0];
    C[group * 8 + 2 * quad + 1] = accumulator[1];
    C[(group + 8) * 8 + 2 * quad] = accumulator[2];
    C[(group + 8) * 8 + 2 * quad + 1] = accumulator[3];
}

/* The emulated f16 mma's rounding: every accumulator is c + A[i][0] · B[0][j] + ... + A[i][15] · B[15][j]
 * with each product and sum rounded to f32 in that order, for any finite halves (subnormals, zeros
 * of either sign, the largest), so that a change of the emulator's order or conversion shows. */
static void test_mma_rounding() {
    uint32_t state = 99;
    auto next = [&state]() {
        state = state * 1664525u + 1013904223u;
        return state >> 8;
    };
    auto finite_half = [&](bool subnormal) {
        uint16_t bits;
        do bits = (uint16_t)(subnormal ? next() & 0x83ffu : next());
        while ((bits & 0x7c00u) == 0x7c00u);
        return reference_half_to_float(bits); /* exact; mma_kernel's __float2half_rn gives the same bits back */
    };
    int mismatches = 0;
    for (int trial = 0; trial < 32; trial++) {
        /* mma_kernel with one warp: C += A_0 · B_0, then C += A_1 · B_1 */
        std::vector<float> a(2 * 256), b(2 * 128), c(128);
        for (float & v : a) v = finite_half(trial % 4 == 0); /* every 4th trial: subnormal A only */
        for (float & v : b) v = finite_half(false);
        for (float & v : c) v = (float)((int)(next() % 2001) - 1000) * 0.37f;
        std::vector<float> expected = c;
        for (int step = 0; step < 2; step++)
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 8; j++) {
                    float sum = expected[(size_t)i * 8 + j];
                    for (int k = 0; k < 16; k++) {
                        const float product = a[(size_t)step * 256 + i * 16 + k] * b[(size_t)step * 128 + k * 8 + j];
                        sum = sum + product;
                    }
                    expected[(size_t)i * 8 + j] = sum;
                }
        MEMRA_LAUNCH(1, 32, 0, 0, mma_kernel)(a.data(), b.data(), c.data(), 0);
        EXPECT_LAUNCH_OK("mma_kernel");
        for (int at = 0; at < 128; at++) {
            const bool both_nan = isnan(c[at]) && isnan(expected[at]);
            if (!both_nan && float_bits(c[at]) != float_bits(expected[at]))
                detail(mismatches, "trial %d C[%d][%d] = %a, in order %a", trial, at / 8, at % 8, (double)c[at], (double)expected[at]);
        }
    }
    CHECK(mismatches == 0, "mma m16n8k16 of full-range halves: %d accumulators differ from the in-order f32 sums", mismatches);
}

static uint32_t random_state = 12345;
static int small_random() { /* -8 .. 8: products and sums of 32 of them are exact in f16 inputs and f32 sums */
    random_state = random_state * 1103515245u + 12345u;
    return (int)(random_state >> 16) % 17 - 8;
}

static void test_mma() {
    for (int warps : {1, 4}) {
        for (int diverge = 0; diverge < 2; diverge++) {
            std::vector<float> a((size_t)warps * 2 * 256), b((size_t)warps * 2 * 128), c((size_t)warps * 128);
            for (float & v : a) v = (float)small_random();
            for (float & v : b) v = (float)small_random();
            for (float & v : c) v = (float)small_random();
            std::vector<float> expected = c;
            for (int w = 0; w < warps; w++)
                for (int step = 0; step < 2; step++)
                    for (int i = 0; i < 16; i++)
                        for (int j = 0; j < 8; j++) {
                            float sum = 0.0f;
                            for (int k = 0; k < 16; k++) sum += a[(size_t)(w * 2 + step) * 256 + i * 16 + k] * b[(size_t)(w * 2 + step) * 128 + k * 8 + j];
                            expected[(size_t)w * 128 + i * 8 + j] += sum;
                        }
            MEMRA_LAUNCH(1, 32 * warps, 0, 0, mma_kernel)(a.data(), b.data(), c.data(), diverge);
            EXPECT_LAUNCH_OK("mma_kernel");
            int mismatches = 0;
            for (int w = 0; w < warps; w++)
                for (int i = 0; i < 16; i++)
                    for (int j = 0; j < 8; j++) {
                        const size_t at = (size_t)w * 128 + i * 8 + j;
                        if (c[at] != expected[at]) detail(mismatches, "warp %d C[%d][%d] = %g, expected %g", w, i, j, (double)c[at], (double)expected[at]);
                    }
            CHECK(mismatches == 0, "mma m16n8k16 with %d warp(s)%s: %d wrong elements", warps, diverge ? " after a half-warp __syncwarp" : "", mismatches);
        }
    }
}

/* Warp w accumulates C_w += A_w,0 · B_w,0 + A_w,1 · B_w,1 in s32 with the fragments of the PTX
 * ISA's m16n8k32 .s8 layout: A 16 × 32 row-major int8, B 32 × 8 stored k-major (B[k][n] at
 * k · 8 + n), C 16 × 8. Each register packs 4 consecutive k values, the lowest byte first. */
static uint32_t pack_bytes(const int8_t * v, int stride) {
    uint32_t word = 0;
    for (int i = 0; i < 4; i++) word |= (uint32_t)(uint8_t)v[i * stride] << (8 * i);
    return word;
}

__global__ void mma_s8_kernel(const int8_t * a, const int8_t * b, int32_t * c, int diverge) {
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, group = lane >> 2, quad = lane & 3;
    if (diverge && lane >= 16) __syncwarp(0xffff0000u);
    int32_t * C = c + warp * 128;
    int32_t accumulator[4] = {C[group * 8 + 2 * quad], C[group * 8 + 2 * quad + 1], C[(group + 8) * 8 + 2 * quad], C[(group + 8) * 8 + 2 * quad + 1]};
    for (int step = 0; step < 2; step++) {
        const int8_t * A = a + (warp * 2 + step) * 512;
        const int8_t * B = b + (warp * 2 + step) * 256;
        const uint32_t fa[4] = {pack_bytes(A + group * 32 + 4 * quad, 1), pack_bytes(A + (group + 8) * 32 + 4 * quad, 1),
                                pack_bytes(A + group * 32 + 4 * quad + 16, 1), pack_bytes(A + (group + 8) * 32 + 4 * quad + 16, 1)};
        const uint32_t fb[2] = {pack_bytes(B + (4 * quad) * 8 + group, 8), pack_bytes(B + (4 * quad + 16) * 8 + group, 8)};
        memra_emu::mma_m16n8k32_s8_s32(accumulator, fa, fb);
    }
    C[group * 8 + 2 * quad] = accumulator[0];
    C[group * 8 + 2 * quad + 1] = accumulator[1];
    C[(group + 8) * 8 + 2 * quad] = accumulator[2];
    C[(group + 8) * 8 + 2 * quad + 1] = accumulator[3];
}

static int8_t random_code() { /* -128 .. 127 */
    random_state = random_state * 1103515245u + 12345u;
    return (int8_t)(uint8_t)(random_state >> 16);
}

/* The emulated int8 mma against a plain integer matrix product of random full-range codes (the
 * extremes -128 and 127 included), over two k-steps into a non-zero accumulator. */
static void test_mma_s8() {
    for (int warps : {1, 4}) {
        for (int diverge = 0; diverge < 2; diverge++) {
            std::vector<int8_t> a((size_t)warps * 2 * 512), b((size_t)warps * 2 * 256);
            std::vector<int32_t> c((size_t)warps * 128);
            for (int8_t & v : a) v = random_code();
            for (int8_t & v : b) v = random_code();
            a[0] = -128;
            b[0] = -128;
            a[1] = 127;
            b[8] = 127;
            for (int32_t & v : c) v = (int32_t)(random_state = random_state * 1103515245u + 12345u) >> 8;
            std::vector<int64_t> expected(c.begin(), c.end());
            for (int w = 0; w < warps; w++)
                for (int step = 0; step < 2; step++)
                    for (int i = 0; i < 16; i++)
                        for (int j = 0; j < 8; j++) {
                            int64_t sum = 0;
                            for (int k = 0; k < 32; k++) sum += (int64_t)a[(size_t)(w * 2 + step) * 512 + i * 32 + k] * b[(size_t)(w * 2 + step) * 256 + k * 8 + j];
                            expected[(size_t)w * 128 + i * 8 + j] += sum;
                        }
            MEMRA_LAUNCH(1, 32 * warps, 0, 0, mma_s8_kernel)(a.data(), b.data(), c.data(), diverge);
            EXPECT_LAUNCH_OK("mma_s8_kernel");
            int mismatches = 0;
            for (int w = 0; w < warps; w++)
                for (int i = 0; i < 16; i++)
                    for (int j = 0; j < 8; j++) {
                        const size_t at = (size_t)w * 128 + i * 8 + j;
                        if (c[at] != expected[at]) detail(mismatches, "warp %d C[%d][%d] = %d, expected %lld", w, i, j, c[at], (long long)expected[at]);
                    }
            CHECK(mismatches == 0, "mma m16n8k32 s8 with %d warp(s)%s: %d wrong elements", warps, diverge ? " after a half-warp __syncwarp" : "", mismatches);
        }
    }
}

/* ------------------------------------------------------------- 7. device memory ---- */

static void test_device_memory() {
    size_t free_before = 0, total = 0;
    CHECK(cudaMemGetInfo(&free_before, &total) == cudaSuccess && total > 0 && free_before <= total, "cudaMemGetInfo: free %zu of %zu", free_before, total);
    void * a = nullptr;
    void * b = nullptr;
    CHECK(cudaMalloc(&a, 1 << 20) == cudaSuccess && a != nullptr, "cudaMalloc of 1 MiB");
    CHECK(cudaMalloc(&b, 3 << 20) == cudaSuccess && b != nullptr, "cudaMalloc of 3 MiB");
    size_t free_after = 0;
    cudaMemGetInfo(&free_after, &total);
    CHECK(free_after + (4 << 20) <= free_before, "cudaMemGetInfo: free %zu after allocating 4 MiB, %zu before", free_after, free_before);

    std::vector<unsigned char> host(4 << 20, 0x5a);
    CHECK(cudaMemcpyAsync(b, host.data(), 3 << 20, cudaMemcpyHostToDevice, 0) == cudaSuccess, "cudaMemcpyAsync filling an allocation exactly");
    CHECK(cudaMemcpyAsync((char *)b + (3 << 20) - 8, host.data(), 16, cudaMemcpyHostToDevice, 0) == cudaErrorInvalidValue,
          "cudaMemcpyAsync HostToDevice overrunning an allocation by 8 bytes");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "the overrunning copy's error is the last error");
    CHECK(cudaGetLastError() == cudaSuccess, "the overrunning copy's error is cleared by reading it");
    CHECK(cudaMemcpy(host.data(), (char *)a + 16, 1 << 20, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "cudaMemcpy DeviceToHost overrunning an allocation");
    CHECK(cudaMemcpy(host.data(), host.data() + 16, 16, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue, "cudaMemcpy DeviceToDevice between host pointers");
    CHECK(cudaMemsetAsync((char *)a + 1, 0, 1 << 20, 0) == cudaErrorInvalidValue, "cudaMemsetAsync overrunning an allocation");
    CHECK(cudaMemcpy(a, b, 1 << 20, cudaMemcpyDeviceToDevice) == cudaSuccess && ((unsigned char *)a)[12345] == 0x5a, "cudaMemcpy DeviceToDevice");
    cudaGetLastError();

    int stack_value = 0;
    CHECK(cudaFree(&stack_value) == cudaErrorInvalidValue, "cudaFree of a host pointer");
    CHECK(cudaFree((char *)b + 256) == cudaErrorInvalidValue, "cudaFree of a pointer inside an allocation");
    CHECK(cudaFree(nullptr) == cudaSuccess, "cudaFree(NULL)");
    CHECK(cudaFree(a) == cudaSuccess, "cudaFree");
    CHECK(cudaFree(a) == cudaErrorInvalidValue, "cudaFree twice");
    CHECK(cudaMemcpyAsync(a, host.data(), 16, cudaMemcpyHostToDevice, 0) == cudaErrorInvalidValue, "cudaMemcpyAsync into a freed allocation");
    CHECK(cudaFree(b) == cudaSuccess, "cudaFree");
    cudaGetLastError();
    size_t free_end = 0;
    cudaMemGetInfo(&free_end, &total);
    CHECK(free_end == free_before, "cudaMemGetInfo: free %zu after freeing everything, %zu before", free_end, free_before);

    /* MEMRA_CUDA_EMULATOR_MEMORY_MB sizes the emulated device; it is read at every call. */
    setenv("MEMRA_CUDA_EMULATOR_MEMORY_MB", "64", 1);
    size_t free_limited = 0;
    cudaMemGetInfo(&free_limited, &total);
    CHECK(total == (size_t)64 << 20 && free_limited == total, "cudaMemGetInfo with a 64 MiB device: free %zu of %zu", free_limited, total);
    void * large = &stack_value;
    CHECK(cudaMalloc(&large, (size_t)100 << 20) == cudaErrorMemoryAllocation && large == nullptr, "cudaMalloc of 100 MiB on a 64 MiB device");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "the failed cudaMalloc's error is the last error");
    void * half = nullptr;
    CHECK(cudaMalloc(&half, (size_t)40 << 20) == cudaSuccess, "cudaMalloc of 40 MiB on a 64 MiB device");
    CHECK(cudaMalloc(&large, (size_t)40 << 20) == cudaErrorMemoryAllocation, "a second 40 MiB on a 64 MiB device");
    /* A limit below what is allocated already: nothing is free (not a wrapped-around size). */
    setenv("MEMRA_CUDA_EMULATOR_MEMORY_MB", "16", 1);
    cudaMemGetInfo(&free_limited, &total);
    CHECK(free_limited == 0, "cudaMemGetInfo with 40 MiB allocated on a 16 MiB device: free %zu", free_limited);
    void * one = nullptr;
    CHECK(cudaMalloc(&one, 1) == cudaErrorMemoryAllocation, "cudaMalloc of 1 byte with 40 MiB allocated on a 16 MiB device");
    if (one) cudaFree(one);
    cudaFree(half);
    cudaGetLastError();
    unsetenv("MEMRA_CUDA_EMULATOR_MEMORY_MB");
}

/* ------------------------------------------------------------------ 8. many blocks ---- */

__global__ void block_sum_kernel(const int * in, int64_t * out) {
    __shared__ int64_t warp_sums[32];
    const int t = (int)threadIdx.x, lane = t & 31, warp = t >> 5;
    int64_t v = in[(size_t)blockIdx.x * blockDim.x + t];
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int64_t s = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0;
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
        if (lane == 0) out[blockIdx.x] = s;
    }
}

static double seconds() {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

static void test_many_blocks() {
    const int blocks = 3000, threads = 128;
    std::vector<int> in((size_t)blocks * threads);
    for (size_t i = 0; i < in.size(); i++) in[i] = (int)(i * 2654435761u >> 8) - (1 << 23);
    std::vector<int64_t> out(blocks, 0);
    const double start = seconds();
    MEMRA_LAUNCH(blocks, threads, 0, 0, block_sum_kernel)(in.data(), out.data());
    const double elapsed = seconds() - start;
    EXPECT_LAUNCH_OK("block_sum_kernel");
    int mismatches = 0;
    for (int b = 0; b < blocks; b++) {
        int64_t expected = 0;
        for (int t = 0; t < threads; t++) expected += in[(size_t)b * threads + t];
        if (out[b] != expected) detail(mismatches, "block %d: %lld, expected %lld", b, (long long)out[b], (long long)expected);
    }
    CHECK(mismatches == 0, "%d blocks × %d threads: %d wrong block sums", blocks, threads, mismatches);
    /* Generous (ASan builds and loaded CI machines): the point is no quadratic scheduling. */
    CHECK(elapsed < 20.0, "%d blocks × %d threads took %.1f s", blocks, threads, elapsed);
    printf("%s: %d blocks × %d threads in %.2f s\n", program, blocks, threads, elapsed);
}

/* ------------------------------------------------------- 9. stream capture and graphs ---- */

/* out[i] = a · in[i] + b (b truncated to an int). */
__global__ void affine_kernel(const int * in, int * out, int n, int a, float b) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = a * in[i] + (int)b;
}

/* Arguments of every kind the library passes: pointers, ints, floats, a 64-bit int, a struct. */
struct mixed_extra {
    float weight;
    int count;
};
__device__ static float mixed_value(float in, float scale, int64_t offset, mixed_extra extra) { return in * scale + (float)(offset >> 32) + extra.weight * (float)extra.count; }
__global__ void mixed_arguments_kernel(const float * in, float * out, int n, float scale, int64_t offset, mixed_extra extra) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = mixed_value(in[i], scale, offset, extra);
}
static const float MIXED_SCALE = 2.5f;
static const int64_t MIXED_OFFSET = (int64_t)7 << 32;
static const mixed_extra MIXED_EXTRA = {0.5f, 6};

/* Launches mixed_arguments_kernel on `stream` with arguments that live only in this frame (locals,
 * and temporaries the launch converts: a size_t count, a double scale): a capturing stream's node
 * must keep copies of them. */
__attribute__((noinline)) static void launch_mixed_arguments(cudaStream_t stream, const float * in, float * out, int n, float scale, int64_t offset, mixed_extra extra) {
    volatile float local_scale = scale;
    const mixed_extra local_extra = extra;
    MEMRA_LAUNCH((n + 63) / 64, 64, 0, stream, mixed_arguments_kernel)(in, out, (size_t)n, (double)local_scale, offset, local_extra);
}

/* Fills the stack below the caller with other values (where a dead launcher's frame was). */
__attribute__((noinline)) static int scribble_stack(int seed) {
    volatile unsigned char junk[16384];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(seed + i * 37);
    return junk[seed & 1023];
}

static cudaStreamCaptureStatus capture_status(cudaStream_t stream) {
    cudaStreamCaptureStatus status = (cudaStreamCaptureStatus)-1;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) return (cudaStreamCaptureStatus)-2;
    return status;
}

/* How many of the n ints at `got` differ from expected(i). */
template <typename Expected>
static int int_mismatches(const int * got, int n, Expected expected) {
    int mismatches = 0;
    for (int i = 0; i < n; i++)
        if (got[i] != expected(i)) mismatches++;
    return mismatches;
}

/* A graph that ends with an invalidated capture: cudaStreamEndCapture fails, no graph, the capture
 * over; the message names `part` (what invalidated the capture). */
static void expect_invalidated_end(int line, cudaStream_t stream, const char * what, const char * part) {
    int sentinel = 0;
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&sentinel);
    const cudaError_t error = cudaStreamEndCapture(stream, &graph);
    check(error == cudaErrorStreamCaptureInvalidated, line, "%s: cudaStreamEndCapture = %s, expected cudaErrorStreamCaptureInvalidated", what, cudaGetErrorName(error));
    check(graph == nullptr, line, "%s: cudaStreamEndCapture of an invalidated capture gave a graph", what);
    if (part) check(contains(cudaGetErrorString(error), part), line, "%s: message \"%s\" does not mention \"%s\"", what, cudaGetErrorString(error), part);
    check(capture_status(stream) == cudaStreamCaptureStatusNone, line, "%s: the stream still captures after cudaStreamEndCapture", what);
    cudaGetLastError();
}
#define EXPECT_INVALIDATED_END(stream, what, part) expect_invalidated_end(__LINE__, stream, what, part)

static void test_capture() {
    const int n = 200;
    const size_t bytes = n * sizeof(int);
    cudaStream_t stream = nullptr, other = nullptr;
    cudaEvent_t event = nullptr;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess && cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess,
          "cudaStreamCreateWithFlags");
    CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess, "cudaEventCreateWithFlags");
    int *in = nullptr, *out = nullptr, *zeroed = nullptr, *host = nullptr;
    CHECK(cudaMalloc((void **)&in, bytes) == cudaSuccess && cudaMalloc((void **)&out, bytes) == cudaSuccess && cudaMalloc((void **)&zeroed, bytes) == cudaSuccess,
          "cudaMalloc for the capture tests");
    CHECK(cudaMallocHost((void **)&host, bytes) == cudaSuccess, "cudaMallocHost for the capture tests");
    for (int i = 0; i < n; i++) host[i] = i;

    /* A stream that does not capture runs what is issued at once. */
    CHECK(capture_status(stream) == cudaStreamCaptureStatusNone, "a new stream is not capturing");
    CHECK(cudaMemsetAsync(in, 0, bytes, stream) == cudaSuccess && cudaMemsetAsync(out, 0xff, bytes, stream) == cudaSuccess &&
              cudaMemsetAsync(zeroed, 0x11, bytes, stream) == cudaSuccess,
          "cudaMemsetAsync on a stream that does not capture");
    CHECK(in[n - 1] == 0 && out[0] == -1 && zeroed[n / 2] == 0x11111111, "cudaMemsetAsync on a stream that does not capture runs when issued");

    /* Capture a copy from pinned memory, a kernel and a memset: recorded, nothing runs. */
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture (relaxed)");
    CHECK(capture_status(stream) == cudaStreamCaptureStatusActive, "cudaStreamIsCapturing after cudaStreamBeginCapture: %d", (int)capture_status(stream));
    CHECK(capture_status(other) == cudaStreamCaptureStatusNone && capture_status(nullptr) == cudaStreamCaptureStatusNone, "capture is per stream");
    CHECK(cudaMemcpyAsync(in, host, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess, "cudaMemcpyAsync HostToDevice recorded");
    MEMRA_LAUNCH((n + 63) / 64, 64, 0, stream, affine_kernel)(in, out, n, 3, 1.5f);
    EXPECT_LAUNCH_OK("affine_kernel recorded");
    CHECK(cudaMemsetAsync(zeroed, 0, bytes, stream) == cudaSuccess, "cudaMemsetAsync recorded");
    CHECK(cudaEventRecord(event, stream) == cudaSuccess && cudaStreamWaitEvent(stream, event, 0) == cudaSuccess, "cudaEventRecord / cudaStreamWaitEvent on a capturing stream");
    CHECK(int_mismatches(in, n, [](int) { return 0; }) == 0 && int_mismatches(out, n, [](int) { return -1; }) == 0 &&
              int_mismatches(zeroed, n, [](int) { return 0x11111111; }) == 0,
          "a capturing stream ran what it recorded");
    CHECK(cudaEventSynchronize(event) == cudaErrorCapturedEvent, "cudaEventSynchronize of an event recorded in a capture");
    cudaGetLastError();

    /* Meanwhile other streams, and the NULL stream, run what is issued on them at once. */
    for (cudaStream_t elsewhere : {other, (cudaStream_t) nullptr}) {
        const char * name = elsewhere ? "another stream" : "the NULL stream";
        std::vector<int> direct(4 * 96, -1);
        MEMRA_LAUNCH(4, 96, 0, elsewhere, trivial_kernel)(direct.data());
        EXPECT_LAUNCH_OK("trivial_kernel during a capture");
        CHECK(int_mismatches(direct.data(), 4 * 96, [](int i) { return i / 96 * 1000 + i % 96; }) == 0, "a launch on %s during a capture did not run at once", name);
        int * scratch = nullptr;
        cudaMalloc((void **)&scratch, 16);
        CHECK(cudaMemcpyAsync(scratch, host + 5, 16, cudaMemcpyHostToDevice, elsewhere) == cudaSuccess && scratch[3] == 8, "cudaMemcpyAsync on %s during a capture did not run at once", name);
        cudaFree(scratch);
    }

    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr, "cudaStreamEndCapture");
    CHECK(capture_status(stream) == cudaStreamCaptureStatusNone, "the stream still captures after cudaStreamEndCapture");
    size_t count = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess && count == 3, "cudaGraphGetNodes: %zu nodes, expected 3 (copy, kernel, memset)", count);
    int marker = 0;
    cudaGraphNode_t nodes[5];
    for (cudaGraphNode_t & node : nodes) node = reinterpret_cast<cudaGraphNode_t>(&marker);
    count = 5;
    CHECK(cudaGraphGetNodes(graph, nodes, &count) == cudaSuccess && count == 3 && nodes[0] && nodes[1] && nodes[2] && nodes[0] != nodes[1] && nodes[1] != nodes[2] &&
              nodes[0] != nodes[2] && nodes[0] != reinterpret_cast<cudaGraphNode_t>(&marker) && !nodes[3] && !nodes[4],
          "cudaGraphGetNodes into 5 places: %zu given, the rest NULL", count);
    count = 2;
    CHECK(cudaGraphGetNodes(graph, nodes, &count) == cudaSuccess && count == 2, "cudaGraphGetNodes into 2 places: %zu", count);
    CHECK(int_mismatches(out, n, [](int) { return -1; }) == 0, "ending the capture ran the graph");

    /* Replays run the nodes in order; the copy reads the pinned memory when it runs. */
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && exec != nullptr, "cudaGraphInstantiate");
    CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess, "cudaGraphLaunch");
    CHECK(int_mismatches(in, n, [](int i) { return i; }) == 0, "the replayed copy from pinned memory");
    CHECK(int_mismatches(out, n, [](int i) { return 3 * i + 1; }) == 0, "the replayed kernel");
    CHECK(int_mismatches(zeroed, n, [](int) { return 0; }) == 0, "the replayed memset");
    for (int i = 0; i < n; i++) host[i] = 1000 - 7 * i;
    cudaMemsetAsync(zeroed, 0x22, bytes, stream);
    CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess, "cudaGraphLaunch again");
    CHECK(int_mismatches(out, n, [](int i) { return 3 * (1000 - 7 * i) + 1; }) == 0, "a replay after the pinned source changed copies the new values");
    CHECK(int_mismatches(zeroed, n, [](int) { return 0; }) == 0, "the memset replayed again");
    CHECK(cudaEventRecord(event, stream) == cudaSuccess && cudaEventSynchronize(event) == cudaSuccess, "cudaEventSynchronize once the event is recorded outside a capture");

    /* The exec outlives its graph. */
    CHECK(cudaGraphDestroy(graph) == cudaSuccess, "cudaGraphDestroy after cudaGraphInstantiate");
    for (int i = 0; i < n; i++) host[i] = -i;
    CHECK(cudaGraphLaunch(exec, nullptr) == cudaSuccess, "cudaGraphLaunch after its graph was destroyed (NULL stream)");
    CHECK(int_mismatches(out, n, [](int i) { return -3 * i + 1; }) == 0, "a replay after its graph was destroyed");
    CHECK(cudaGraphExecDestroy(exec) == cudaSuccess, "cudaGraphExecDestroy");

    /* A recorded launch owns its arguments: recorded in a helper's frame, replayed after that frame is
     * gone and the stack below has been overwritten by another launch and junk. */
    {
        float *fin = nullptr, *fout = nullptr, *decoy = nullptr;
        cudaMalloc((void **)&fin, n * sizeof(float));
        cudaMalloc((void **)&fout, n * sizeof(float));
        cudaMalloc((void **)&decoy, n * sizeof(float));
        std::vector<float> values(n);
        for (int i = 0; i < n; i++) values[i] = 0.25f * (float)i - 3.0f;
        cudaMemcpy(fin, values.data(), n * sizeof(float), cudaMemcpyHostToDevice);
        memset(fout, 0, n * sizeof(float));
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "cudaStreamBeginCapture (thread-local)");
        launch_mixed_arguments(stream, fin, fout, n, MIXED_SCALE, MIXED_OFFSET, MIXED_EXTRA);
        EXPECT_LAUNCH_OK("mixed_arguments_kernel recorded");
        cudaGraph_t mixed = nullptr;
        cudaGraphExec_t mixed_exec = nullptr;
        CHECK(cudaStreamEndCapture(stream, &mixed) == cudaSuccess && cudaGraphInstantiate(&mixed_exec, mixed) == cudaSuccess, "capture of mixed_arguments_kernel");
        cudaGraphDestroy(mixed);
        launch_mixed_arguments(nullptr, fout, decoy, n / 2, -1.0f, -((int64_t)5 << 32), mixed_extra{-9.0f, 1000}); /* same frame, other values, runs now */
        EXPECT_LAUNCH_OK("mixed_arguments_kernel (decoy)");
        CHECK(scribble_stack(3) >= 0, "scribble");
        CHECK(fout[0] == 0.0f, "the recorded launch ran before its replay");
        CHECK(cudaGraphLaunch(mixed_exec, stream) == cudaSuccess, "cudaGraphLaunch of mixed_arguments_kernel");
        int mismatches = 0;
        for (int i = 0; i < n; i++) {
            const float expected = mixed_value(values[i], MIXED_SCALE, MIXED_OFFSET, MIXED_EXTRA);
            if (fout[i] != expected) detail(mismatches, "element %d: %g, expected %g", i, (double)fout[i], (double)expected);
        }
        CHECK(mismatches == 0, "a replayed launch's pointer/int/float/int64/struct arguments, recorded in a frame that is gone: %d wrong elements", mismatches);
        cudaGraphExecDestroy(mixed_exec);
        cudaFree(fin);
        cudaFree(fout);
        cudaFree(decoy);
    }

    /* Synchronising a capturing stream fails and invalidates the capture; what follows on the stream
     * fails until the capture ends, without a graph. */
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
    CHECK(cudaMemsetAsync(zeroed, 0x33, bytes, stream) == cudaSuccess, "cudaMemsetAsync recorded");
    {
        const cudaError_t error = cudaStreamSynchronize(stream);
        CHECK(error == cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize of a capturing stream = %s", cudaGetErrorName(error));
        CHECK(contains(cudaGetErrorString(error), "capturing"), "cudaStreamSynchronize of a capturing stream: message \"%s\"", cudaGetErrorString(error));
    }
    CHECK(capture_status(stream) == cudaStreamCaptureStatusInvalidated, "cudaStreamIsCapturing after cudaStreamSynchronize: %d", (int)capture_status(stream));
    CHECK(cudaMemsetAsync(zeroed, 0x44, bytes, stream) == cudaErrorStreamCaptureInvalidated, "cudaMemsetAsync on an invalidated capture");
    CHECK(cudaMemcpyAsync(in, host, bytes, cudaMemcpyHostToDevice, stream) == cudaErrorStreamCaptureInvalidated, "cudaMemcpyAsync on an invalidated capture");
    cudaGetLastError();
    MEMRA_LAUNCH(1, 64, 0, stream, affine_kernel)(in, out, n, 1, 0.0f);
    EXPECT_LAUNCH_ERROR("a launch on an invalidated capture", cudaErrorStreamCaptureInvalidated, "affine_kernel");
    EXPECT_INVALIDATED_END(stream, "a capture invalidated by cudaStreamSynchronize", "cudaStreamSynchronize");
    CHECK(int_mismatches(zeroed, n, [](int) { return 0; }) == 0 && int_mismatches(out, n, [](int i) { return -3 * i + 1; }) == 0, "an invalidated capture ran something");
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize after the invalidated capture ended");

    /* Begin twice, end without a capture: cudaErrorIllegalState; the NULL stream cannot capture. */
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorIllegalState, "cudaStreamEndCapture without a capture");
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess, "cudaStreamBeginCapture (global)");
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaErrorIllegalState, "cudaStreamBeginCapture on a capturing stream");
    CHECK(capture_status(stream) == cudaStreamCaptureStatusActive, "a second cudaStreamBeginCapture disturbed the capture");
    graph = nullptr;
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr, "cudaStreamEndCapture of an empty capture");
    count = 99;
    CHECK(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess && count == 0, "an empty capture has %zu nodes", count);
    CHECK(cudaGraphInstantiate(&exec, graph) == cudaSuccess && cudaGraphLaunch(exec, stream) == cudaSuccess, "an empty graph replays");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorIllegalState, "cudaStreamEndCapture twice");
    CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeRelaxed) == cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the NULL stream");
    CHECK(cudaStreamEndCapture(nullptr, &graph) == cudaErrorIllegalState, "cudaStreamEndCapture on the NULL stream");
    cudaGetLastError();

    /* A launch that fails to be recorded (its configuration), or a copy that does, invalidates the
     * capture. */
    {
        std::vector<int> untouched(1025, -1);
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        MEMRA_LAUNCH(1, 1025, 0, stream, trivial_kernel)(untouched.data());
        EXPECT_LAUNCH_ERROR("a block of 1025 threads recorded", cudaErrorInvalidConfiguration, "1025");
        CHECK(capture_status(stream) == cudaStreamCaptureStatusInvalidated, "a bad launch configuration left the capture %d", (int)capture_status(stream));
        EXPECT_INVALIDATED_END(stream, "a capture invalidated by a bad launch configuration", "1025");
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        MEMRA_LAUNCH(1, 32, 48 * 1024 + 4, stream, trivial_kernel)(untouched.data());
        EXPECT_LAUNCH_ERROR("48 KiB + 4 of dynamic shared memory recorded", cudaErrorInvalidValue, nullptr);
        EXPECT_INVALIDATED_END(stream, "a capture invalidated by too much dynamic shared memory", "shared memory");
        CHECK(int_mismatches(untouched.data(), 1025, [](int) { return -1; }) == 0, "a refused launch ran");
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        CHECK(cudaMemcpyAsync(untouched.data(), host, 16, cudaMemcpyHostToDevice, stream) == cudaErrorInvalidValue, "a recorded HostToDevice copy to host memory");
        EXPECT_INVALIDATED_END(stream, "a capture invalidated by a bad copy", "outside every device allocation");
    }

    /* No graph launch on a capturing stream; on another stream it runs. */
    {
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        cudaMemsetAsync(zeroed, 0x01, bytes, stream);
        CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess && cudaGraphInstantiate(&exec, graph) == cudaSuccess, "capture of a memset");
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        CHECK(cudaGraphLaunch(exec, stream) == cudaErrorIllegalState, "cudaGraphLaunch on a capturing stream");
        CHECK(zeroed[0] == 0, "a refused cudaGraphLaunch ran");
        CHECK(cudaGraphLaunch(exec, other) == cudaSuccess && zeroed[n - 1] == 0x01010101, "cudaGraphLaunch on another stream during a capture");
        cudaGraph_t empty = nullptr;
        CHECK(cudaStreamEndCapture(stream, &empty) == cudaSuccess, "cudaStreamEndCapture after a refused cudaGraphLaunch");
        cudaGraphDestroy(empty);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaGetLastError();
    }

    /* A deadlocking kernel in a graph: cudaGraphLaunch fails, the nodes after it do not run. */
    {
        std::vector<int> deadlocked(128, 0);
        cudaMemsetAsync(zeroed, 0, bytes, stream);
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        MEMRA_LAUNCH(2, 64, 0, stream, deadlock_kernel)(deadlocked.data());
        EXPECT_LAUNCH_OK("deadlock_kernel recorded (it fails when it runs)");
        cudaMemsetAsync(zeroed, 0x55, bytes, stream);
        CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess && cudaGraphInstantiate(&exec, graph) == cudaSuccess, "capture of deadlock_kernel");
        const cudaError_t error = cudaGraphLaunch(exec, stream);
        CHECK(error == cudaErrorLaunchFailure, "cudaGraphLaunch of a deadlocking kernel = %s", cudaGetErrorName(error));
        EXPECT_LAUNCH_ERROR("a deadlock in a graph", cudaErrorLaunchFailure, "deadlock");
        CHECK(zeroed[0] == 0, "the node after a failed kernel ran");
        EXPECT_RECOVERED("a deadlock in a graph");
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }

    /* A copy node is checked when it runs: its target freed since the capture. */
    {
        int * doomed = nullptr;
        cudaMalloc((void **)&doomed, bytes);
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        CHECK(cudaMemcpyAsync(doomed, host, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess, "a copy recorded");
        CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess && cudaGraphInstantiate(&exec, graph) == cudaSuccess, "capture of a copy");
        CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess && doomed[n - 1] == host[n - 1], "cudaGraphLaunch of a copy");
        cudaFree(doomed);
        const cudaError_t error = cudaGraphLaunch(exec, stream);
        CHECK(error == cudaErrorInvalidValue, "cudaGraphLaunch of a copy into freed memory = %s", cudaGetErrorName(error));
        CHECK(contains(cudaGetErrorString(error), "outside every device allocation"), "a copy into freed memory: message \"%s\"", cudaGetErrorString(error));
        CHECK(cudaGetLastError() == cudaErrorInvalidValue, "a failed copy node's error is the last error");
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }

    /* A capture begun in global or thread-local mode ends on its own thread; a relaxed one anywhere. */
    {
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess, "cudaStreamBeginCapture (global)");
        cudaError_t elsewhere = cudaSuccess;
        cudaGraph_t from_thread = nullptr;
        std::thread([&] { elsewhere = cudaStreamEndCapture(stream, &from_thread); }).join();
        CHECK(elsewhere == cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture of a global capture on another thread = %s", cudaGetErrorName(elsewhere));
        CHECK(capture_status(stream) == cudaStreamCaptureStatusActive, "a refused cudaStreamEndCapture ended the capture");
        CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess, "cudaStreamEndCapture on the thread that began");
        cudaGraphDestroy(graph);
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture (relaxed)");
        std::thread([&] { elsewhere = cudaStreamEndCapture(stream, &from_thread); }).join();
        CHECK(elsewhere == cudaSuccess && from_thread != nullptr, "cudaStreamEndCapture of a relaxed capture on another thread = %s", cudaGetErrorName(elsewhere));
        if (from_thread) cudaGraphDestroy(from_thread);
    }

    /* A stream destroyed while it captures frees what it recorded (ASan's leak check). */
    {
        cudaStream_t doomed = nullptr;
        cudaStreamCreateWithFlags(&doomed, cudaStreamNonBlocking);
        CHECK(cudaStreamBeginCapture(doomed, cudaStreamCaptureModeRelaxed) == cudaSuccess, "cudaStreamBeginCapture");
        MEMRA_LAUNCH(1, 64, 0, doomed, affine_kernel)(in, out, n, 2, 0.0f);
        cudaMemcpyAsync(in, host, bytes, cudaMemcpyHostToDevice, doomed);
        CHECK(cudaStreamDestroy(doomed) == cudaSuccess, "cudaStreamDestroy of a capturing stream");
        EXPECT_LAUNCH_OK("a launch recorded by a stream then destroyed");
    }

    CHECK(cudaGraphDestroy(nullptr) == cudaErrorInvalidValue && cudaGraphLaunch(nullptr, stream) == cudaErrorInvalidValue, "NULL graph handles");
    cudaGetLastError();
    cudaFree(in);
    cudaFree(out);
    cudaFree(zeroed);
    cudaFreeHost(host);
    cudaEventDestroy(event);
    cudaStreamDestroy(stream);
    cudaStreamDestroy(other);
}

/* ggml's dequantize_row_iq* (ggml-quants.c) for one super-block, written as ggml writes them
 * (float products in its order, the grids through iq-grids.h), to check the kernels' codes with. */
static uint8_t grid_byte(uint64_t entry, int j) { return (uint8_t)(entry >> (8 * j)); }
static uint16_t u16_of(const uint8_t * p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static float half_of(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
static void reference_iq(int type, const uint8_t * x, float * y) {
    static const float delta = MEMRA_IQ1_DELTA;
    switch (type) {
        case MEMRA_CUDA_TYPE_IQ2_XXS:
        case MEMRA_CUDA_TYPE_IQ3_XXS: {
            const bool iq3 = type == MEMRA_CUDA_TYPE_IQ3_XXS;
            const float d = half_of(u16_of(x));
            for (int ib = 0; ib < 8; ib++) {
                const uint8_t * q = iq3 ? x + 2 + 8 * ib : x + 2 + 8 * ib;
                uint32_t aux;
                memcpy(&aux, iq3 ? x + 66 + 4 * ib : q + 4, 4);
                const float db = d * (0.5f + (aux >> 28)) * (iq3 ? 0.5f : 0.25f);
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint8_t signs = memra_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                    for (int j = 0; j < 8; j++) {
                        const uint8_t g = iq3 ? grid_byte(memra_iq3xxs_grid[q[2 * l + j / 4]], j % 4) : grid_byte(memra_iq2xxs_grid[q[l]], j);
                        y[j] = db * g * (signs & (1 << j) ? -1.f : 1.f);
                    }
                }
            }
            break;
        }
        case MEMRA_CUDA_TYPE_IQ2_XS:
        case MEMRA_CUDA_TYPE_IQ2_S: {
            const bool xs = type == MEMRA_CUDA_TYPE_IQ2_XS;
            const float d = half_of(u16_of(x));
            for (int ib = 0; ib < 8; ib++) {
                const uint8_t scales = x[(xs ? 66 : 74) + ib];
                const float db[2] = {d * (0.5f + (scales & 0xf)) * 0.25f, d * (0.5f + (scales >> 4)) * 0.25f};
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint16_t q = xs ? u16_of(x + 2 + 2 * (4 * ib + l)) : 0;
                    const uint64_t entry = xs ? memra_iq2xs_grid[q & 511] : memra_iq2s_grid[x[2 + 4 * ib + l] | ((x[66 + ib] << (8 - 2 * l)) & 0x300)];
                    const uint8_t signs = xs ? memra_ksigns_iq2xs[q >> 9] : x[34 + 4 * ib + l];
                    for (int j = 0; j < 8; j++) y[j] = db[l / 2] * grid_byte(entry, j) * (signs & (1 << j) ? -1.f : 1.f);
                }
            }
            break;
        }
        case MEMRA_CUDA_TYPE_IQ3_S: {
            const float d = half_of(u16_of(x));
            for (int ib = 0; ib < 8; ib++) {
                const float db = d * (1 + 2 * ((x[106 + ib / 2] >> (4 * (ib % 2))) & 0xf));
                const uint8_t * qs = x + 2 + 8 * ib;
                const uint8_t qh = x[66 + ib];
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint32_t grid1 = memra_iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
                    const uint32_t grid2 = memra_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
                    const uint8_t signs = x[74 + 4 * ib + l];
                    for (int j = 0; j < 4; j++) {
                        y[j] = db * grid_byte(grid1, j) * (signs & (1 << j) ? -1.f : 1.f);
                        y[j + 4] = db * grid_byte(grid2, j) * (signs & (1 << (j + 4)) ? -1.f : 1.f);
                    }
                }
            }
            break;
        }
        case MEMRA_CUDA_TYPE_IQ1_S: {
            const float d = half_of(u16_of(x));
            for (int ib = 0; ib < 8; ib++) {
                const uint16_t qh = u16_of(x + 34 + 2 * ib);
                const float dl = d * (2 * ((qh >> 12) & 7) + 1);
                const float dlt = qh & 0x8000 ? -delta : delta;
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint64_t entry = memra_iq1s_grid[x[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
                    for (int j = 0; j < 8; j++) y[j] = dl * ((int8_t)grid_byte(entry, j) + dlt);
                }
            }
            break;
        }
        default: { /* iq1_m */
            uint16_t sc[4];
            for (int i = 0; i < 4; i++) sc[i] = u16_of(x + 48 + 2 * i);
            const float d = half_of((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
            for (int ib = 0; ib < 8; ib++) {
                const float dl1 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
                const float dl2 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
                const uint8_t * qh = x + 32 + 2 * ib;
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint8_t h = qh[l / 2];
                    const uint64_t entry = memra_iq1s_grid[x[4 * ib + l] | ((l % 2 ? h << 4 : h << 8) & 0x700)];
                    const float dlt = h & (l % 2 ? 0x80 : 0x08) ? -delta : delta;
                    for (int j = 0; j < 8; j++) y[j] = (l < 2 ? dl1 : dl2) * ((int8_t)grid_byte(entry, j) + dlt);
                }
            }
            break;
        }
    }
}

/* dequantize_group, codes_group and code_words of a runtime i-quant type. */
#define IQ_TYPE_SWITCH(type, CALL)                                                   \
    switch (type) {                                                                  \
        case MEMRA_CUDA_TYPE_IQ2_XXS: { constexpr int T = MEMRA_CUDA_TYPE_IQ2_XXS; CALL; } break; \
        case MEMRA_CUDA_TYPE_IQ2_XS: { constexpr int T = MEMRA_CUDA_TYPE_IQ2_XS; CALL; } break;   \
        case MEMRA_CUDA_TYPE_IQ2_S: { constexpr int T = MEMRA_CUDA_TYPE_IQ2_S; CALL; } break;     \
        case MEMRA_CUDA_TYPE_IQ3_XXS: { constexpr int T = MEMRA_CUDA_TYPE_IQ3_XXS; CALL; } break; \
        case MEMRA_CUDA_TYPE_IQ3_S: { constexpr int T = MEMRA_CUDA_TYPE_IQ3_S; CALL; } break;     \
        case MEMRA_CUDA_TYPE_IQ1_S: { constexpr int T = MEMRA_CUDA_TYPE_IQ1_S; CALL; } break;     \
        case MEMRA_CUDA_TYPE_IQ1_M: { constexpr int T = MEMRA_CUDA_TYPE_IQ1_M; CALL; } break;     \
        default: break;                                                              \
    }
static void dequantize_group_of(int type, const uint8_t * row, int64_t g, float v[8]) { IQ_TYPE_SWITCH(type, memra_cuda_kernels::dequantize_group<T>(row, g, v)) }
static void codes_group_of(int type, const uint8_t * row, int64_t g, float c[8], float & s, float & o) {
    IQ_TYPE_SWITCH(type, memra_cuda_kernels::codes_group<T>(row, g, c, s, o))
}
static void code_words_of(int type, const uint8_t * row, int64_t g, int w[2], float & s, float & o, int & zero) {
    IQ_TYPE_SWITCH(type, memra_cuda_kernels::code_words<T>(row, g, w, s, o, zero))
}

/* The i-quants' codes (kernels/quant.cuh, kernels/matmul.cuh) against ggml's dequantization, on
 * random super-blocks (d a random normal f16), 3 to a row: dequantize_group and codes_group's
 * s · c + o bit for bit, and code_words' s · byte + o (the __dp4a operands) too. */
static void test_iq_codes() {
    using namespace memra_cuda_kernels;
    static const int types[] = {MEMRA_CUDA_TYPE_IQ2_XXS, MEMRA_CUDA_TYPE_IQ2_XS, MEMRA_CUDA_TYPE_IQ2_S, MEMRA_CUDA_TYPE_IQ3_XXS,
                                MEMRA_CUDA_TYPE_IQ3_S, MEMRA_CUDA_TYPE_IQ1_S, MEMRA_CUDA_TYPE_IQ1_M};
    static const int64_t block_bytes[] = {66, 74, 82, 98, 110, 50, 56};
    const int blocks = 3, rows = 200;
    uint32_t state = 12345;
    const auto next = [&state]() { return state = state * 1664525u + 1013904223u, state >> 8; };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int type = types[t];
        const int64_t bytes = block_bytes[t];
        std::vector<uint8_t> row(bytes * blocks + 16);
        std::vector<float> expected(256 * blocks);
        int mismatches = 0;
        for (int r = 0; r < rows; r++) {
            for (auto & b : row) b = (uint8_t)next();
            for (int k = 0; k < blocks; k++) {
                uint8_t * block = row.data() + k * bytes;
                const uint16_t d = (uint16_t)((next() & 0x8000) | ((4 + next() % 20) << 10) | (next() & 0x3ff)); /* normal, 2^-11 .. 2^8 */
                if (type == MEMRA_CUDA_TYPE_IQ1_M) {
                    for (int i = 0; i < 4; i++) block[49 + 2 * i] = (uint8_t)((block[49 + 2 * i] & 0x0f) | (((d >> (4 * i)) & 0xf) << 4));
                } else {
                    block[0] = (uint8_t)d;
                    block[1] = (uint8_t)(d >> 8);
                }
                reference_iq(type, block, expected.data() + 256 * k);
            }
            for (int64_t g = 0; g < 32 * blocks; g++) {
                float v[8] = {}, c[8] = {}, s = 0.0f, o = 0.0f, ws = 0.0f, wo = 0.0f;
                int w[2] = {0, 0}, zero = 0;
                dequantize_group_of(type, row.data(), g, v);
                codes_group_of(type, row.data(), g, c, s, o);
                code_words_of(type, row.data(), g, w, ws, wo, zero);
                for (int i = 0; i < 8; i++) {
                    const float want = expected[g * 8 + i];
                    const float from_codes = __fadd_rn(__fmul_rn(s, c[i]), o);
                    const float from_words = __fadd_rn(__fmul_rn(ws, (float)((int8_t)(w[i / 4] >> (8 * (i % 4))) - zero)), wo);
                    if (float_bits(v[i]) == float_bits(want) && float_bits(from_codes) == float_bits(want) && float_bits(from_words) == float_bits(want) &&
                        fabsf(c[i]) <= 2048.0f)
                        continue;
                    detail(mismatches, "type %d, row %d, value %lld: ggml %a, dequantize_group %a, codes %a (c %g), code_words %a", type, r, (long long)(g * 8 + i),
                           (double)want, (double)v[i], (double)from_codes, (double)c[i], (double)from_words);
                }
            }
        }
        CHECK(mismatches == 0, "i-quant type %d: %d values differ from ggml's dequantization", type, mismatches);
    }
}

int main(int argc, char ** argv) {
    if (argc > 0 && strrchr(argv[0], '/')) program = strrchr(argv[0], '/') + 1;
    else if (argc > 0) program = argv[0];
    static std::string named; /* run.sh names the schedule it runs this under: "test-emulator reverse" */
    if (argc > 1) program = (named = std::string(program) + " " + argv[1]).c_str();
    test_conversions();
    test_small_int_to_float();
    test_iq_codes();
    test_block_barrier();
    test_block_order();
    test_dynamic_shared();
    test_exited_threads();
    test_warp_collectives();
    test_errors();
    test_mma();
    test_mma_rounding();
    test_mma_s8();
    test_ldmatrix();
    test_cp_async();
    test_device_memory();
    test_many_blocks();
    test_capture();
    printf("%s: %d checks, %d failed\n", program, checks, failures);
    return failures == 0 ? 0 : 1;
}
