/*
 * Blocked matrix-matrix kernels (see gemm.h). x86 AVX-512 with VNNI and VBMI (Ice Lake, Zen 4 and
 * later), and x86 AVX2 + FMA + F16C (Haswell, Zen 1 and later: the second half of this file); other
 * CPUs use the dot-product path of quant-dot.c. The dispatch at the end picks one family at run time.
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

#include "gemm-float.h"
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

/* The tiles' unsigned codes are the weight values + 128, taken back by the base vector, -128 * (sum of
 * each lane's activation bytes). */
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

/* Eight blocks (256 values) per step. Vector q holds, for block p, its values 8q..8q+7 in bytes
 * 8p..8p+7, so after four vpdpbusd int32 lanes 2p and 2p+1 hold block p's sums; packed activation
 * group (384 bytes): the four vectors, then int32 base (-128 * sum of the activation bytes of each
 * lane), then float scales (lanes 2p, 2p+1: block p's). */
/* UNPACKED: `w` is memra_gemm_unpack's buffer ([group][4 rows][v0..v3, scales]) instead of the rows. */
enum { Q8_0_UNPACKED = 320 };

VBMI_INLINE void q8_0_tile(const int UNPACKED, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride,
                           const uint8_t * a, size_t a_stride, float * out, int64_t out_stride) {
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
            if (UNPACKED) {
                const uint8_t * u = w + (g * MEMRA_GEMM_TILE_W + r) * Q8_0_UNPACKED;
                for (int k = 0; k < 4; k++) v[k] = _mm512_loadu_si512(u + 64 * k);
                wd = _mm512_loadu_ps(u + 256);
            } else {
                q8_0_unpack8(w + r * w_stride + g * Q8_0_GROUP, byte_index, scale_index, v, &wd);
            }
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
            _mm_storeu_ps(out + c * out_stride, memra_gemm_reduce4(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
        } else {
            _Pragma("GCC unroll 4")
            for (int r = 0; r < WR; r++) out[c * out_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
        }
    }
}

VBMI_FN void unpack_q8_0(int64_t n, const uint8_t * w, size_t w_stride, int w_rows, uint8_t * out) {
    const __m512i byte_index = q8_0_byte_index(), scale_index = q8_0_scale_index();
    for (int64_t g = 0; g < n / 256; g++) {
        for (int r = 0; r < w_rows; r++) {
            __m512i v[4];
            __m512 wd;
            q8_0_unpack8(w + r * w_stride + g * Q8_0_GROUP, byte_index, scale_index, v, &wd);
            uint8_t * u = out + (g * MEMRA_GEMM_TILE_W + r) * Q8_0_UNPACKED;
            for (int k = 0; k < 4; k++) _mm512_storeu_si512(u + 64 * k, v[k]);
            _mm512_storeu_ps(u + 256, wd);
        }
    }
}

/* ---- q4_0, 512 values per step ----
 * Sixteen blocks per step, one per int32 lane: vector k (k < 8) holds in lane p values 4k..4k+3 of
 * block p, so eight vpdpbusd sum each whole block in its own lane, and one conversion, one multiply of
 * the scales and one fma per weight row and activation row cover 512 values (q8_0's layout above needs
 * them per 256). The weights are their unsigned codes (value + 8): values 4k..4k+3 of a block are the
 * low nibbles of its qs dword k for k < 4, the high nibbles of qs dword k - 4 for k >= 4. Four byte
 * permutes (one per four blocks: their qs dwords 0..3, dword k in 128-bit lane k) and a 4 x 4 transpose
 * of 128-bit lanes gather qs dword k of the sixteen blocks into one vector.
 *   packed activation group (640 bytes per 512 values):
 *     [  0..511] vector k: lane p = block p's values 4k..4k+3 (signed bytes)
 *     [512..575] base: int32 lane p = -8 * (sum of block p's 32 values)
 *     [576..639] d: float lane p = block p's f16 scale, as f32
 *   A row of 256 x odd values ends with a group of eight blocks: lanes 8..15 are zero there (values,
 *   base, scales, and the weights' codes and scales), so they add exactly nothing.
 * UNPACKED: `w` is memra_gemm_unpack's buffer ([group][4 rows][v0..v7, scales], 576 bytes a row). */
enum { Q4_0_BYTES = 18, Q4_0_GROUP = 8 * Q4_0_BYTES, PACKED_Q4_0_GROUP = 640, Q4_0_UNPACKED = 576 };

VBMI_FN void pack_q4_0(const float * x, uint8_t * out, int64_t n) {
    uint8_t q8[16 * Q8_0_BYTES];
    for (int64_t at = 0; at < n; at += 512, x += 512, out += PACKED_Q4_0_GROUP) {
        const int blocks = n - at >= 512 ? 16 : (int)((n - at) / 32);
        /* the activation rounding of the dot-product path */
        memra_quantize_activation_row(MEMRA_TYPE_Q8_0, x, q8, 32 * blocks);
        int32_t base[16] = { 0 };
        float d[16] = { 0 };
        memset(out, 0, 512);
        for (int p = 0; p < blocks; p++) {
            const uint8_t * block = q8 + p * Q8_0_BYTES;
            for (int k = 0; k < 8; k++) memcpy(out + 64 * k + 4 * p, block + 2 + 4 * k, 4);
            int sum = 0;
            for (int i = 0; i < 32; i++) sum += (int8_t)block[2 + i];
            base[p] = -8 * sum;
            uint16_t h;
            memcpy(&h, block, 2);
            d[p] = _cvtsh_ss(h);
        }
        memcpy(out + 512, base, sizeof base);
        memcpy(out + 576, d, sizeof d);
    }
}

/* vpermt2b control over a 128-byte window at four blocks (18p): output byte 16k + 4p + i = qs byte
 * 4k + i of block p (128-bit lane k: qs dword k of the four blocks). */
VBMI_INLINE __m512i q4_0_dword_index(void) {
    uint8_t index[64];
    for (int j = 0; j < 64; j++) index[j] = (uint8_t)(18 * ((j % 16) / 4) + 2 + 4 * (j / 16) + j % 4);
    return _mm512_loadu_si512(index);
}
/* vpermt2w control: output words p and 8 + p (p < 8) = the f16 scale of the window's block p (word 9p). */
VBMI_INLINE __m512i q4_0_block_scale_index(void) {
    uint16_t index[32];
    for (int k = 0; k < 32; k++) index[k] = (uint16_t)(9 * (k % 8));
    return _mm512_loadu_si512(index);
}

/* The eight code vectors of sixteen q4_0 blocks at p (HALF: eight blocks, lanes 8..15 zero) and their
 * scales. Each window's last eight bytes come from a masked load, so that nothing past the blocks is
 * read. */
VBMI_INLINE void q4_0_unpack16(const int HALF, const uint8_t * p, __m512i dword_index, __m512i scale_index, __m512i v[8], __m512 * d) {
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i h[4];
    _Pragma("GCC unroll 4")
    for (int w = 0; w < 4; w++) {
        if (HALF && w >= 2) {
            h[w] = _mm512_setzero_si512();
            continue;
        }
        const __m512i a0 = _mm512_loadu_si512(p + 72 * w), a1 = _mm512_maskz_loadu_epi8((__mmask64)0xff, p + 72 * w + 64);
        h[w] = _mm512_permutex2var_epi8(a0, dword_index, a1);
    }
    /* 128-bit lane w of vector k = lane k of h[w] */
    const __m512i t01_lo = _mm512_shuffle_i64x2(h[0], h[1], _MM_SHUFFLE(1, 0, 1, 0)), t01_hi = _mm512_shuffle_i64x2(h[0], h[1], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i t23_lo = _mm512_shuffle_i64x2(h[2], h[3], _MM_SHUFFLE(1, 0, 1, 0)), t23_hi = _mm512_shuffle_i64x2(h[2], h[3], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i q[4] = {
        _mm512_shuffle_i64x2(t01_lo, t23_lo, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i64x2(t01_lo, t23_lo, _MM_SHUFFLE(3, 1, 3, 1)),
        _mm512_shuffle_i64x2(t01_hi, t23_hi, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i64x2(t01_hi, t23_hi, _MM_SHUFFLE(3, 1, 3, 1)),
    };
    _Pragma("GCC unroll 4")
    for (int k = 0; k < 4; k++) {
        v[k] = _mm512_and_si512(q[k], m4);
        v[4 + k] = _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4);
    }
    __m512i s = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), scale_index, _mm512_loadu_si512(p + 64));
    if (HALF) s = _mm512_maskz_mov_epi16(0x00ff, s);
    else s = _mm512_mask_blend_epi16(0xff00, s, _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 144), scale_index, _mm512_loadu_si512(p + 208)));
    *d = _mm512_cvtph_ps(_mm512_castsi512_si256(s));
}

