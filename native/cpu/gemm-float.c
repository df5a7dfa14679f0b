/*
 * f16 and bf16 GEMM tiles (see gemm-float.h): x86 AVX-512 (with AVX512_BF16 or without) and AVX2.
 *
 * The dot-product path converts each activation row to the weight's type (ggml's vec_dot_type: f16 for
 * f16 weights, bf16 for bf16) and multiplies one weight row at a time. Here a tile of 4 weight rows x
 * 4 activation rows keeps 16 accumulators in registers, so each weight vector loaded (and converted)
 * serves four activation rows and each activation vector four weight rows.
 *   f16: the packed activation row is the f16 rounding of the row (memra_quantize_activation_row's),
 *   widened back to f32 (exact), so that the inner loop is one vcvtph2ps per weight vector and plain
 *   fmas: per 16 values and tile, 4 conversions, 16 fmas.
 *   bf16 with AVX512_BF16: the packed row is the row's bf16 rounding as the dot path makes it, and
 *   vdpbf16ps multiplies 32 pairs per instruction: per 32 values and tile, 16 instructions. Its
 *   products are exact in f32 (8-bit significands); it treats subnormal inputs and results as zero,
 *   which the dot path does not (a difference far below a bf16 weight's own rounding). Without
 *   AVX512_BF16, bf16 is packed as f16 is (the bf16 rounding, widened to f32) and the weights are
 *   widened by a shift.
 *   AVX2 (16 ymm registers): the same f32 packing; a 4 x 4 tile runs as two 2 x 4 halves (8
 *   accumulators, 4 activation vectors, 1 weight vector live).
 */
#include "gemm-float.h"

#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "quant-dot.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(MEMRA_NO_SIMD)
#define MEMRA_GEMM_FLOAT_X86 1
#include <cpuid.h>
#include <immintrin.h>

#define TARGET_A2 "avx2,fma,f16c"
#define TARGET_F16 "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"
#define TARGET_BF16 TARGET_F16 ",avx512bf16"
#define A2_INLINE static inline __attribute__((target(TARGET_A2), always_inline))
#define A2_FN static __attribute__((target(TARGET_A2)))
#define F16_INLINE static inline __attribute__((target(TARGET_F16), always_inline))
#define F16_FN static __attribute__((target(TARGET_F16)))
#define BF16_INLINE static inline __attribute__((target(TARGET_BF16), always_inline))
#define BF16_FN static __attribute__((target(TARGET_BF16)))

enum { LEVEL_NONE = 0, LEVEL_AVX2 = 1, LEVEL_AVX512 = 2, LEVEL_AVX512_BF16 = 3 };

/* The kernels follow quant-dot's choice (so MEMRA_CPU_ISA=avx2|scalar selects or turns them off as
 * it does the dot products; MEMRA_GEMM=0 is checked by gemm.c): its AVX-512 path -> the AVX-512 tiles
 * (vdpbf16ps for bf16 where the CPU has AVX512_BF16), its AVX2 path -> the AVX2 tiles. */
static int float_level(void) {
    static int level = -1;
    if (level >= 0) return level;
    int found = LEVEL_NONE;
    const char * dot = memra_dot_isa();
    if (strcmp(dot, "avx512vnni") == 0) {
        /* (quant-dot's AVX-512 path already required F/BW/VL/DQ with the OS saving ZMM state;
         * MEMRA_NO_AVX512BF16=1 leaves vdpbf16ps out, so that the tests reach the widening tiles) */
        found = LEVEL_AVX512;
        const char * no_bf16 = getenv("MEMRA_NO_AVX512BF16");
        unsigned int eax, ebx, ecx, edx;
        if (__get_cpuid_max(0, NULL) >= 7 && !(no_bf16 && strcmp(no_bf16, "1") == 0)) {
            __cpuid_count(7, 1, eax, ebx, ecx, edx);
            if ((eax >> 5) & 1) found = LEVEL_AVX512_BF16;
        }
    } else if (strcmp(dot, "avx2") == 0) {
        found = LEVEL_AVX2; /* (quant-dot's AVX2 path required AVX2, FMA and F16C) */
    }
    level = found;
    return level;
}

