/*
 * memra-cuda-emulator.h — the CUDA the kernels of libmemra_cuda use, implemented on the CPU, so
 * that the same .cu sources compile with the system C++ compiler (-x c++ -DMEMRA_CUDA_EMULATED)
 * into libmemra_cuda_emulated.so and run on machines without a GPU.
 *
 * What it is for: executing the kernels' index arithmetic, fragment layouts, warp collectives and
 * block barriers, and the launchers' host logic, against the reference backend in CI. What it is
 * not: a model of the GPU's memory system, timing or precision (it computes mma in f32 from f16
 * inputs, as the tensor cores' f32 accumulation does, but in its own order).
 *
 * Execution model: a launch runs its blocks one after another on the calling thread. Each thread
 * of a block is a fiber with its own stack; fibers run until they reach a collective (block
 * barrier, warp shuffle, vote, __syncwarp, mma) and wait there until every thread that must take
 * part has arrived. Threads that have exited drop out of their block's barriers. A collective
 * whose participants can never all arrive (a deadlock on the GPU: a lane in the mask has exited,
 * threads wait at different barriers forever) fails the launch with a message that
 * cudaGetLastError() then reports, as a bad launch would.
 *
 * The threads of a block run in order (thread 0 first) between collectives, and a launch's blocks
 * in index order, unless MEMRA_CUDA_EMULATOR_SCHEDULE is "reverse" or "random": a race (a read of
 * memory another thread writes, without a barrier between them) then sees another interleaving and
 * changes results, and so does a kernel that counts on its blocks finishing in index order.
 *
 * Streams run what is issued on them at once (stream order is program order), except while a stream
 * captures (cudaStreamBeginCapture .. cudaStreamEndCapture): then its kernel launches,
 * cudaMemcpyAsync and cudaMemsetAsync are recorded, in issue order, as the nodes of a graph (a
 * linear chain), and run only when cudaGraphLaunch replays the instantiated graph, on the calling
 * thread, node after node. A recorded launch owns a copy of its arguments; a recorded copy reads
 * its source when it runs (pinned host memory written after the capture is what a replay copies).
 * Capture follows the real runtime's rules where the library could trip on them: synchronising a
 * capturing stream fails and invalidates the capture, a failed launch invalidates it, an
 * invalidated capture ends without a graph (see emulator.cpp, "stream capture and graphs").
 *
 * __shared__ variables are plain statics, shared by a block's fibers (they run on one OS thread,
 * and launches hold one mutex) and reused by the next block; dynamic shared memory is a per-launch
 * buffer filled with a NaN pattern before each block, so reads of unwritten shared memory show up
 * in results.
 */
#pragma once

#ifndef MEMRA_CUDA_EMULATED
#error "memra-cuda-emulator.h is for builds with -DMEMRA_CUDA_EMULATED"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* ---- qualifiers ---- */
#define __global__ __attribute__((unused)) /* kernels in headers are static: unused in some sources */
#define __device__
#define __host__
/* No __noinline__: no source here uses it, and libstdc++ 13's headers spell the attribute
 * __attribute__((__noinline__)), which such a macro breaks (seen on the GPU machine's g++ 13:
 * "'noinline' was not declared in this scope" in the headers included after this one). */
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#define __constant__ static