/* One step (512 values, HALF: 256) of a q4_0 tile: group g of the weight rows (or of the unpacked buffer). */
VBMI_INLINE void q4_0_step(const int UNPACKED, const int HALF, const int WR, const int AR, int64_t g, const uint8_t * w, size_t w_stride,
                           const uint8_t * a, size_t a_stride, __m512i dword_index, __m512i scale_index, __m512 acc[MEMRA_GEMM_TILE_W][MEMRA_GEMM_TILE_A]) {
    _Pragma("GCC unroll 4")
    for (int r = 0; r < WR; r++) {
        __m512i v[8];
        __m512 wd;
        if (UNPACKED) {
            const uint8_t * u = w + (g * MEMRA_GEMM_TILE_W + r) * Q4_0_UNPACKED;
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++) v[k] = _mm512_loadu_si512(u + 64 * k);
            wd = _mm512_loadu_ps(u + 512);
        } else {
            q4_0_unpack16(HALF, w + r * w_stride + g * 16 * Q4_0_BYTES, dword_index, scale_index, v, &wd);
        }
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) {
            const uint8_t * q = a + c * a_stride + g * PACKED_Q4_0_GROUP;
            /* (two chains of four dependent vpdpbusd, joined by one add: shorter latency per pair) */
            __m512i s0 = _mm512_loadu_si512(q + 512), s1 = _mm512_setzero_si512();
            _Pragma("GCC unroll 4")
            for (int k = 0; k < 4; k++) {
                s0 = _mm512_dpbusd_epi32(s0, v[k], _mm512_loadu_si512(q + 64 * k));
                s1 = _mm512_dpbusd_epi32(s1, v[4 + k], _mm512_loadu_si512(q + 256 + 64 * k));
            }
            const __m512i s = _mm512_add_epi32(s0, s1);
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, _mm512_loadu_ps(q + 576)), acc[r][c]);
        }
    }
}

VBMI_INLINE void q4_0_tile(const int UNPACKED, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * a,
                           size_t a_stride, float * out, int64_t out_stride) {
    const __m512i dword_index = q4_0_dword_index(), scale_index = q4_0_block_scale_index();
    __m512 acc[MEMRA_GEMM_TILE_W][MEMRA_GEMM_TILE_A];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < WR; r++)
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) acc[r][c] = _mm512_setzero_ps();
    const int64_t full = n / 512;
    for (int64_t g = 0; g < full; g++) q4_0_step(UNPACKED, 0, WR, AR, g, w, w_stride, a, a_stride, dword_index, scale_index, acc);
    if (n % 512 != 0) q4_0_step(UNPACKED, 1, WR, AR, full, w, w_stride, a, a_stride, dword_index, scale_index, acc);
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

VBMI_FN void unpack_q4_0(int64_t n, const uint8_t * w, size_t w_stride, int w_rows, uint8_t * out) {
    const __m512i dword_index = q4_0_dword_index(), scale_index = q4_0_block_scale_index();
    for (int64_t g = 0; g < (n + 511) / 512; g++) {
        for (int r = 0; r < w_rows; r++) {
            __m512i v[8];
            __m512 wd;
            const uint8_t * p = w + r * w_stride + g * 16 * Q4_0_BYTES;
            if ((g + 1) * 512 > n) q4_0_unpack16(1, p, dword_index, scale_index, v, &wd);
            else q4_0_unpack16(0, p, dword_index, scale_index, v, &wd);
            uint8_t * u = out + (g * MEMRA_GEMM_TILE_W + r) * Q4_0_UNPACKED;
            for (int k = 0; k < 8; k++) _mm512_storeu_si512(u + 64 * k, v[k]);
            _mm512_storeu_ps(u + 512, wd);
        }
    }
}

/* ---- q4_K, q5_K, q6_K ----
 * Activations are q8_K (one f32 scale per 256 values). The weight codes are unsigned (q4_K 0..15,
 * q5_K 0..31, q6_K 0..63) and multiplied with the signed activation bytes by vpdpbusd. Each super-block
 * is brought to four code vectors arranged so that int32 lane j of every vector belongs to the same
 * sub-block: four vpdpbusd then sum all 256 products into one vector whose lanes each carry a single
 * sub-block scale, applied in float (ws: lane j = d * scale of lane j's sub-block; exact, as d has 11
 * significant bits and a scale at most 8). Per tile pair and super-block: four vpdpbusd, one conversion,
 * one multiply of the scales, one fma.
 *   q4_K/q5_K (32-value sub-blocks, two lanes each): vector v holds, for each 64-value chunk c, the
 *   codes of values 64c + 8v + (0..7) in bytes 16c..16c+7 (sub-block 2c) and of 64c + 32 + 8v + (0..7)
 *   in bytes 16c+8..16c+15 (sub-block 2c+1): one qword permute of the packed nibbles and a shift of
 *   the odd qwords. The mins term dmin * min * sum(a) (kept apart in float, as ggml does) is an integer
 *   dot product of four weight rows' mins with the activation's 32-value sums.
 *   q6_K (16-value sub-blocks, one lane each): vector v, lane j = values 16j + 4v + (0..3). The codes
 *   are the values + 32; the activation's base vector (lane j: -32 * its 16-value sum) starts each
 *   pair's integer sum, so the sum stays exact.
 * Packed activation group (384 bytes per 256 values):
 *   [  0..255] the activation bytes in the order of the code vectors, signed
 *   [256..319] q4_K/q5_K: the eight 32-value sums (int16) four times; q6_K: the base vector (int32)
 *   [320..383] the f32 scale, 16 times
 * UNPACKED: `w` is memra_gemm_unpack's buffer: per super-block, 4 rows x [u0..u3, ws] and then (q4_K,
 * q5_K) the mins vector and the dmin lanes of k4_mins. */

enum { Q4_K_BYTES = 144, Q5_K_BYTES = 176, Q6_K_BYTES = 210, Q8_K_BYTES = 292, PACKED_K_GROUP = 384 };
enum { KIND_Q4_K = 0, KIND_Q5_K = 1, KIND_Q6_K = 2 };
enum { K_ROW = 320, K_GROUP = MEMRA_GEMM_TILE_W * K_ROW + 128 };

static inline uint64_t load_u64(const uint8_t * p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t load_u32(const uint8_t * p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t load_u16(const uint8_t * p) { uint16_t v; memcpy(&v, p, 2); return v; }

VBMI_FN void pack_k(int kind, const float * x, uint8_t * out, int64_t n) {
    uint8_t q8k[Q8_K_BYTES];
    for (int64_t g = 0; g < n / 256; g++, x += 256, out += PACKED_K_GROUP) {
        memra_quantize_activation_row(MEMRA_TYPE_Q4_K, x, q8k, 256); /* q8_K, as for every K type */
        const uint8_t * qs = q8k + 4;
        int16_t bsums[16];
        memcpy(bsums, q8k + 260, sizeof bsums);
        if (kind == KIND_Q6_K) {
            int32_t base[16];
            for (int v = 0; v < 4; v++)
                for (int j = 0; j < 16; j++) memcpy(out + 64 * v + 4 * j, qs + 16 * j + 4 * v, 4);
            for (int j = 0; j < 16; j++) base[j] = -32 * bsums[j];
            memcpy(out + 256, base, sizeof base);
        } else {
            for (int v = 0; v < 4; v++)
                for (int c = 0; c < 4; c++) {
                    memcpy(out + 64 * v + 16 * c, qs + 64 * c + 8 * v, 8);
                    memcpy(out + 64 * v + 16 * c + 8, qs + 64 * c + 32 + 8 * v, 8);
                }
            int16_t sums[32];
            for (int j = 0; j < 8; j++)
                for (int copy = 0; copy < 4; copy++) sums[8 * copy + j] = (int16_t)(bsums[2 * j] + bsums[2 * j + 1]);
            memcpy(out + 256, sums, sizeof sums);
        }
        float d;
        memcpy(&d, q8k, 4);
        for (int k = 0; k < 16; k++) memcpy(out + 320 + 4 * k, &d, 4);
    }
}

/* q4_K/q5_K's 12 scale bytes -> 8 six-bit scales and 8 six-bit mins (bytes). */
static inline void q4k_scales_mins(const uint8_t * s, uint64_t * scales, uint64_t * mins) {
    const uint32_t a0 = load_u32(s), a1 = load_u32(s + 4), a2 = load_u32(s + 8);
    const uint32_t sc_lo = a0 & 0x3f3f3f3fu, mn_lo = a1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | ((a0 >> 6) & 0x03030303u) << 4;
    const uint32_t mn_hi = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 6) & 0x03030303u) << 4;
    *scales = sc_lo | (uint64_t)sc_hi << 32;
    *mins = mn_lo | (uint64_t)mn_hi << 32;
}

/* Permute controls: q4_K/q5_K, vpermt2q: qwords 2c, 2c+1 of vector v = qs qword 4c + v (bytes 32c + 8v..);
 * q6_K: lane j of vector v (sub-block j: half n = j / 8, quarter i = (j % 8) / 2, l = 16 (j % 2) + 4v)
 * takes ql dword 16n + 8 (i % 2) + 4 (j % 2) + v (vpermt2d) and qh dword 8n + 4 (j % 2) + v (vpermd). */
