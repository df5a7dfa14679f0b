/*
 * Blocked matrix-matrix kernels (see gemm.h). x86 AVX-512 with VNNI and VBMI (Ice Lake, Zen 4 and
 * later); other CPUs use the dot-product path of quant-dot.c.
 *
 * q8_0 (weights) x q8_0 (activations), four 32-value blocks per step:
 *   packed activation group (256 bytes per 128 values):
 *     [  0.. 63] lo: 128-bit lane i = block i's values 0..15
 *     [ 64..127] hi: lane i = block i's values 16..31
 *     [128..191] base: int32 lane j = -128 * (sum of the 8 activation bytes that land in lane j)
 *     [192..255] d: float lane j = the f16 scale of block j/4, as f32
 *   the four weight blocks (136 bytes) are brought to the same layout with two byte permutes
 *   (vpermt2b) and made unsigned (w + 128) so that vpdpbusd multiplies them with the signed
 *   activations; base takes the 128 * sum(a) back. Per tile pair and step: two vpdpbusd, one
 *   conversion, one multiply of the scales, one fma.
 */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#include "quant-dot.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(MEMRA_NO_SIMD)
#define MEMRA_GEMM_X86 1
#include <cpuid.h>
#include <immintrin.h>

#define TARGET_VBMI "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi"
#define VBMI_FN static __attribute__((target(TARGET_VBMI)))
#define VBMI_INLINE static inline __attribute__((target(TARGET_VBMI), always_inline))

enum { Q8_0_BYTES = 34, Q8_0_GROUP = 8 * Q8_0_BYTES, PACKED_Q8_0_GROUP = 384 };

/* AVX-512 F/BW/VL/DQ/VNNI/VBMI with the OS saving ZMM state. */
static int cpu_has_vbmi_vnni(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    if (!((ecx >> 27) & 1)) return 0; /* OSXSAVE */
    unsigned int xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 0xe6u) != 0xe6u) return 0;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const int f = (ebx >> 16) & 1, dq = (ebx >> 17) & 1, bw = (ebx >> 30) & 1, vl = (ebx >> 31) & 1;
    const int vbmi = (ecx >> 1) & 1, vnni = (ecx >> 11) & 1;
    return f && dq && bw && vl && vbmi && vnni;
}

/* ---- q8_0 ---- */

VBMI_FN void pack_q8_0(const float * x, uint8_t * out, int64_t n) {
    uint8_t q8[Q8_0_GROUP];
    for (int64_t g = 0; g < n / 256; g++, x += 256, out += PACKED_Q8_0_GROUP) {
        /* the activation rounding of the dot-product path, eight blocks at a time */
        memra_quantize_activation_row(MEMRA_TYPE_Q8_0, x, q8, 256);
        int32_t base[16];
        float d[16];
        for (int p = 0; p < 8; p++) {
            const uint8_t * block = q8 + p * Q8_0_BYTES;
            for (int q = 0; q < 4; q++) memcpy(out + 64 * q + 8 * p, block + 2 + 8 * q, 8);
            uint16_t h;
            memcpy(&h, block, 2);
            const float scale = _cvtsh_ss(h);
            for (int half = 0; half < 2; half++) {
                int sum = 0;
                for (int q = 0; q < 4; q++)
                    for (int k = 0; k < 4; k++) sum += (int8_t)block[2 + 8 * q + 4 * half + k];
                base[2 * p + half] = -128 * sum;
                d[2 * p + half] = scale;
            }
        }
        memcpy(out + 256, base, sizeof base);
        memcpy(out + 320, d, sizeof d);
    }
}

/* vpermt2b control: output byte 8p + k (p < 4, k < 8) = window byte 34p + 2 + k, where the window is
 * 128 bytes starting 8q bytes into a four-block half of the group: values 8q..8q+7 of block p. */
VBMI_INLINE __m512i q8_0_byte_index(void) {
    uint8_t index[64];
    for (int j = 0; j < 64; j++) index[j] = (uint8_t)(34 * ((j / 8) & 3) + 2 + j % 8);
    return _mm512_loadu_si512(index);
}
/* vpermt2w control: output words 2p, 2p+1 = the f16 scale of block p (word 17p of its half's window). */
VBMI_INLINE __m512i q8_0_scale_index(void) {
    uint16_t index[32];
    for (int k = 0; k < 32; k++) index[k] = (uint16_t)(17 * ((k / 2) & 3));
    return _mm512_loadu_si512(index);
}