/* ---- vector types ---- */
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct __attribute__((aligned(8))) float2 {
    float x, y;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(8))) int2 {
    int x, y;
};
struct __attribute__((aligned(16))) int4 {
    int x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
    unsigned int x, y;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned int x, y, z, w;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

/* ---- half and bfloat16 ---- */
struct __attribute__((aligned(2))) __half {
    unsigned short __x;
};
struct __attribute__((aligned(4))) __half2 {
    __half x, y;
};
struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __half half;
typedef __half2 half2;

namespace memra_emu {
/* IEEE half ↔ float, bit for bit as the hardware conversions (float → half rounds to nearest even;
 * checked against the compiler's _Float16 over every half and a sweep of floats in
 * native/cuda/tests/test-emulator.cpp). */
static inline float half_to_float(unsigned short h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent == 0) {
        float magnitude = (float)mantissa * (1.0f / 16777216.0f); /* exact: mantissa · 2^-24 */
        memcpy(&bits, &magnitude, 4);
        bits |= sign;
    } else {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
/* 4 f32 or 32-bit values in one GCC/Clang vector (an SSE or NEON register, plain code elsewhere):
 * the emulated mma's rows are 8 columns, two of them. */
typedef float f32x4 __attribute__((vector_size(16)));
typedef uint32_t u32x4 __attribute__((vector_size(16)));
/* half_to_float of 4 halves at once (their bits, one per element), the same bits for every half
 * (test-emulator checks all 65536): the exponent rebiased in place, 31 (inf, NaN) to 255, and a
 * subnormal m renormalised as 2^-14 · (1 + m / 1024) − 2^-14, which is exact. No branch: the f16
 * mma converts 384 values per call. */
static inline f32x4 halves_to_floats(u32x4 h) {
    const u32x4 shifted = (h & 0x7fffu) << 13;
    const u32x4 exponent = shifted & 0x0f800000u;
    const u32x4 special = (u32x4)(exponent == 0x0f800000u), subnormal = (u32x4)(exponent == 0u);
    const u32x4 rebiased = shifted + (112u << 23) + (special & (112u << 23)) + (subnormal & (1u << 23));
    const u32x4 offset_bits = (u32x4){113u << 23, 113u << 23, 113u << 23, 113u << 23};
    f32x4 magnitude, offset;
    memcpy(&magnitude, &rebiased, sizeof magnitude);
    memcpy(&offset, &offset_bits, sizeof offset);
    magnitude -= offset; /* the subnormals' value (zeros among them); the others keep their bits below (a signalling NaN stays one) */
    u32x4 bits;
    memcpy(&bits, &magnitude, sizeof bits);
    bits = (bits & subnormal) | (rebiased & ~subnormal);
    bits |= (h & 0x8000u) << 16;
    f32x4 out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
static inline unsigned short float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0u)); /* inf, NaN (quiet) */
    if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);                                                          /* ≥ 65520: inf */
    if (x < 0x38800000u) { /* below 2^-14: a subnormal half, |f| · 2^24 rounded to the nearest even integer */
        float magnitude;
        memcpy(&magnitude, &x, 4);
        return (unsigned short)(sign | (uint32_t)nearbyintf(magnitude * 16777216.0f));
    }
    x += 0xfffu + ((x >> 13) & 1u);
    return (unsigned short)(sign | ((x - 0x38000000u) >> 13));
}
}  // namespace memra_emu

static inline float __half2float(__half h) { return memra_emu::half_to_float(h.__x); }
static inline __half __float2half_rn(float v) { return __half{memra_emu::float_to_half(v)}; }
static inline __half __float2half(float v) { return __float2half_rn(v); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
static inline __half2 __float2half2_rn(float a) { return __half2{__float2half_rn(a), __float2half_rn(a)}; }
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }
static inline __half __ushort_as_half(unsigned short v) { return __half{v}; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }

static inline float __bfloat162float(__nv_bfloat16 h) {
    const uint32_t bits = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float v) { /* round to nearest even; NaN stays NaN */
    uint32_t bits;
    memcpy(&bits, &v, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((bits >> 16) | 0x40)};
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return __nv_bfloat16{(unsigned short)(bits >> 16)};
}