F16_INLINE void store_tile(const int WR, const int AR, __m512 acc[4][4], float * out, int64_t out_stride) {
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) {
        if (WR == 4) {
            _mm_storeu_ps(out + c * out_stride, memra_gemm_reduce4(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
        } else {
            _Pragma("GCC unroll 4")
            for (int r = 0; r < WR; r++) out[c * out_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
        }
    }
}

/* 16 weights as f32: f16 by vcvtph2ps, bf16 by a shift into the high half. */
F16_INLINE __m512 widen16(const int bf16, const uint8_t * p) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

/* An f16 (or bf16) weight row is n * 2 bytes: 16 values per widening. */
F16_INLINE void f16_tile(const int bf16, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const float * a, size_t a_stride, float * out,
                         int64_t out_stride) {
    __m512 acc[4][4];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 x[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) x[c] = _mm512_loadu_ps(a + c * a_stride + i);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) {
            const __m512 wv = widen16(bf16, w + r * w_stride + 2 * i);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) acc[r][c] = _mm512_fmadd_ps(wv, x[c], acc[r][c]);
        }
    }
    store_tile(WR, AR, acc, out, out_stride);
}

/* bf16 rows: 32 values per vdpbf16ps (lane i: pairs 2i, 2i+1). */
BF16_INLINE void bf16_tile(const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * a, size_t a_stride, float * out,
                           int64_t out_stride) {
    __m512 acc[4][4];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 32) {
        __m512bh x[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) x[c] = (__m512bh)_mm512_loadu_si512(a + c * a_stride + 2 * i);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) {
            const __m512bh wv = (__m512bh)_mm512_loadu_si512(w + r * w_stride + 2 * i);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv, x[c]);
        }
    }
    store_tile(WR, AR, acc, out, out_stride);
}

/* ---- AVX2 ---- */

A2_INLINE __m256 widen8(const int bf16, const uint8_t * p) {
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    return bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

/* The packed row of the widening tiles: the dot path's f16 (bf16) rounding of the row, widened back to
 * f32 (exact). The half-width row is written into the second half of the output first (bytes 2n..4n)
 * and widened front to back, the writes staying behind the reads. */
A2_FN void pack_widened(int type, const float * x, float * out, int64_t n) {
    uint16_t * half = (uint16_t *)(out + n / 2);
    memra_quantize_activation_row(type, x, half, n);
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, widen8(type == MEMRA_TYPE_BF16, (const uint8_t *)(half + i)));
}