/* The four value vectors of eight weight blocks (q8_0_tile's layout) and their scales. The second
 * half's windows run up to 16 bytes past the group for q = 2, 3: masked loads, which never fault. */
VBMI_INLINE void q8_0_unpack8(const uint8_t * p, __m512i byte_index, __m512i scale_index, __m512i v[4], __m512 * d) {
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    __m512i first0 = _mm512_setzero_si512(), first1 = first0, second0 = first0, second1 = first0;
    _Pragma("GCC unroll 4")
    for (int q = 0; q < 4; q++) {
        const __m512i a0 = _mm512_loadu_si512(p + 8 * q), a1 = _mm512_loadu_si512(p + 64 + 8 * q);
        const __m512i b0 = _mm512_loadu_si512(p + 136 + 8 * q);
        const __m512i b1 = q < 2 ? _mm512_loadu_si512(p + 200 + 8 * q) : _mm512_maskz_loadu_epi8((__mmask64)(~0ull >> (8 * (q - 1))), p + 200 + 8 * q);
        if (q == 0) {
            first0 = a0; first1 = a1; second0 = b0; second1 = b1;
        }
        const __m512i lo = _mm512_permutex2var_epi8(a0, byte_index, a1);
        const __m512i hi = _mm512_permutex2var_epi8(b0, byte_index, b1);
        v[q] = _mm512_xor_si512(_mm512_inserti64x4(lo, _mm512_castsi512_si256(hi), 1), x80);
    }
    const __m512i s0 = _mm512_permutex2var_epi16(first0, scale_index, first1);
    const __m512i s1 = _mm512_permutex2var_epi16(second0, scale_index, second1);
    /* words 0..7 from the first half, 8..15 from the second (its words 0..7 moved up by 8) */
    const __m512i both = _mm512_mask_blend_epi16(0xff00, s0, _mm512_alignr_epi64(s1, s1, 6));
    *d = _mm512_cvtph_ps(_mm512_castsi512_si256(both));
}