/* ---- arithmetic intrinsics (the library builds with -ffp-contract=off: no FMA contraction) ---- */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
static inline float __uint_as_float(unsigned int v) {
    float f;
    memcpy(&f, &v, 4);
    return f;
}
static inline unsigned int __float_as_uint(float v) {
    unsigned int u;
    memcpy(&u, &v, 4);
    return u;
}
static inline int __float_as_int(float v) {
    int i;
    memcpy(&i, &v, 4);
    return i;
}
static inline float __int_as_float(int v) {
    float f;
    memcpy(&f, &v, 4);
    return f;
}
/* c + the sum of the four products of a's and b's signed bytes. */
static inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
/* Byte n of the result: byte (s >> 4n) & 7 of the 8 bytes y:x (x the low word). The selector's
 * sign-replicating bit (0x8 of each nibble) is not emulated: the kernels keep it clear. */
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long bytes = ((unsigned long long)y << 32) | x;
    unsigned int result = 0;
    for (int n = 0; n < 4; n++) result |= (unsigned int)((bytes >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return result;
}
template <typename T>
static inline T __ldg(const T * p) {
    return *p;
}

/* ---- the execution model ---- */
namespace memra_emu {

struct thread_state {
    uint3 thread_idx;
    int lane, warp;
};

/* The running fiber's thread and block coordinates (set by the scheduler). */
extern thread_state * current;
extern uint3 block_idx;
extern dim3 block_dim, grid_dim;
extern unsigned char * dynamic_shared_memory;

void sync_block();
/* Every lane of `mask` posts `value`; when all have, each gets all 32 slots (lanes outside the mask: 0). */
void warp_exchange(unsigned mask, uint64_t value, uint64_t all[32], const char * what);
/* Every lane of `mask` posts `value` and reads lane `source`'s (0..31; 0 when outside the mask). */
uint64_t warp_shuffle(unsigned mask, uint64_t value, int source, const char * what);
/* The lanes of `mask` wait for each other. */
void sync_warp(unsigned mask);
/* Fails the running launch with a message (the kernel keeps running to its end or its next collective). */
void fail(const char * format, ...) __attribute__((format(printf, 1, 2)));

template <typename T>
static inline uint64_t to_bits(T value) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffled values are at most 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <typename T>
static inline T from_bits(uint64_t bits) {
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}
template <typename T>
static inline T shuffle_from(unsigned mask, T value, int source, const char * what) {
    const uint64_t bits = warp_shuffle(mask, to_bits(value), source, what);
    if (!(mask >> source & 1u)) {
        fail("%s: lane %d reads lane %d, which is not in the mask 0x%08x", what, current->lane, source, mask);
        return value;
    }
    return from_bits<T>(bits);
}

/* mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 across the warp: the PTX ISA's fragment
 * layouts (lane = 4 · group + quad): A (16 × 16, row-major) a[0] = (group, 2 quad .. +1),
 * a[1] = (group + 8, ...), a[2] = (group, 8 + 2 quad ..), a[3] = (group + 8, 8 + 2 quad ..);
 * B (16 × 8, column-major) b[0] = k (2 quad .. +1) of column group, b[1] = k + 8; C and D (16 × 8)
 * c[0..1] = (group, 2 quad .. +1), c[2..3] = (group + 8, ...). */
void mma_m16n8k16_f16_f32(float c[4], const uint32_t a[4], const uint32_t b[2]);

/* mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 across the warp, by the PTX ISA's layouts for
 * .s8 (lane = 4 · group + quad; a register holds 4 consecutive k values, the lowest byte first):
 * A (16 × 32, row-major) a[0] = (group, 4 quad .. +3), a[1] = (group + 8, 4 quad ..),
 * a[2] = (group, 16 + 4 quad ..), a[3] = (group + 8, 16 + 4 quad ..); B (32 × 8, column-major)
 * b[0] = k (4 quad .. +3) of column group, b[1] = k + 16; C and D (16 × 8, s32) as m16n8k16's.
 * Sums wrap modulo 2^32 as the hardware's do without .satfinite. */
void mma_m16n8k32_s8_s32(int32_t c[4], const uint32_t a[4], const uint32_t b[2]);

/* ldmatrix.sync.aligned.m8n8.x4.shared.b16 across the warp: lanes 8i .. 8i + 7 give the rows of
 * matrix i (16 bytes each, 16-byte aligned), and lane l receives in r[i] word l & 3 of row l >> 2
 * of matrix i: for int8 data, the 4 bytes of columns 4 (l & 3) .. + 3 of that row, as the mma
 * fragments hold them. */
void ldmatrix_x4(uint32_t r[4], const void * row);

/* cp.async.cg.shared.global [destination], [source], bytes, source_bytes (bytes 4, 8 or 16, both
 * addresses aligned to it): the source's first source_bytes bytes, zeros past them, read now and
 * written to shared memory only when a cp.async.wait_group of this thread completes the copy's
 * group. A GPU's copy lands at some time before that wait, so a read of the destination before it
 * (by this thread, or by another before a barrier that follows the wait) sees what was there
 * before: the NaN pattern of dynamic shared memory, or an earlier stage. cp_async_commit closes the
 * thread's open group (cp.async.commit_group); cp_async_wait(n) completes its committed groups but
 * the newest n (cp.async.wait_group n). Copies left pending when a thread exits are dropped. */
void cp_async(void * destination, const void * source, int bytes, int source_bytes);
void cp_async_commit();
void cp_async_wait(int pending);

/* The launch: grid × block threads, each running `body()`; errors go to cudaGetLastError. On a
 * stream that is capturing, the launch is recorded instead (its configuration checked as it would
 * be when run): the node keeps a heap copy of `context` made with `clone`, released with
 * `destroy`, so that it outlives the launcher's stack frame and serves every replay. */
struct launch_body {
    void (*run)(void * context);
    void * context;
    void * (*clone)(const void * context);
    void (*destroy)(void * context);
};
void launch(const void * kernel, dim3 grid, dim3 block, size_t shared_bytes, void * stream, launch_body body, const char * kernel_name);

template <typename... Parameters>
struct launcher {
    void (*kernel)(Parameters...);
    dim3 grid, block;
    size_t shared_bytes;
    void * stream;
    const char * name;
    template <typename... Arguments>
    void operator()(Arguments &&... arguments) const {
        static_assert(sizeof...(Arguments) == sizeof...(Parameters), "kernel argument count");
        /* Converted once, as the launch copies the arguments; every thread gets its own copy. */
        struct bound {
            void (*kernel)(Parameters...);
            std::tuple<typename std::decay<Parameters>::type...> values;
            static void run(void * self) {
                bound * b = static_cast<bound *>(self);
                std::apply(b->kernel, b->values);
            }
            static void * clone(const void * self) { return new bound(*static_cast<const bound *>(self)); }
            static void destroy(void * self) { delete static_cast<bound *>(self); }
        } packed{kernel, std::tuple<typename std::decay<Parameters>::type...>(std::forward<Arguments>(arguments)...)};
        launch(reinterpret_cast<const void *>(kernel), grid, block, shared_bytes, stream, launch_body{&bound::run, &packed, &bound::clone, &bound::destroy}, name);
    }
};
template <typename... Parameters>
static inline launcher<Parameters...> make_launcher(void (*kernel)(Parameters...), dim3 grid, dim3 block, size_t shared_bytes, void * stream,
                                                    const char * name) {
    return launcher<Parameters...>{kernel, grid, block, shared_bytes, stream, name};
}

}  // namespace memra_emu

#define threadIdx (memra_emu::current->thread_idx)
#define blockIdx (memra_emu::block_idx)
#define blockDim (memra_emu::block_dim)
#define gridDim (memra_emu::grid_dim)
static constexpr int warpSize = 32;

static inline void __syncthreads() { memra_emu::sync_block(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { memra_emu::sync_warp(mask); }
/* A launch runs on one host thread and its fibers switch only at barriers and warp operations, so a
 * plain read-modify-write is atomic here. */
static inline int atomicAdd(int * address, int value) {
    const int old = *address;
    *address = old + value;
    return old;
}
static inline unsigned long long atomicMax(unsigned long long * address, unsigned long long value) {
    const unsigned long long old = *address;
    if (value > old) *address = value;
    return old;
}
/* Loads that bypass L1 (cache-global): the emulator has no caches. */
template <typename T>
static inline T __ldcg(const T * p) {
    return *p;
}
static inline void __threadfence() {}
static inline void __threadfence_block() {}

/* The source lane is taken modulo width as the hardware does, by its low bits (negative ones too). */
template <typename T>
static inline T __shfl_sync(unsigned mask, T value, int source_lane, int width = 32) {
    const int lane = memra_emu::current->lane;
    return memra_emu::shuffle_from(mask, value, (lane / width) * width + (source_lane & (width - 1)), "__shfl_sync");
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
    const int lane = memra_emu::current->lane;
    const int source = lane ^ lane_mask;
    return memra_emu::shuffle_from(mask, value, source >= (lane / width + 1) * width ? lane : source, "__shfl_xor_sync");
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
    const int lane = memra_emu::current->lane;
    const int source = lane + (int)delta;
    return memra_emu::shuffle_from(mask, value, source >= (lane / width + 1) * width ? lane : source, "__shfl_down_sync");
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
    const int lane = memra_emu::current->lane;
    const int source = lane - (int)delta;
    return memra_emu::shuffle_from(mask, value, source < (lane / width) * width ? lane : source, "__shfl_up_sync");
}
static inline unsigned __ballot_sync(unsigned mask, int predicate) {
    uint64_t all[32];
    memra_emu::warp_exchange(mask, predicate != 0, all, "__ballot_sync");
    unsigned bits = 0;
    for (int l = 0; l < 32; l++) bits |= (all[l] != 0 && (mask >> l & 1u)) ? 1u << l : 0u;
    return bits;
}
static inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
static inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }

/* `kernel<<<grid, block, shared, stream>>>(arguments)` is written MEMRA_LAUNCH(grid, block, shared, stream, kernel)(arguments). */
#define MEMRA_LAUNCH(grid, block, shared, stream, ...) memra_emu::make_launcher(__VA_ARGS__, dim3(grid), dim3(block), (size_t)(shared), (void *)(stream), #__VA_ARGS__)
/* `extern __shared__ T name[]`. */
#define MEMRA_DYNAMIC_SHARED(T, name) T * name = reinterpret_cast<T *>(memra_emu::dynamic_shared_memory)