A2_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* Weight rows [r0, r0 + WR) (WR <= 2) against AR activation rows: 8 values per step. */
A2_INLINE void half_tile_avx2(const int bf16, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const float * a,
                              size_t a_stride, float * out, int64_t out_stride) {
    __m256 acc[2][4];
    _Pragma("GCC unroll 2")
    for (int r = 0; r < 2; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 x[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) x[c] = _mm256_loadu_ps(a + c * a_stride + i);
        _Pragma("GCC unroll 2")
        for (int r = 0; r < WR; r++) {
            const __m256 wv = widen8(bf16, w + r * w_stride + 2 * i);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) acc[r][c] = _mm256_fmadd_ps(wv, x[c], acc[r][c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++)
        _Pragma("GCC unroll 2")
        for (int r = 0; r < WR; r++) out[c * out_stride + r] = hsum8(acc[r][c]);
}

A2_INLINE void tile_avx2(const int bf16, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const float * a, size_t a_stride,
                         float * out, int64_t out_stride) {
    half_tile_avx2(bf16, WR < 2 ? WR : 2, AR, n, w, w_stride, a, a_stride, out, out_stride);
    if (WR > 2) half_tile_avx2(bf16, WR - 2, AR, n, w + 2 * w_stride, w_stride, a, a_stride, out + 2, out_stride);
}

/* The kernels in the shape of memra_gemm_tile_kernel (packed f32 rows: a_stride in bytes). */
#define FLOAT_KERNEL(name, attr, call)                                                                                \
    attr void name(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) { \
        call;                                                                                                             \
    }
FLOAT_KERNEL(f16_k, F16_INLINE, f16_tile(0, WR, AR, n, w, ws, (const float *)a, as / sizeof(float), out, os))
FLOAT_KERNEL(bf16_wide_k, F16_INLINE, f16_tile(1, WR, AR, n, w, ws, (const float *)a, as / sizeof(float), out, os))
FLOAT_KERNEL(bf16_dp_k, BF16_INLINE, bf16_tile(WR, AR, n, w, ws, a, as, out, os))
FLOAT_KERNEL(f16_a2_k, A2_INLINE, tile_avx2(0, WR, AR, n, w, ws, (const float *)a, as / sizeof(float), out, os))
FLOAT_KERNEL(bf16_a2_k, A2_INLINE, tile_avx2(1, WR, AR, n, w, ws, (const float *)a, as / sizeof(float), out, os))

TILE_FNS_ATTR(F16_FN, f16_avx512, f16_k)
TILE_FNS_ATTR(F16_FN, bf16_avx512, bf16_wide_k)
TILE_FNS_ATTR(BF16_FN, bf16_avx512bf16, bf16_dp_k)
TILE_FNS_ATTR(A2_FN, f16_avx2, f16_a2_k)
TILE_FNS_ATTR(A2_FN, bf16_avx2, bf16_a2_k)
static memra_gemm_tile_kernel * const f16_tiles[4][4] = TILE_TABLE(f16_avx512);
static memra_gemm_tile_kernel * const bf16_tiles[4][4] = TILE_TABLE(bf16_avx512);
static memra_gemm_tile_kernel * const bf16_dp_tiles[4][4] = TILE_TABLE(bf16_avx512bf16);
static memra_gemm_tile_kernel * const f16_tiles_avx2[4][4] = TILE_TABLE(f16_avx2);
static memra_gemm_tile_kernel * const bf16_tiles_avx2[4][4] = TILE_TABLE(bf16_avx2);

#endif /* x86 */

const char * memra_gemm_float_isa(void) {
#ifdef MEMRA_GEMM_FLOAT_X86
    switch (float_level()) {
    case LEVEL_AVX512_BF16: return "avx512bf16";
    case LEVEL_AVX512: return "avx512f";
    case LEVEL_AVX2: return "avx2";
    default: break;
    }
#endif
    return "none";
}

size_t memra_gemm_float_packed_row_bytes(int type, int64_t n) {
#ifdef MEMRA_GEMM_FLOAT_X86
    if (n <= 0 || n % 32 != 0 || float_level() == LEVEL_NONE) return 0;
    if (type == MEMRA_TYPE_F16) return (size_t)n * sizeof(float);
    if (type == MEMRA_TYPE_BF16) return float_level() == LEVEL_AVX512_BF16 ? (size_t)n * 2 : (size_t)n * sizeof(float);
#else
    (void)type; (void)n;
#endif
    return 0;
}

void memra_gemm_float_pack_row(int type, const float * x, void * out, int64_t n) {
#ifdef MEMRA_GEMM_FLOAT_X86
    if (type == MEMRA_TYPE_BF16 && float_level() == LEVEL_AVX512_BF16) memra_quantize_activation_row(MEMRA_TYPE_BF16, x, out, n);
    else if (type == MEMRA_TYPE_F16 || type == MEMRA_TYPE_BF16) pack_widened(type, x, out, n);
#else
    (void)type; (void)x; (void)out; (void)n;
#endif
}

void memra_gemm_float_tile(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, const void * packed, size_t a_stride, int a_rows,
                           float * out, int64_t out_stride) {
#ifdef MEMRA_GEMM_FLOAT_X86
    const int level = float_level();
    memra_gemm_tile_kernel * const(*table)[4] = NULL;
    if (type == MEMRA_TYPE_F16) table = level == LEVEL_AVX2 ? f16_tiles_avx2 : f16_tiles;
    if (type == MEMRA_TYPE_BF16) table = level == LEVEL_AVX2 ? bf16_tiles_avx2 : level == LEVEL_AVX512 ? bf16_tiles : bf16_dp_tiles;
    if (table) table[w_rows - 1][a_rows - 1](n, weight, w_stride, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)weight; (void)w_stride; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}