VBMI_INLINE void k_index(const int kind, __m512i ql[4], __m512i qh[4]) {
    _Pragma("GCC unroll 4")
    for (int v = 0; v < 4; v++) {
        if (kind == KIND_Q6_K) {
            int32_t l[16], h[16];
            for (int j = 0; j < 16; j++) {
                l[j] = 16 * (j / 8) + 8 * ((j % 8) / 2 % 2) + 4 * (j % 2) + v;
                h[j] = 8 * (j / 8) + 4 * (j % 2) + v;
            }
            ql[v] = _mm512_loadu_si512(l);
            qh[v] = _mm512_loadu_si512(h);
        } else {
            ql[v] = _mm512_setr_epi64(v, v, 4 + v, 4 + v, 8 + v, 8 + v, 12 + v, 12 + v);
            qh[v] = _mm512_setzero_si512();
        }
    }
}

/* One super-block of a row: code vectors u[4], scale vector ws, and (q4_K/q5_K) the 8 mins (int16) and dmin. */
VBMI_INLINE void k_unpack(const int kind, const uint8_t * x, const __m512i ql_index[4], const __m512i qh_index[4], __m512i u[4], __m512 * ws,
                          __m128i * mins, float * dmin) {
    const __m512i m4 = _mm512_set1_epi8(15);
    if (kind == KIND_Q6_K) {
        const __m512i l0 = _mm512_loadu_si512(x), l1 = _mm512_loadu_si512(x + 64), h = _mm512_loadu_si512(x + 128);
        /* quarter i of lane j: low nibbles for i < 2 (j % 8 < 4), high for i >= 2; qh bits 2i, 2i+1 */
        const __m512i shift = _mm512_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6, 0, 0, 2, 2, 4, 4, 6, 6);
        const __m512i m3 = _mm512_set1_epi8(3);
        _Pragma("GCC unroll 4")
        for (int v = 0; v < 4; v++) {
            const __m512i p = _mm512_permutex2var_epi32(l0, ql_index[v], l1);
            const __m512i low = _mm512_and_si512(_mm512_mask_srli_epi32(p, 0xf0f0, p, 4), m4);
            const __m512i high = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(qh_index[v], h), shift), m3);
            u[v] = _mm512_or_si512(low, _mm512_slli_epi32(high, 4));
        }
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x + 192))));
        *ws = _mm512_mul_ps(sc, _mm512_set1_ps(_cvtsh_ss(load_u16(x + 208))));
        *mins = _mm_setzero_si128();
        *dmin = 0.0f;
        return;
    }
    const int qs_at = kind == KIND_Q5_K ? 48 : 16;
    const __m512i q0 = _mm512_loadu_si512(x + qs_at), q1 = _mm512_loadu_si512(x + qs_at + 64);
    _Pragma("GCC unroll 4")
    for (int v = 0; v < 4; v++) {
        const __m512i p = _mm512_permutex2var_epi64(q0, ql_index[v], q1);
        u[v] = _mm512_and_si512(_mm512_mask_srli_epi64(p, 0xaa, p, 4), m4); /* odd qwords: the high nibbles */
        if (kind == KIND_Q5_K) {
            /* fifth bit: qh[l] bit 2c for chunk c's low nibbles, 2c+1 for its high nibbles, so byte
             * 16c + 8h + k of vector v takes bit 2c + h (its qword's index) of qh[8v + k] */
            const __m512i qh = _mm512_set1_epi64((long long)load_u64(x + 16 + 8 * v));
            const __m512i bit = _mm512_setr_epi64(0x0101010101010101ll, 0x0202020202020202ll, 0x0404040404040404ll, 0x0808080808080808ll,
                                                  0x1010101010101010ll, 0x2020202020202020ll, 0x4040404040404040ll, (long long)0x8080808080808080ull);
            u[v] = _mm512_mask_add_epi8(u[v], _mm512_test_epi8_mask(qh, bit), u[v], _mm512_set1_epi8(16));
        }
    }
    uint64_t scales, min_codes;
    q4k_scales_mins(x + 4, &scales, &min_codes);
    const __m128i pairs = _mm_shuffle_epi8(_mm_cvtsi64_si128((long long)scales), _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
    *ws = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(pairs)), _mm512_set1_ps(_cvtsh_ss(load_u16(x))));
    *mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)min_codes));
    *dmin = _cvtsh_ss(load_u16(x + 2));
}

/* The mins of four weight rows (int16 lanes 8r..8r+7) and their dmin (float lanes 4r..4r+3), for one
 * vpmaddwd with the activation's eight 32-value sums (lanes 4r..4r+3 then add up to row r's term). */
VBMI_INLINE void k4_mins(const __m128i mins[4], const float dmin[4], __m512i * t, __m512 * f) {
    *t = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_m128i(mins[0], mins[1])), _mm256_setr_m128i(mins[2], mins[3]), 1);
    *f = _mm512_setr_ps(dmin[0], dmin[0], dmin[0], dmin[0], dmin[1], dmin[1], dmin[1], dmin[1], dmin[2], dmin[2], dmin[2], dmin[2], dmin[3], dmin[3],
                        dmin[3], dmin[3]);
}

VBMI_INLINE void k_tile(const int UNPACKED, const int kind, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * a,
                        size_t a_stride, float * out, int64_t out_stride) {
    const int block_bytes = kind == KIND_Q6_K ? Q6_K_BYTES : kind == KIND_Q5_K ? Q5_K_BYTES : Q4_K_BYTES;
    const int has_mins = kind != KIND_Q6_K;
    __m512i ql_index[4], qh_index[4];
    k_index(kind, ql_index, qh_index);
    __m512 acc[MEMRA_GEMM_TILE_W][MEMRA_GEMM_TILE_A];
    __m512 min_terms[MEMRA_GEMM_TILE_A]; /* one vector per activation row, lanes 4r..4r+3 for weight row r */
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) {
        min_terms[c] = _mm512_setzero_ps();
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) acc[r][c] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < n / 256; g++) {
        __m128i mins[MEMRA_GEMM_TILE_W];
        float dmin[MEMRA_GEMM_TILE_W];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < MEMRA_GEMM_TILE_W; r++) {
            mins[r] = _mm_setzero_si128();
            dmin[r] = 0.0f;
        }
        const uint8_t * group = w + g * K_GROUP;
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) {
            __m512i u[4];
            __m512 ws;
            if (UNPACKED) {
                _Pragma("GCC unroll 4")
                for (int v = 0; v < 4; v++) u[v] = _mm512_loadu_si512(group + r * K_ROW + 64 * v);
                ws = _mm512_loadu_ps(group + r * K_ROW + 256);
            } else {
                k_unpack(kind, w + r * w_stride + g * block_bytes, ql_index, qh_index, u, &ws, &mins[r], &dmin[r]);
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) {
                const uint8_t * q = a + c * a_stride + g * PACKED_K_GROUP;
                __m512i s = has_mins ? _mm512_setzero_si512() : _mm512_loadu_si512(q + 256);
                s = _mm512_dpbusd_epi32(s, u[0], _mm512_loadu_si512(q));
                s = _mm512_dpbusd_epi32(s, u[1], _mm512_loadu_si512(q + 64));
                s = _mm512_dpbusd_epi32(s, u[2], _mm512_loadu_si512(q + 128));
                s = _mm512_dpbusd_epi32(s, u[3], _mm512_loadu_si512(q + 192));
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, _mm512_loadu_ps(q + 320)), acc[r][c]);
            }
        }
        if (has_mins) {
            __m512i t;
            __m512 f;
            if (UNPACKED) {
                t = _mm512_loadu_si512(group + MEMRA_GEMM_TILE_W * K_ROW);
                f = _mm512_loadu_ps(group + MEMRA_GEMM_TILE_W * K_ROW + 64);
            } else {
                k4_mins(mins, dmin, &t, &f);
            }
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) {
                const uint8_t * q = a + c * a_stride + g * PACKED_K_GROUP;
                const __m512 terms = _mm512_cvtepi32_ps(_mm512_madd_epi16(t, _mm512_loadu_si512(q + 256)));
                min_terms[c] = _mm512_fmadd_ps(terms, _mm512_mul_ps(f, _mm512_loadu_ps(q + 320)), min_terms[c]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) {
        if (WR == 4) {
            /* the four rows' mins terms: each 128-bit lane's sum, then lanes 0, 4, 8, 12 */
            __m512 m = _mm512_add_ps(min_terms[c], _mm512_permute_ps(min_terms[c], 0x4e));
            m = _mm512_add_ps(m, _mm512_permute_ps(m, 0xb1));
            const __m128 terms = _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), m));
            _mm_storeu_ps(out + c * out_stride, _mm_sub_ps(memra_gemm_reduce4(acc[0][c], acc[1][c], acc[2][c], acc[3][c]), terms));
        } else {
            float lanes[16];
            _mm512_storeu_ps(lanes, min_terms[c]);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < WR; r++) {
                const float term = (lanes[4 * r] + lanes[4 * r + 2]) + (lanes[4 * r + 1] + lanes[4 * r + 3]);
                out[c * out_stride + r] = _mm512_reduce_add_ps(acc[r][c]) - term;
            }
        }
    }
}