/* Sums the 16 lanes of each of acc[0..3] into one 128-bit vector {sum acc[0], ..., sum acc[3]}. */
VBMI_INLINE __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    const __m256 h0 = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
    const __m256 h1 = _mm256_add_ps(_mm512_castps512_ps256(a1), _mm512_extractf32x8_ps(a1, 1));
    const __m256 h2 = _mm256_add_ps(_mm512_castps512_ps256(a2), _mm512_extractf32x8_ps(a2, 1));
    const __m256 h3 = _mm256_add_ps(_mm512_castps512_ps256(a3), _mm512_extractf32x8_ps(a3, 1));
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(h0, h1), _mm256_hadd_ps(h2, h3));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* Eight blocks (256 values) per step. Vector q holds, for block p, its values 8q..8q+7 in bytes
 * 8p..8p+7, so after four vpdpbusd int32 lanes 2p and 2p+1 hold block p's sums; packed activation
 * group (384 bytes): the four vectors, then int32 base (-128 * sum of the activation bytes of each
 * lane), then float scales (lanes 2p, 2p+1: block p's). */
VBMI_INLINE void q8_0_tile(const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * a, size_t a_stride, float * out,
                           int64_t out_stride) {
    const __m512i byte_index = q8_0_byte_index(), scale_index = q8_0_scale_index();
    __m512 acc[MEMRA_GEMM_TILE_W][MEMRA_GEMM_TILE_A];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < WR; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) acc[r][c] = _mm512_setzero_ps();
    const int64_t groups = n / 256;
    for (int64_t g = 0; g < groups; g++) {
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) {
            __m512i v[4];
            __m512 wd;
            q8_0_unpack8(w + r * w_stride + g * Q8_0_GROUP, byte_index, scale_index, v, &wd);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) {
                const uint8_t * q = a + c * a_stride + g * PACKED_Q8_0_GROUP;
                __m512i s = _mm512_loadu_si512(q + 256);
                s = _mm512_dpbusd_epi32(s, v[0], _mm512_loadu_si512(q));
                s = _mm512_dpbusd_epi32(s, v[1], _mm512_loadu_si512(q + 64));
                s = _mm512_dpbusd_epi32(s, v[2], _mm512_loadu_si512(q + 128));
                s = _mm512_dpbusd_epi32(s, v[3], _mm512_loadu_si512(q + 192));
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, _mm512_loadu_ps(q + 320)), acc[r][c]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) {
        if (WR == 4) {
            _mm_storeu_ps(out + c * out_stride, reduce4(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
        } else {
            _Pragma("GCC unroll 4")
            for (int r = 0; r < WR; r++) out[c * out_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
        }
    }
}

/* One function per tile shape, so that every loop above has constant bounds. */
#define TILE_FN(name, kernel, WR, AR)                                                                                  \
    VBMI_FN void name##_##WR##x##AR(int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) { \
        kernel(WR, AR, n, w, ws, a, as, out, os);                                                                      \
    }
#define TILE_FNS(name, kernel)                                                                                         \
    TILE_FN(name, kernel, 1, 1) TILE_FN(name, kernel, 1, 2) TILE_FN(name, kernel, 1, 3) TILE_FN(name, kernel, 1, 4)   \
    TILE_FN(name, kernel, 2, 1) TILE_FN(name, kernel, 2, 2) TILE_FN(name, kernel, 2, 3) TILE_FN(name, kernel, 2, 4)   \
    TILE_FN(name, kernel, 3, 1) TILE_FN(name, kernel, 3, 2) TILE_FN(name, kernel, 3, 3) TILE_FN(name, kernel, 3, 4)   \
    TILE_FN(name, kernel, 4, 1) TILE_FN(name, kernel, 4, 2) TILE_FN(name, kernel, 4, 3) TILE_FN(name, kernel, 4, 4)
#define TILE_TABLE(name)                                                                                               \
    {                                                                                                                  \
        { name##_1x1, name##_1x2, name##_1x3, name##_1x4 }, { name##_2x1, name##_2x2, name##_2x3, name##_2x4 },        \
        { name##_3x1, name##_3x2, name##_3x3, name##_3x4 }, { name##_4x1, name##_4x2, name##_4x3, name##_4x4 },        \
    }

typedef void tile_kernel(int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os);

TILE_FNS(q8_0_vbmi, q8_0_tile)
static tile_kernel * const q8_0_tiles[4][4] = TILE_TABLE(q8_0_vbmi);

#endif /* x86 */

/* ---- dispatch ---- */

/* 1 when the AVX-512 VBMI kernels run: the CPU has them, quant-dot chose its AVX-512 path (so
 * MEMRA_CPU_ISA=avx2|scalar turns these off too) and MEMRA_GEMM is not "0". Decided once. */
static int gemm_enabled(void) {
    static int state = -1;
    if (state < 0) {
        int enabled = 0;
#ifdef MEMRA_GEMM_X86
        const char * setting = getenv("MEMRA_GEMM");
        enabled = cpu_has_vbmi_vnni() && strcmp(memra_dot_isa(), "avx512vnni") == 0 && !(setting && strcmp(setting, "0") == 0);
#endif
        state = enabled;
    }
    return state;
}

const char * memra_gemm_isa(void) { return gemm_enabled() ? "avx512vbmi" : "none"; }

size_t memra_gemm_packed_row_bytes(int type, int64_t n) {
    if (!gemm_enabled() || n <= 0) return 0;
#ifdef MEMRA_GEMM_X86
    if (type == MEMRA_TYPE_Q8_0 && n % 256 == 0) return (size_t)(n / 256) * PACKED_Q8_0_GROUP;
#endif
    return 0;
}

void memra_gemm_pack_row(int type, const float * x, void * out, int64_t n) {
#ifdef MEMRA_GEMM_X86
    if (type == MEMRA_TYPE_Q8_0) pack_q8_0(x, out, n);
#else
    (void)type; (void)x; (void)out; (void)n;
#endif
}

void memra_gemm_tile(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, const void * packed, size_t a_stride, int a_rows,
                     float * out, int64_t out_stride) {
#ifdef MEMRA_GEMM_X86
    if (type == MEMRA_TYPE_Q8_0) q8_0_tiles[w_rows - 1][a_rows - 1](n, weight, w_stride, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)weight; (void)w_stride; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}
