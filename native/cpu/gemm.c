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
/* UNPACKED: `w` is memra_gemm_unpack's buffer ([group][4 rows][v0..v3, scales]) instead of the rows. */
enum { Q8_0_UNPACKED = 320 };

VBMI_INLINE void q8_0_tile(const int UNPACKED, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * a,
                           size_t a_stride, float * out, int64_t out_stride) {
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
            _mm_storeu_ps(out + c * out_stride, reduce4(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
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
            _mm_storeu_ps(out + c * out_stride, _mm_sub_ps(reduce4(acc[0][c], acc[1][c], acc[2][c], acc[3][c]), terms));
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

TILE_FNS(q8_0_vbmi, q8_0_tile_raw)
TILE_FNS(q4_K_vbmi, q4_K_tile)
TILE_FNS(q5_K_vbmi, q5_K_tile)
TILE_FNS(q6_K_vbmi, q6_K_tile)
TILE_FNS(q8_0_vbmi_u, q8_0_tile_u)
TILE_FNS(q4_K_vbmi_u, q4_K_tile_u)
TILE_FNS(q5_K_vbmi_u, q5_K_tile_u)
TILE_FNS(q6_K_vbmi_u, q6_K_tile_u)
static tile_kernel * const q8_0_tiles[4][4] = TILE_TABLE(q8_0_vbmi);
static tile_kernel * const q4_K_tiles[4][4] = TILE_TABLE(q4_K_vbmi);
static tile_kernel * const q5_K_tiles[4][4] = TILE_TABLE(q5_K_vbmi);
static tile_kernel * const q6_K_tiles[4][4] = TILE_TABLE(q6_K_vbmi);
static tile_kernel * const q8_0_tiles_u[4][4] = TILE_TABLE(q8_0_vbmi_u);
static tile_kernel * const q4_K_tiles_u[4][4] = TILE_TABLE(q4_K_vbmi_u);
static tile_kernel * const q5_K_tiles_u[4][4] = TILE_TABLE(q5_K_vbmi_u);
static tile_kernel * const q6_K_tiles_u[4][4] = TILE_TABLE(q6_K_vbmi_u);


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
    if (n % 256 != 0) return 0;
    switch (type) {
    case MEMRA_TYPE_Q8_0: return (size_t)(n / 256) * PACKED_Q8_0_GROUP;
    case MEMRA_TYPE_Q4_K:
    case MEMRA_TYPE_Q5_K:
    case MEMRA_TYPE_Q6_K: return (size_t)(n / 256) * PACKED_K_GROUP;
    default: break;
    }
#endif
    return 0;
}

void memra_gemm_pack_row(int type, const float * x, void * out, int64_t n) {
#ifdef MEMRA_GEMM_X86
    switch (type) {
    case MEMRA_TYPE_Q8_0: pack_q8_0(x, out, n); break;
    case MEMRA_TYPE_Q4_K: pack_k(KIND_Q4_K, x, out, n); break;
    case MEMRA_TYPE_Q5_K: pack_k(KIND_Q5_K, x, out, n); break;
    case MEMRA_TYPE_Q6_K: pack_k(KIND_Q6_K, x, out, n); break;
    default: break;
    }
#else
    (void)type; (void)x; (void)out; (void)n;
#endif
}

void memra_gemm_tile(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, const void * packed, size_t a_stride, int a_rows,
                     float * out, int64_t out_stride) {
#ifdef MEMRA_GEMM_X86
    tile_kernel * const(*table)[4] = type == MEMRA_TYPE_Q8_0 ? q8_0_tiles
                                   : type == MEMRA_TYPE_Q4_K ? q4_K_tiles
                                   : type == MEMRA_TYPE_Q5_K ? q5_K_tiles
                                   : type == MEMRA_TYPE_Q6_K ? q6_K_tiles
                                                             : NULL;
    if (table) table[w_rows - 1][a_rows - 1](n, weight, w_stride, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)weight; (void)w_stride; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}

size_t memra_gemm_unpacked_bytes(int type, int64_t n) {
    if (memra_gemm_packed_row_bytes(type, n) == 0) return 0;
#ifdef MEMRA_GEMM_X86
    /* the tiles spend a third (q8_0: byte permutes) to a fifth (K-quants: permutes, shifts, scales) of
     * their time unpacking; done once per 64 activation rows, q8_0 runs 1.7x, q4_K 1.2x, q6_K 1.3x faster */
    switch (type) {
    case MEMRA_TYPE_Q8_0: return (size_t)(n / 256) * MEMRA_GEMM_TILE_W * Q8_0_UNPACKED;
    case MEMRA_TYPE_Q4_K:
    case MEMRA_TYPE_Q5_K:
    case MEMRA_TYPE_Q6_K: return (size_t)(n / 256) * K_GROUP;
    default: return 0;
    }
#else
    return 0;
#endif
}

void memra_gemm_unpack(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, void * unpacked) {
#ifdef MEMRA_GEMM_X86
    if (type == MEMRA_TYPE_Q8_0) unpack_q8_0(n, weight, w_stride, w_rows, unpacked);
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
    tile_kernel * const(*table)[4] = type == MEMRA_TYPE_Q8_0 ? q8_0_tiles_u
                                   : type == MEMRA_TYPE_Q4_K ? q4_K_tiles_u
                                   : type == MEMRA_TYPE_Q5_K ? q5_K_tiles_u
                                   : type == MEMRA_TYPE_Q6_K ? q6_K_tiles_u
                                                             : NULL;
    if (table) table[w_rows - 1][a_rows - 1](n, unpacked, 0, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)unpacked; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}