VBMI_FN void unpack_k(int kind, int64_t n, const uint8_t * w, size_t w_stride, int w_rows, uint8_t * out) {
    const int block_bytes = kind == KIND_Q6_K ? Q6_K_BYTES : kind == KIND_Q5_K ? Q5_K_BYTES : Q4_K_BYTES;
    __m512i ql_index[4], qh_index[4];
    k_index(kind, ql_index, qh_index);
    for (int64_t g = 0; g < n / 256; g++) {
        uint8_t * group = out + g * K_GROUP;
        __m128i mins[MEMRA_GEMM_TILE_W];
        float dmin[MEMRA_GEMM_TILE_W];
        for (int r = 0; r < MEMRA_GEMM_TILE_W; r++) {
            mins[r] = _mm_setzero_si128();
            dmin[r] = 0.0f;
            if (r >= w_rows) continue;
            __m512i u[4];
            __m512 ws;
            k_unpack(kind, w + r * w_stride + g * block_bytes, ql_index, qh_index, u, &ws, &mins[r], &dmin[r]);
            for (int v = 0; v < 4; v++) _mm512_storeu_si512(group + r * K_ROW + 64 * v, u[v]);
            _mm512_storeu_ps(group + r * K_ROW + 256, ws);
        }
        __m512i t;
        __m512 f;
        k4_mins(mins, dmin, &t, &f);
        _mm512_storeu_si512(group + MEMRA_GEMM_TILE_W * K_ROW, t);
        _mm512_storeu_ps(group + MEMRA_GEMM_TILE_W * K_ROW + 64, f);
    }
}

#define K_TILE(name, unpacked, kind)                                                                                   \
    VBMI_INLINE void name(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) { \
        k_tile(unpacked, kind, WR, AR, n, w, ws, a, as, out, os);                                                       \
    }
K_TILE(q4_K_tile, 0, KIND_Q4_K)
K_TILE(q5_K_tile, 0, KIND_Q5_K)
K_TILE(q6_K_tile, 0, KIND_Q6_K)
K_TILE(q4_K_tile_u, 1, KIND_Q4_K)
K_TILE(q5_K_tile_u, 1, KIND_Q5_K)
K_TILE(q6_K_tile_u, 1, KIND_Q6_K)
VBMI_INLINE void q8_0_tile_raw(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) {
    q8_0_tile(0, WR, AR, n, w, ws, a, as, out, os);
}
VBMI_INLINE void q8_0_tile_u(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) {
    q8_0_tile(1, WR, AR, n, w, ws, a, as, out, os);
}
VBMI_INLINE void q4_0_tile_raw(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) {
    q4_0_tile(0, WR, AR, n, w, ws, a, as, out, os);
}
VBMI_INLINE void q4_0_tile_u(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) {
    q4_0_tile(1, WR, AR, n, w, ws, a, as, out, os);
}

#define TILE_FNS(name, kernel) TILE_FNS_ATTR(VBMI_FN, name, kernel)

TILE_FNS(q8_0_vbmi, q8_0_tile_raw)
TILE_FNS(q4_0_vbmi, q4_0_tile_raw)
TILE_FNS(q4_K_vbmi, q4_K_tile)
TILE_FNS(q5_K_vbmi, q5_K_tile)
TILE_FNS(q6_K_vbmi, q6_K_tile)
TILE_FNS(q8_0_vbmi_u, q8_0_tile_u)
TILE_FNS(q4_0_vbmi_u, q4_0_tile_u)
TILE_FNS(q4_K_vbmi_u, q4_K_tile_u)
TILE_FNS(q5_K_vbmi_u, q5_K_tile_u)
TILE_FNS(q6_K_vbmi_u, q6_K_tile_u)
static memra_gemm_tile_kernel * const q8_0_tiles[4][4] = TILE_TABLE(q8_0_vbmi);
static memra_gemm_tile_kernel * const q4_0_tiles[4][4] = TILE_TABLE(q4_0_vbmi);
static memra_gemm_tile_kernel * const q4_K_tiles[4][4] = TILE_TABLE(q4_K_vbmi);
static memra_gemm_tile_kernel * const q5_K_tiles[4][4] = TILE_TABLE(q5_K_vbmi);
static memra_gemm_tile_kernel * const q6_K_tiles[4][4] = TILE_TABLE(q6_K_vbmi);
static memra_gemm_tile_kernel * const q8_0_tiles_u[4][4] = TILE_TABLE(q8_0_vbmi_u);
static memra_gemm_tile_kernel * const q4_0_tiles_u[4][4] = TILE_TABLE(q4_0_vbmi_u);
static memra_gemm_tile_kernel * const q4_K_tiles_u[4][4] = TILE_TABLE(q4_K_vbmi_u);
static memra_gemm_tile_kernel * const q5_K_tiles_u[4][4] = TILE_TABLE(q5_K_vbmi_u);
static memra_gemm_tile_kernel * const q6_K_tiles_u[4][4] = TILE_TABLE(q6_K_vbmi_u);


/* ============================================================================================== */
/* AVX2 + FMA + F16C (Haswell, Zen 1 and later, most laptops)                                    */
/* ============================================================================================== */
/*
 * Without VNNI the AVX2 dot products multiply bytes with vpmaddubsw (unsigned x signed, 16-bit sums of
 * two products that saturate) and widen with vpmaddwd, once per 32 values and weight row. These tiles
 * cut that work per multiply-add by arranging weights and activations so that every 16-bit (int16)
 * lane of every vector belongs to one fixed block / sub-block: the products of several vectors then
 * add up lane by lane, and are widened (and multiplied by integer sub-block scales) once per
 * super-block instead of once per vector. The weights are brought to that arrangement by an in-register
 * transpose (per 256 values and row; done once per group of 4 weight rows for all activation rows of a
 * prefill tile when the caller unpacks), the activations by the packing (once per row, scalar).
 *
 * Four weight rows are then folded into one float vector per activation row with horizontal adds
 * (lanes r and r + 4 hold weight row r's two partial sums), so a 4 x 4 tile keeps four float
 * accumulators instead of sixteen and the 16 ymm registers hold the integer sums. A tile runs one weight
 * row (q8_0: two) at a time against all of its activation rows, so each weight vector loaded is used AR
 * times. Measured on one Zen 4 core (test-gemm bench, 256 x 64 x 1024, weights unpacked once per 64
 * activation rows): q8_0 2.4x, q4_K 4.0x, q5_K 4.8x, q6_K 4.8x the GMAC/s of the AVX2 four-row dot
 * products (51, 120, 113, 108 GMAC/s). q8_0 gains least: without VNNI every exact 8-bit x 8-bit product route costs two
 * instructions per 16 multiply-adds (here vpmaddwd + vpaddd), where the K-quants' small codes let
 * vpmaddubsw + a 16-bit add do 32.
 *
 * Every integer sum is exact (ranges at each type); results differ from quant-dot.c only in the order
 * of float additions. The plain tile unpacks each group of its weight rows into a stack buffer and runs
 * the same code as the unpacked route, so both give the same bits.
 */
#define TARGET_AVX2 "avx2,fma,f16c"
#define AVX2_FN static __attribute__((target(TARGET_AVX2)))
#define AVX2_INLINE static inline __attribute__((target(TARGET_AVX2), always_inline))

/* 8 x 8 transpose of 32-bit elements: o[k] element j = s[j] element k. */
AVX2_INLINE void transpose8x32(const __m256i s[8], __m256i o[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(s[2 * i], s[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(s[2 * i], s[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]); /* elements 0 | 4 */
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]); /* 1 | 5 */
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]); /* 2 | 6 */
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]); /* 3 | 7 */
    }
    for (int k = 0; k < 4; k++) {
        o[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        o[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* 8 x 8 transpose of 16-bit elements within each 128-bit lane: o[k] lane L element i = s[i] lane L element k. */
AVX2_INLINE void transpose8x16_lanes(const __m256i s[8], __m256i o[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi16(s[2 * i], s[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi16(s[2 * i], s[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_unpacklo_epi32(t[4 * h + 0], t[4 * h + 2]); /* elements 0, 1 */
        u[4 * h + 1] = _mm256_unpackhi_epi32(t[4 * h + 0], t[4 * h + 2]); /* 2, 3 */
        u[4 * h + 2] = _mm256_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]); /* 4, 5 */
        u[4 * h + 3] = _mm256_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]); /* 6, 7 */
    }
    for (int k = 0; k < 4; k++) {
        o[2 * k] = _mm256_unpacklo_epi64(u[k], u[4 + k]);
        o[2 * k + 1] = _mm256_unpackhi_epi64(u[k], u[4 + k]);
    }
}

/* Lane r of the result = x lane r + x lane r + 4 (r < 4): a weight row's two partial sums. */
AVX2_INLINE __m128 fold_halves(__m256 x) { return _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1)); }

AVX2_INLINE void store_tile(const int WR, const int AR, const __m256 acc[4], float * out, int64_t out_stride) {
    for (int c = 0; c < AR; c++) {
        const __m128 sums = fold_halves(acc[c]);
        if (WR == 4) {
            _mm_storeu_ps(out + c * out_stride, sums);
        } else {
            float lanes[4];
            _mm_storeu_ps(lanes, sums);
            for (int r = 0; r < WR; r++) out[c * out_stride + r] = lanes[r];
        }
    }
}

/* ---- q8_0 (AVX2) ----
 * 16-bit products: both sides are widened to int16 and multiplied with vpmaddwd (no saturation, and one
 * instruction per 16 values where the byte route needs vpsignb + vpmaddubsw + vpmaddwd per 32). Per
 * group of 8 blocks (256 values), vector v (v < 16) holds in int32 lane j values 2v, 2v+1 of block j,
 * so the 16 vpmaddwd results of a (weight row, activation row) pair add up to block j's sum in lane j
 * (|sum| <= 32 * 128 * 127); one conversion and one multiply by the 8 blocks' scale products follow.
 *   packed activation group (544 bytes per 256 values):
 *     [  0..511] int16 [v][j][t] = value 32j + 2v + t
 *     [512..543] float [j] = block j's scale
 *   unpacked weight group (2176 bytes, 4 rows): [0..2047] int16 [r][v][j][t] as above; [2048..2175]
 *   float [r][j] block scales. The weight transpose: the two halves of each block widened (8 dwords of
 *   value pairs each), then two 8 x 8 dword transposes (block j -> lane j). */
enum { A2_Q8_0_PACKED = 544, A2_Q8_0_UNPACKED = 2176 };

AVX2_FN void pack_q8_0_avx2(const float * x, uint8_t * out, int64_t n) {
    uint8_t q8[Q8_0_GROUP];
    for (int64_t g = 0; g < n / 256; g++, x += 256, out += A2_Q8_0_PACKED) {
        memra_quantize_activation_row(MEMRA_TYPE_Q8_0, x, q8, 256);
        int16_t values[256];
        float d[8];
        for (int j = 0; j < 8; j++) {
            const uint8_t * block = q8 + j * Q8_0_BYTES;
            for (int v = 0; v < 16; v++)
                for (int t = 0; t < 2; t++) values[16 * v + 2 * j + t] = (int8_t)block[2 + 2 * v + t];
            d[j] = _cvtsh_ss(load_u16(block));
        }
        memcpy(out, values, sizeof values);
        memcpy(out + 512, d, sizeof d);
    }
}

/* One row's group of 8 blocks at p -> its 16 int16 vectors and its 8 block scales (f32). Q4: the
 * blocks are q4_0, whose values (code - 8) go to the same layout, so that q4_0 runs q8_0's tiles on
 * q8_0's packed activations (block j's values 0..15 are the low nibbles of its 16 qs bytes, 16..31
 * the high nibbles). */
AVX2_INLINE void unpack_q8_0_row_avx2(const int Q4, const uint8_t * p, uint8_t * vectors, float * scales) {
    const int block = Q4 ? Q4_0_BYTES : Q8_0_BYTES;
    const __m128i m4 = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    __m256i lo[8], hi[8], o[8];
    for (int j = 0; j < 8; j++) {
        const __m128i first = _mm_loadu_si128((const __m128i *)(p + block * j + 2));
        if (Q4) {
            lo[j] = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_and_si128(first, m4), eight));
            hi[j] = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(first, 4), m4), eight));
        } else {
            lo[j] = _mm256_cvtepi8_epi16(first);
            hi[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + block * j + 18)));
        }
    }
    transpose8x32(lo, o);
    for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(vectors + 32 * k), o[k]);
    transpose8x32(hi, o);
    for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(vectors + 32 * (8 + k)), o[k]);
    const __m128i h = _mm_setr_epi16((short)load_u16(p), (short)load_u16(p + block), (short)load_u16(p + 2 * block), (short)load_u16(p + 3 * block),
                                     (short)load_u16(p + 4 * block), (short)load_u16(p + 5 * block), (short)load_u16(p + 6 * block),
                                     (short)load_u16(p + 7 * block));
    _mm256_storeu_ps(scales, _mm256_cvtph_ps(h));
}

/* Q4: the weights are q4_0, else q8_0. */
AVX2_INLINE void unpack_q8_0_group_avx2(const int Q4, const uint8_t * w, size_t w_stride, int w_rows, int64_t g, uint8_t * u) {
    const int64_t group = Q4 ? Q4_0_GROUP : Q8_0_GROUP;
    for (int r = 0; r < w_rows; r++) unpack_q8_0_row_avx2(Q4, w + r * w_stride + g * group, u + 512 * r, (float *)(u + 2048 + 32 * r));
}

/* An empty asm that may read or write memory: loads after it cannot reuse values loaded before. After
 * each weight row (q8_0: pair of rows) of a tile it keeps GCC from keeping all of the activation vectors
 * loaded for the first row in registers (and so on the stack) for the next ones: they are reloaded
 * from L1 instead. */
#define RELOAD_BARRIER() __asm__ volatile("" ::: "memory")
/* An empty asm that "changes" x: keeps GCC from reassociating a chain of integer adds into a tree that
 * computes all products first and spills them (it does for the 64 products of a q8_0 row step). */
#define KEEP_CHAIN(x) __asm__("" : "+x"(x))

/* One group of a WR x AR tile: u = the unpacked group, a[c] = activation row c's packed group. Two
 * weight rows at a time, so that each activation vector loaded serves two vpmaddwd (the 16-bit data is
 * twice the bytes of the K-quants'). On Zen 4 the loop runs at about 3.7 instructions a cycle either
 * way, one or two rows, and as fast with half of its vpmaddwd replaced by a logic op: its instruction
 * count (vpmaddwd + vpaddd per 16 values) is what bounds it. */
AVX2_INLINE void q8_0_group_avx2(const int WR, const int AR, const uint8_t * u, const uint8_t * const a[4], __m256 acc[4]) {
    __m256 pairs[2][4]; /* hadd(row 2p's products, row 2p + 1's) */
    _Pragma("GCC unroll 2")
    for (int p = 0; p < 2; p++) {
        const int rows = WR - 2 * p; /* of this pair: 1 or 2 (0: none) */
        if (rows <= 0) {
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) pairs[p][c] = _mm256_setzero_ps();
            continue;
        }
        __m256i s[2][4];
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++)
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) s[h][c] = _mm256_setzero_si256();
        const uint8_t * w0 = u + 512 * (2 * p);
        _Pragma("GCC unroll 16")
        for (int v = 0; v < 16; v++) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(w0 + 32 * v));
            const __m256i x1 = rows > 1 ? _mm256_loadu_si256((const __m256i *)(w0 + 512 + 32 * v)) : _mm256_setzero_si256();
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) {
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a[c] + 32 * v));
                s[0][c] = _mm256_add_epi32(s[0][c], _mm256_madd_epi16(x0, av));
                KEEP_CHAIN(s[0][c]);
                if (rows > 1) {
                    s[1][c] = _mm256_add_epi32(s[1][c], _mm256_madd_epi16(x1, av));
                    KEEP_CHAIN(s[1][c]);
                }
            }
        }
        const __m256 d0 = _mm256_loadu_ps((const float *)(u + 2048 + 64 * p));
        const __m256 d1 = _mm256_loadu_ps((const float *)(u + 2048 + 64 * p + 32));
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) {
            const __m256 da = _mm256_loadu_ps((const float *)(a[c] + 512));
            const __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(s[0][c]), _mm256_mul_ps(d0, da));
            const __m256 f1 = rows > 1 ? _mm256_mul_ps(_mm256_cvtepi32_ps(s[1][c]), _mm256_mul_ps(d1, da)) : _mm256_setzero_ps();
            pairs[p][c] = _mm256_hadd_ps(f0, f1);
        }
        RELOAD_BARRIER();
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) acc[c] = _mm256_add_ps(acc[c], _mm256_hadd_ps(pairs[0][c], pairs[1][c]));
}

AVX2_INLINE void q8_0_tile_avx2(const int UNPACKED, const int Q4, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride,
                                const uint8_t * a, size_t a_stride, float * out, int64_t out_stride) {
    __m256 acc[4];
    for (int c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    _Alignas(32) uint8_t buffer[A2_Q8_0_UNPACKED];
    for (int64_t g = 0; g < n / 256; g++) {
        const uint8_t * rows[4];
        for (int c = 0; c < 4; c++) rows[c] = a + (c < AR ? c : 0) * a_stride + g * A2_Q8_0_PACKED;
        const uint8_t * u = w + g * A2_Q8_0_UNPACKED;
        if (!UNPACKED) {
            unpack_q8_0_group_avx2(Q4, w, w_stride, WR, g, buffer);
            u = buffer;
        }
        q8_0_group_avx2(WR, AR, u, rows, acc);
    }
    store_tile(WR, AR, acc, out, out_stride);
}

AVX2_FN void unpack_q8_0_avx2(int q4, int64_t n, const uint8_t * w, size_t w_stride, int w_rows, uint8_t * out) {
    for (int64_t g = 0; g < n / 256; g++) unpack_q8_0_group_avx2(q4, w, w_stride, w_rows, g, out + g * A2_Q8_0_UNPACKED);
}

/* ---- q4_K, q5_K, q6_K (AVX2) ----
 * Activations are q8_K (signed bytes, one f32 scale per 256 values); weight codes unsigned (q4_K 0..15,
 * q5_K 0..31, q6_K 0..63) as vpmaddubsw's unsigned operand. Its 16-bit pair sums are at most
 * 2 * 15 * 128 = 3840 (q4_K), 7936 (q5_K), 16128 (q6_K), so 8, 4 and 2 vectors respectively add up in
 * int16 exactly before one vpmaddwd multiplies them by the int16 sub-block scales into int32.
 *   q4_K/q5_K (8 sub-blocks of 32): vector k (k < 8) holds in int32 lane j values 32j + 4k + (0..3)
 *   (sub-block j); scale vector int16 lanes 2j, 2j+1 = scale j. Weights: the 8 sub-blocks' codes as
 *   natural vectors (low / high nibbles of each 32-byte chunk, plus q5_K's fifth bit), one 8 x 8 dword
 *   transpose. The mins term dmin * sum_j min_j * (sum of sub-block j's activations) is one vpmaddwd of
 *   two rows' mins with the activation's eight 32-value sums; a horizontal add brings it to the lanes
 *   of the main sums.
 *   q6_K (16 sub-blocks of 16): vector k holds in int16 lane s values 16s + 2k, 16s + 2k + 1 (sub-block
 *   s); scale vector int16 lane s = scale s. Codes are value + 32: the activation's 16-value sums times
 *   32 * scale (one vpmaddwd) are taken off. Weights: the natural vectors of quant-dot.c (two sub-blocks
 *   each), regrouped by 128-bit lane, then an 8 x 8 transpose of words within each lane.
 * Packed activation group (320 bytes per 256 values):
 *   [  0..255] the activation bytes in the order above
 *   [256..287] int16: q4_K/q5_K the 32-value sums b0..b3 b0..b3 | b4..b7 b4..b7 (for the mins, see
 *              below); q6_K the 16 16-value sums
 *   [288..291] the f32 scale     [292..319] zero
 * Unpacked weight group (1344 bytes, 4 rows):
 *   [   0..1023] codes [r][k]      [1024..1151] int16 scale vectors [r]
 *   [1152..1215] q4_K/q5_K: mins vectors T01, T23 (int16 lanes: row 0 m0..m3, row 1 m0..m3 | row 0
 *                m4..m7, row 1 m4..m7; rows 2, 3 alike), whose vpmaddwd with the activation sums and
 *                horizontal add give lanes r, r + 4 = row r's partial mins terms
 *   [1152..1279] q6_K: the scale vectors times 32 [r]
 *   [1280..1311] f32 d of rows 0..3, twice     [1312..1343] f32 dmin of rows 0..3, twice (q6_K: 0) */
enum { A2_K_PACKED = 320, A2_K_UNPACKED = 1344 };

AVX2_FN void pack_k_avx2(int kind, const float * x, uint8_t * out, int64_t n) {
    uint8_t q8k[Q8_K_BYTES];
    for (int64_t g = 0; g < n / 256; g++, x += 256, out += A2_K_PACKED) {
        memra_quantize_activation_row(MEMRA_TYPE_Q4_K, x, q8k, 256); /* q8_K, as for every K type */
        const uint8_t * qs = q8k + 4;
        int16_t bsums[16], sums[16];
        memcpy(bsums, q8k + 260, sizeof bsums);
        if (kind == KIND_Q6_K) {
            for (int k = 0; k < 8; k++)
                for (int s = 0; s < 16; s++) memcpy(out + 32 * k + 2 * s, qs + 16 * s + 2 * k, 2);
            memcpy(sums, bsums, sizeof sums);
        } else {
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < 8; j++) memcpy(out + 32 * k + 4 * j, qs + 32 * j + 4 * k, 4);
            for (int i = 0; i < 4; i++) {
                sums[i] = sums[4 + i] = (int16_t)(bsums[2 * i] + bsums[2 * i + 1]);
                sums[8 + i] = sums[12 + i] = (int16_t)(bsums[8 + 2 * i] + bsums[8 + 2 * i + 1]);
            }
        }
        memcpy(out + 256, sums, sizeof sums);
        memcpy(out + 288, q8k, 4);
        memset(out + 292, 0, A2_K_PACKED - 292);
    }
}

/* One row's super-block at x -> its code vectors and scale vector(s) in the group at u (row r), and
 * its d / dmin / mins in the shared parts. */
AVX2_INLINE void unpack_k_row_avx2(const int kind, const uint8_t * x, int r, uint8_t * u) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i natural[8], codes[8];
    uint8_t * dv = u + 1280, * dminv = u + 1312; /* f32 lanes r and r + 4 (memcpy: u need not be aligned) */
    if (kind == KIND_Q6_K) {
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int k = 0; k < 2; k++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x + 64 * k));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x + 64 * k + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * k));
            /* values 128k + 32i + (0..31): sub-blocks 8k + 2i (low lane), 8k + 2i + 1 (high lane) */
            natural[4 * k + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            natural[4 * k + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            natural[4 * k + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
            natural[4 * k + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
        }
        /* y[i]: sub-block i in the low lane, 8 + i in the high lane */
        __m256i y[8];
        for (int i = 0; i < 4; i++) {
            y[2 * i] = _mm256_permute2x128_si256(natural[i], natural[4 + i], 0x20);
            y[2 * i + 1] = _mm256_permute2x128_si256(natural[i], natural[4 + i], 0x31);
        }
        transpose8x16_lanes(y, codes);
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
        _mm256_storeu_si256((__m256i *)(u + 1024 + 32 * r), sc);
        _mm256_storeu_si256((__m256i *)(u + 1152 + 32 * r), _mm256_slli_epi16(sc, 5)); /* |32 * scale| <= 4096 */
        const float d = _cvtsh_ss(load_u16(x + 208)), dmin = 0.0f;
        memcpy(dv + 4 * r, &d, 4), memcpy(dv + 4 * r + 16, &d, 4);
        memcpy(dminv + 4 * r, &dmin, 4), memcpy(dminv + 4 * r + 16, &dmin, 4);
    } else {
        const int qs_at = kind == KIND_Q5_K ? 48 : 16;
        const __m256i qh = kind == KIND_Q5_K ? _mm256_loadu_si256((const __m256i *)(x + 16)) : _mm256_setzero_si256();
        const __m256i bit4 = _mm256_set1_epi8(16);
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x + qs_at + 32 * c));
            /* sub-block 2c: the low nibbles (values 64c + l), 2c + 1: the high ones (64c + 32 + l) */
            natural[2 * c] = _mm256_and_si256(q, m4);
            natural[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (kind == KIND_Q5_K) {
                /* fifth bit of sub-block j: bit j of qh[l], moved to bit 4 (16-bit shifts: bits 4 of
                 * both bytes come from their own byte for shifts up to 4 left, 3 right) */
                for (int h = 0; h < 2; h++) {
                    const int j = 2 * c + h;
                    const __m256i moved = j < 4 ? _mm256_slli_epi16(qh, 4 - j) : j > 4 ? _mm256_srli_epi16(qh, j - 4) : qh;
                    natural[j] = _mm256_or_si256(natural[j], _mm256_and_si256(moved, bit4));
                }
            }
        }
        transpose8x32(natural, codes);
        uint64_t scales, min_codes;
        q4k_scales_mins(x + 4, &scales, &min_codes);
        const __m128i pairs = _mm_shuffle_epi8(_mm_cvtsi64_si128((long long)scales), _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
        _mm256_storeu_si256((__m256i *)(u + 1024 + 32 * r), _mm256_cvtepu8_epi16(pairs));
        uint8_t * t = u + 1152 + 32 * (r / 2);
        for (int i = 0; i < 8; i++) {
            const int16_t m = (int16_t)((min_codes >> (8 * i)) & 0xff);
            memcpy(t + 2 * (8 * (i / 4) + 4 * (r % 2) + i % 4), &m, 2); /* int16 lane 8 (i / 4) + 4 (r % 2) + i % 4 */
        }
        const float d = _cvtsh_ss(load_u16(x)), dmin = _cvtsh_ss(load_u16(x + 2));
        memcpy(dv + 4 * r, &d, 4), memcpy(dv + 4 * r + 16, &d, 4);
        memcpy(dminv + 4 * r, &dmin, 4), memcpy(dminv + 4 * r + 16, &dmin, 4);
    }
    for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(u + 256 * r + 32 * k), codes[k]);
}

AVX2_INLINE void unpack_k_group_avx2(const int kind, const uint8_t * w, size_t w_stride, int w_rows, int64_t g, uint8_t * u) {
    const int block_bytes = kind == KIND_Q6_K ? Q6_K_BYTES : kind == KIND_Q5_K ? Q5_K_BYTES : Q4_K_BYTES;
    /* the shared parts of rows that are not there: zero (their lanes are not stored) */
    if (w_rows < 4) memset(u + 1152, 0, A2_K_UNPACKED - 1152);
    for (int r = 0; r < w_rows; r++) unpack_k_row_avx2(kind, w + r * w_stride + g * block_bytes, r, u);
}

AVX2_INLINE void k_group_avx2(const int kind, const int WR, const int AR, const uint8_t * u, const uint8_t * const a[4], __m256 acc[4]) {
    /* vectors whose int16 sums are added before widening (see the ranges above) */
    const int run = kind == KIND_Q6_K ? 2 : kind == KIND_Q5_K ? 4 : 8;
    __m256i even[4], pairs[2][4]; /* row 2p's sums, then hadd(row 2p, row 2p + 1) */
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++) {
        __m256i isum[4];
        if (r < WR) {
            const __m256i sc = _mm256_loadu_si256((const __m256i *)(u + 1024 + 32 * r));
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) isum[c] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4")
            for (int k0 = 0; k0 < 8; k0 += run) {
                __m256i s[4];
                _Pragma("GCC unroll 4")
                for (int c = 0; c < AR; c++) s[c] = _mm256_setzero_si256();
                _Pragma("GCC unroll 8")
                for (int k = k0; k < k0 + run; k++) {
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(u + 256 * r + 32 * k));
                    _Pragma("GCC unroll 4")
                    for (int c = 0; c < AR; c++) {
                        s[c] = _mm256_add_epi16(s[c], _mm256_maddubs_epi16(wv, _mm256_loadu_si256((const __m256i *)(a[c] + 32 * k))));
                        KEEP_CHAIN(s[c]);
                    }
                }
                _Pragma("GCC unroll 4")
                for (int c = 0; c < AR; c++) {
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s[c], sc));
                    KEEP_CHAIN(isum[c]);
                }
            }
            if (kind == KIND_Q6_K) {
                const __m256i sc32 = _mm256_loadu_si256((const __m256i *)(u + 1152 + 32 * r));
                _Pragma("GCC unroll 4")
                for (int c = 0; c < AR; c++)
                    isum[c] = _mm256_sub_epi32(isum[c], _mm256_madd_epi16(sc32, _mm256_loadu_si256((const __m256i *)(a[c] + 256))));
            }
            RELOAD_BARRIER();
        } else {
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) isum[c] = _mm256_setzero_si256();
        }
        /* lanes r, r + 4 of the final vector: row r's partial sums (int32 adds, exact) */
        _Pragma("GCC unroll 4")
        for (int c = 0; c < AR; c++) {
            if (r % 2 == 0) even[c] = isum[c];
            else pairs[r / 2][c] = _mm256_hadd_epi32(even[c], isum[c]);
        }
    }
    const __m256 dv = _mm256_loadu_ps((const float *)(u + 1280));
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) {
        const __m256i h = _mm256_hadd_epi32(pairs[0][c], pairs[1][c]);
        const __m256 da = _mm256_broadcast_ss((const float *)(a[c] + 288));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(dv, da), acc[c]);
        if (kind != KIND_Q6_K) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(a[c] + 256));
            const __m256i m = _mm256_hadd_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(u + 1152)), b),
                                                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(u + 1184)), b));
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(_mm256_loadu_ps((const float *)(u + 1312)), da), acc[c]);
        }
    }
}

AVX2_INLINE void k_tile_avx2(const int UNPACKED, const int kind, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride,
                             const uint8_t * a, size_t a_stride, float * out, int64_t out_stride) {
    __m256 acc[4];
    for (int c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    _Alignas(32) uint8_t buffer[A2_K_UNPACKED];
    for (int64_t g = 0; g < n / 256; g++) {
        const uint8_t * rows[4];
        for (int c = 0; c < 4; c++) rows[c] = a + (c < AR ? c : 0) * a_stride + g * A2_K_PACKED;
        const uint8_t * u = w + g * A2_K_UNPACKED;
        if (!UNPACKED) {
            unpack_k_group_avx2(kind, w, w_stride, WR, g, buffer);
            u = buffer;
        }
        k_group_avx2(kind, WR, AR, u, rows, acc);
    }
    store_tile(WR, AR, acc, out, out_stride);
}

AVX2_FN void unpack_k_avx2(int kind, int64_t n, const uint8_t * w, size_t w_stride, int w_rows, uint8_t * out) {
    for (int64_t g = 0; g < n / 256; g++) unpack_k_group_avx2(kind, w, w_stride, w_rows, g, out + g * A2_K_UNPACKED);
}

#define A2_TILE(name, kernel_call)                                                                                     \
    AVX2_INLINE void name(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) { \
        kernel_call;                                                                                                   \
    }
A2_TILE(q8_0_tile_a2, q8_0_tile_avx2(0, 0, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q8_0_tile_a2_u, q8_0_tile_avx2(1, 0, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q4_0_tile_a2, q8_0_tile_avx2(0, 1, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q4_K_tile_a2, k_tile_avx2(0, KIND_Q4_K, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q4_K_tile_a2_u, k_tile_avx2(1, KIND_Q4_K, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q5_K_tile_a2, k_tile_avx2(0, KIND_Q5_K, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q5_K_tile_a2_u, k_tile_avx2(1, KIND_Q5_K, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q6_K_tile_a2, k_tile_avx2(0, KIND_Q6_K, WR, AR, n, w, ws, a, as, out, os))
A2_TILE(q6_K_tile_a2_u, k_tile_avx2(1, KIND_Q6_K, WR, AR, n, w, ws, a, as, out, os))

TILE_FNS_ATTR(AVX2_FN, q8_0_avx2, q8_0_tile_a2)
TILE_FNS_ATTR(AVX2_FN, q4_0_avx2, q4_0_tile_a2)
TILE_FNS_ATTR(AVX2_FN, q4_K_avx2, q4_K_tile_a2)
TILE_FNS_ATTR(AVX2_FN, q5_K_avx2, q5_K_tile_a2)
TILE_FNS_ATTR(AVX2_FN, q6_K_avx2, q6_K_tile_a2)
TILE_FNS_ATTR(AVX2_FN, q8_0_avx2_u, q8_0_tile_a2_u)
TILE_FNS_ATTR(AVX2_FN, q4_K_avx2_u, q4_K_tile_a2_u)
TILE_FNS_ATTR(AVX2_FN, q5_K_avx2_u, q5_K_tile_a2_u)
TILE_FNS_ATTR(AVX2_FN, q6_K_avx2_u, q6_K_tile_a2_u)
static memra_gemm_tile_kernel * const q8_0_tiles_avx2[4][4] = TILE_TABLE(q8_0_avx2);
static memra_gemm_tile_kernel * const q4_0_tiles_avx2[4][4] = TILE_TABLE(q4_0_avx2);
static memra_gemm_tile_kernel * const q4_K_tiles_avx2[4][4] = TILE_TABLE(q4_K_avx2);
static memra_gemm_tile_kernel * const q5_K_tiles_avx2[4][4] = TILE_TABLE(q5_K_avx2);
static memra_gemm_tile_kernel * const q6_K_tiles_avx2[4][4] = TILE_TABLE(q6_K_avx2);
static memra_gemm_tile_kernel * const q8_0_tiles_avx2_u[4][4] = TILE_TABLE(q8_0_avx2_u);
static memra_gemm_tile_kernel * const q4_K_tiles_avx2_u[4][4] = TILE_TABLE(q4_K_avx2_u);
static memra_gemm_tile_kernel * const q5_K_tiles_avx2_u[4][4] = TILE_TABLE(q5_K_avx2_u);
static memra_gemm_tile_kernel * const q6_K_tiles_avx2_u[4][4] = TILE_TABLE(q6_K_avx2_u);

#endif /* x86 */

/* ---- dispatch ---- */

enum { FAMILY_NONE = 0, FAMILY_AVX2 = 1, FAMILY_VBMI = 2 };

/* The kernel family that runs, decided once: the AVX-512 VBMI kernels when the CPU has them and
 * quant-dot chose its AVX-512 path; else the AVX2 kernels when the CPU has AVX2 + FMA + F16C and
 * quant-dot chose "avx2" or better (so MEMRA_CPU_ISA=avx2 selects these on an AVX-512 CPU, and
 * MEMRA_CPU_ISA=scalar turns GEMM off); none when MEMRA_GEMM is "0". */
static int gemm_family(void) {
    static int state = -1;
    if (state < 0) {
        int family = FAMILY_NONE;
#ifdef MEMRA_GEMM_X86
        const char * setting = getenv("MEMRA_GEMM");
        const char * dot = memra_dot_isa();
        if (!(setting && strcmp(setting, "0") == 0)) {
            if (strcmp(dot, "avx512vnni") == 0 && cpu_has_vbmi_vnni()) {
                family = FAMILY_VBMI;
            } else if (strcmp(dot, "avx2") == 0 || strcmp(dot, "avx512vnni") == 0) {
                /* (quant-dot's AVX2 and AVX-512 paths both required AVX2, FMA and F16C with YMM state) */
                family = FAMILY_AVX2;
            }
        }
#endif
        state = family;
    }
    return state;
}

const char * memra_gemm_isa(void) {
    const int family = gemm_family();
    return family == FAMILY_VBMI ? "avx512vbmi" : family == FAMILY_AVX2 ? "avx2" : "none";
}

static int is_gemm_type(int type) {
    return type == MEMRA_TYPE_Q8_0 || type == MEMRA_TYPE_Q4_0 || type == MEMRA_TYPE_Q4_K || type == MEMRA_TYPE_Q5_K || type == MEMRA_TYPE_Q6_K;
}

/* f16 and bf16 weights: the tiles of gemm-float.c, which follow quant-dot's path themselves; they run
 * wherever a GEMM family does (so MEMRA_GEMM=0 turns them off too). */
static int float_type(int type) { return type == MEMRA_TYPE_F16 || type == MEMRA_TYPE_BF16; }

size_t memra_gemm_packed_row_bytes(int type, int64_t n) {
    if (float_type(type)) return gemm_family() == FAMILY_NONE ? 0 : memra_gemm_float_packed_row_bytes(type, n);
    const int family = gemm_family();
    if (family == FAMILY_NONE || n <= 0 || n % 256 != 0 || !is_gemm_type(type)) return 0;
#ifdef MEMRA_GEMM_X86
    const size_t groups = (size_t)(n / 256);
    if (family == FAMILY_AVX2) return groups * (type == MEMRA_TYPE_Q8_0 || type == MEMRA_TYPE_Q4_0 ? A2_Q8_0_PACKED : A2_K_PACKED);
    if (type == MEMRA_TYPE_Q4_0) return (size_t)((n + 511) / 512) * PACKED_Q4_0_GROUP;
    return groups * (type == MEMRA_TYPE_Q8_0 ? PACKED_Q8_0_GROUP : PACKED_K_GROUP);
#else
    return 0;
#endif
}

void memra_gemm_pack_row(int type, const float * x, void * out, int64_t n) {
    if (float_type(type)) {
        memra_gemm_float_pack_row(type, x, out, n);
        return;
    }
#ifdef MEMRA_GEMM_X86
    const int avx2 = gemm_family() == FAMILY_AVX2;
    switch (type) {
    case MEMRA_TYPE_Q8_0: if (avx2) pack_q8_0_avx2(x, out, n); else pack_q8_0(x, out, n); break;
    case MEMRA_TYPE_Q4_0: if (avx2) pack_q8_0_avx2(x, out, n); else pack_q4_0(x, out, n); break;
    case MEMRA_TYPE_Q4_K: if (avx2) pack_k_avx2(KIND_Q4_K, x, out, n); else pack_k(KIND_Q4_K, x, out, n); break;
    case MEMRA_TYPE_Q5_K: if (avx2) pack_k_avx2(KIND_Q5_K, x, out, n); else pack_k(KIND_Q5_K, x, out, n); break;
    case MEMRA_TYPE_Q6_K: if (avx2) pack_k_avx2(KIND_Q6_K, x, out, n); else pack_k(KIND_Q6_K, x, out, n); break;
    default: break;
    }
#else
    (void)type; (void)x; (void)out; (void)n;
#endif
}

#ifdef MEMRA_GEMM_X86
/* The tile table of `type` for the family in use (unpacked: the tiles on memra_gemm_unpack's buffer). */
static memra_gemm_tile_kernel * const (*tile_table(int type, int unpacked))[4] {
    if (gemm_family() == FAMILY_AVX2) {
        switch (type) {
        case MEMRA_TYPE_Q8_0: return unpacked ? q8_0_tiles_avx2_u : q8_0_tiles_avx2;
        case MEMRA_TYPE_Q4_0: return unpacked ? q8_0_tiles_avx2_u : q4_0_tiles_avx2;
        case MEMRA_TYPE_Q4_K: return unpacked ? q4_K_tiles_avx2_u : q4_K_tiles_avx2;
        case MEMRA_TYPE_Q5_K: return unpacked ? q5_K_tiles_avx2_u : q5_K_tiles_avx2;
        case MEMRA_TYPE_Q6_K: return unpacked ? q6_K_tiles_avx2_u : q6_K_tiles_avx2;
        default: return NULL;
        }
    }
    switch (type) {
    case MEMRA_TYPE_Q8_0: return unpacked ? q8_0_tiles_u : q8_0_tiles;
    case MEMRA_TYPE_Q4_0: return unpacked ? q4_0_tiles_u : q4_0_tiles;
    case MEMRA_TYPE_Q4_K: return unpacked ? q4_K_tiles_u : q4_K_tiles;
    case MEMRA_TYPE_Q5_K: return unpacked ? q5_K_tiles_u : q5_K_tiles;
    case MEMRA_TYPE_Q6_K: return unpacked ? q6_K_tiles_u : q6_K_tiles;
    default: return NULL;
    }
}
#endif

void memra_gemm_tile(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, const void * packed, size_t a_stride, int a_rows,
                     float * out, int64_t out_stride) {
    if (float_type(type)) {
        memra_gemm_float_tile(type, n, weight, w_stride, w_rows, packed, a_stride, a_rows, out, out_stride);
        return;
    }
#ifdef MEMRA_GEMM_X86
    memra_gemm_tile_kernel * const(*table)[4] = tile_table(type, 0);
    if (table) table[w_rows - 1][a_rows - 1](n, weight, w_stride, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)weight; (void)w_stride; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}

size_t memra_gemm_unpacked_bytes(int type, int64_t n) {
    /* (f16/bf16 tiles read the weight rows directly: widening them costs one instruction per vector) */
    if (float_type(type) || memra_gemm_packed_row_bytes(type, n) == 0) return 0;
#ifdef MEMRA_GEMM_X86
    const size_t groups = (size_t)(n / 256);
    if (gemm_family() == FAMILY_AVX2) {
        /* AVX2: the weight transpose costs about as much as a 4 x 4 tile's multiplies; done once per 64
         * activation rows (test-gemm bench, one Zen 4 core run as AVX2): q8_0 1.3x, q4_K 1.75x, q6_K 1.6x
         * faster than the plain tiles */
        return groups * (type == MEMRA_TYPE_Q8_0 || type == MEMRA_TYPE_Q4_0 ? A2_Q8_0_UNPACKED : A2_K_UNPACKED);
    }
    /* the tiles spend a third (q8_0: byte permutes) to a fifth (K-quants: permutes, shifts, scales) of
     * their time unpacking; done once per 64 activation rows, q8_0 runs 1.7x, q4_K 1.2x, q6_K 1.3x faster */
    if (type == MEMRA_TYPE_Q4_0) return (size_t)((n + 511) / 512) * MEMRA_GEMM_TILE_W * Q4_0_UNPACKED;
    return groups * (type == MEMRA_TYPE_Q8_0 ? MEMRA_GEMM_TILE_W * Q8_0_UNPACKED : K_GROUP);
#else
    return 0;
#endif
}

void memra_gemm_unpack(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, void * unpacked) {
#ifdef MEMRA_GEMM_X86
    if (gemm_family() == FAMILY_AVX2) {
        if (type == MEMRA_TYPE_Q8_0) unpack_q8_0_avx2(0, n, weight, w_stride, w_rows, unpacked);
        if (type == MEMRA_TYPE_Q4_0) unpack_q8_0_avx2(1, n, weight, w_stride, w_rows, unpacked);
        if (type == MEMRA_TYPE_Q4_K) unpack_k_avx2(KIND_Q4_K, n, weight, w_stride, w_rows, unpacked);
        if (type == MEMRA_TYPE_Q5_K) unpack_k_avx2(KIND_Q5_K, n, weight, w_stride, w_rows, unpacked);
        if (type == MEMRA_TYPE_Q6_K) unpack_k_avx2(KIND_Q6_K, n, weight, w_stride, w_rows, unpacked);
        return;
    }
    if (type == MEMRA_TYPE_Q8_0) unpack_q8_0(n, weight, w_stride, w_rows, unpacked);
    if (type == MEMRA_TYPE_Q4_0) unpack_q4_0(n, weight, w_stride, w_rows, unpacked);
    if (type == MEMRA_TYPE_Q4_K) unpack_k(KIND_Q4_K, n, weight, w_stride, w_rows, unpacked);
    if (type == MEMRA_TYPE_Q5_K) unpack_k(KIND_Q5_K, n, weight, w_stride, w_rows, unpacked);
    if (type == MEMRA_TYPE_Q6_K) unpack_k(KIND_Q6_K, n, weight, w_stride, w_rows, unpacked);
#else
    (void)type; (void)n; (void)weight; (void)w_stride; (void)w_rows; (void)unpacked;
#endif
}

void memra_gemm_tile_unpacked(int type, int64_t n, const void * unpacked, int w_rows, const void * packed, size_t a_stride, int a_rows, float * out,
                              int64_t out_stride) {
#ifdef MEMRA_GEMM_X86
    memra_gemm_tile_kernel * const(*table)[4] = tile_table(type, 1);
    if (table) table[w_rows - 1][a_rows - 1](n, unpacked, 0, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)unpacked; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}
