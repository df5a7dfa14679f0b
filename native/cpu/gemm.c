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
 * Activations are q8_K (one f32 scale per 256 values). Packed group (384 bytes per 256 values):
 *   [  0..255] the activation bytes in the order the weight's code vectors come in:
 *              q4_K/q5_K: [0..31 64..95] [32..63 96..127] [128..159 192..223] [160..191 224..255]
 *              (a qs byte's low nibble and high nibble are 32 values apart), signed;
 *              q6_K: natural order, as a + 128 (unsigned)
 *   [256..319] q4_K/q5_K: the eight 32-value sums (int16) four times
 *   [320..383] the f32 scale, 16 times
 * Per tile pair and super-block: four vpmaddubsw and four vpdpwssd (times the sub-block scales) into
 * one int32 vector, converted once and scaled by d_w * d_a.
 *   q4_K/q5_K: unsigned codes x signed activations; the mins term dmin * min * sum(a) (kept apart in
 *   float, as ggml does) is an integer dot product of four weight rows' mins with the activation sums.
 *   q6_K: signed values (code - 32) x (a + 128); the 128 * sum(scale * value) this adds depends on the
 *   weight only, is computed once per weight super-block and starts each pair's integer sum, so the
 *   sum stays exact (as in the dot-product path; taking a separate float term off would cancel). */

enum { Q4_K_BYTES = 144, Q5_K_BYTES = 176, Q6_K_BYTES = 210, Q8_K_BYTES = 292, PACKED_K_GROUP = 384 };
enum { KIND_Q4_K = 0, KIND_Q5_K = 1, KIND_Q6_K = 2 };

static inline uint32_t load_u32(const uint8_t * p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t load_u16(const uint8_t * p) { uint16_t v; memcpy(&v, p, 2); return v; }

VBMI_FN void pack_k(int kind, const float * x, uint8_t * out, int64_t n) {
    static const int order[8] = { 0, 2, 1, 3, 4, 6, 5, 7 }; /* 32-value pieces, q4_K/q5_K order */
    uint8_t q8k[Q8_K_BYTES];
    for (int64_t g = 0; g < n / 256; g++, x += 256, out += PACKED_K_GROUP) {
        memra_quantize_activation_row(MEMRA_TYPE_Q4_K, x, q8k, 256); /* q8_K, as for every K type */
        const uint8_t * qs = q8k + 4;
        int16_t sums[32];
        if (kind == KIND_Q6_K) {
            for (int j = 0; j < 256; j++) out[j] = (uint8_t)(qs[j] ^ 0x80); /* a + 128, unsigned */
            memset(sums, 0, sizeof sums);
        } else {
            for (int piece = 0; piece < 8; piece++) memcpy(out + 32 * piece, qs + 32 * order[piece], 32);
            for (int j = 0; j < 8; j++) {
                int16_t a, b;
                memcpy(&a, q8k + 260 + 4 * j, 2);
                memcpy(&b, q8k + 262 + 4 * j, 2);
                for (int copy = 0; copy < 4; copy++) sums[8 * copy + j] = (int16_t)(a + b);
            }
        }
        memcpy(out + 256, sums, 64);
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

/* vpermw controls: int16 lane i of code vector v -> its sub-block's scale (q4_K/q5_K: 32-value
 * sub-blocks, two per vector; q6_K: 16-value sub-blocks, four per vector). */
VBMI_INLINE void k_scale_index(int kind, __m512i index[4]) {
    static const int pieces[4][2] = { { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 } };
    for (int v = 0; v < 4; v++) {
        uint16_t lanes[32];
        for (int i = 0; i < 32; i++) lanes[i] = (uint16_t)(kind == KIND_Q6_K ? 4 * v + i / 8 : pieces[v][i / 16]);
        index[v] = _mm512_loadu_si512(lanes);
    }
}

VBMI_INLINE __m512i halves8(char lo, char hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(lo)), _mm256_set1_epi8(hi), 1);
}
VBMI_INLINE __m512i halves16(short lo, short hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(lo)), _mm256_set1_epi16(hi), 1);
}

/* One weight super-block: code vectors u[4] (q4_K/q5_K unsigned, q6_K signed bytes), sub-block scale
 * vectors s[4] (int16), the start of each pair's integer sum (q6_K's weight-only term, else zero), the
 * scale d, and for q4_K/q5_K the 8 mins (int16) and dmin, whose products with the activation sums are
 * taken off (zero for q6_K). */
VBMI_INLINE void k_unpack(const int kind, const uint8_t * x, const __m512i index[4], __m512i u[4], __m512i s[4], __m128i * mins, float * d, float * dmin,
                          __m512i * base) {
    const __m512i m4 = _mm512_set1_epi8(15);
    if (kind == KIND_Q6_K) {
        const __m512i m30 = _mm512_set1_epi8(0x30);
        const __m512i shift_a = halves16(4, 2), shift_b = halves16(0, 2);
        for (int k = 0; k < 2; k++) {
            const __m512i L = _mm512_loadu_si512(x + 64 * k);
            const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + 128 + 32 * k)));
            u[2 * k] = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, shift_a), m30));
            u[2 * k + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(H, shift_b), m30));
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        const __m512i thirty_two = _mm512_set1_epi8(32), ones = _mm512_set1_epi8(1);
        __m512i sum = _mm512_setzero_si512();
        for (int v = 0; v < 4; v++) {
            s[v] = _mm512_permutexvar_epi16(index[v], sc);
            u[v] = _mm512_sub_epi8(u[v], thirty_two); /* signed values -32..31 */
            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(ones, u[v]), s[v]);
        }
        *base = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)); /* -128 * sum(scale * value) */
        *mins = _mm_setzero_si128();
        *d = _cvtsh_ss(load_u16(x + 208));
        *dmin = 0.0f;
    } else {
        const int qs_at = kind == KIND_Q5_K ? 48 : 16;
        const __m512i q0 = _mm512_loadu_si512(x + qs_at), q1 = _mm512_loadu_si512(x + qs_at + 64);
        u[0] = _mm512_and_si512(q0, m4);
        u[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
        u[2] = _mm512_and_si512(q1, m4);
        u[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
        if (kind == KIND_Q5_K) {
            /* fifth bit: qh[l] bit 2j for the low nibbles of 64-value chunk j, bit 2j+1 for the high */
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + 16)));
            const __m512i sixteen = _mm512_set1_epi8(16);
            static const int bits[4][2] = { { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 } };
            for (int v = 0; v < 4; v++) {
                const __mmask64 m = _mm512_test_epi8_mask(qh, halves8((char)(1 << bits[v][0]), (char)(1 << bits[v][1])));
                u[v] = _mm512_mask_add_epi8(u[v], m, u[v], sixteen);
            }
        }
        uint64_t scales, min_codes;
        q4k_scales_mins(x + 4, &scales, &min_codes);
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scales)));
        for (int v = 0; v < 4; v++) s[v] = _mm512_permutexvar_epi16(index[v], sc);
        *mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)min_codes));
        *d = _cvtsh_ss(load_u16(x));
        *dmin = _cvtsh_ss(load_u16(x + 2));
        *base = _mm512_setzero_si512();
    }
}

VBMI_INLINE void k_tile(const int kind, const int WR, const int AR, int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * a,
                        size_t a_stride, float * out, int64_t out_stride) {
    const int block_bytes = kind == KIND_Q6_K ? Q6_K_BYTES : kind == KIND_Q5_K ? Q5_K_BYTES : Q4_K_BYTES;
    __m512i index[4];
    k_scale_index(kind, index);
    __m512 acc[MEMRA_GEMM_TILE_W][MEMRA_GEMM_TILE_A];
    /* mins terms (q4_K/q5_K): one vector per activation row, lanes 4r..4r+3 for weight row r */
    __m512 min_terms[MEMRA_GEMM_TILE_A];
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
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) {
            __m512i u[4], s[4], base;
            float d;
            k_unpack(kind, w + r * w_stride + g * block_bytes, index, u, s, &mins[r], &d, &dmin[r], &base);
            const __m512 dw = _mm512_set1_ps(d);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) {
                const uint8_t * q = a + c * a_stride + g * PACKED_K_GROUP;
                __m512i isum = base;
                _Pragma("GCC unroll 4")
                for (int v = 0; v < 4; v++) {
                    const __m512i av = _mm512_loadu_si512(q + 64 * v);
                    /* vpmaddubsw multiplies unsigned (first) by signed (second) bytes */
                    const __m512i p = kind == KIND_Q6_K ? _mm512_maddubs_epi16(av, u[v]) : _mm512_maddubs_epi16(u[v], av);
                    isum = _mm512_dpwssd_epi32(isum, p, s[v]);
                }
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_loadu_ps(q + 320)), acc[r][c]);
            }
        }
        /* the mins terms of the four weight rows against each activation row (q4_K/q5_K) */
        if (kind != KIND_Q6_K) {
            const __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_m128i(mins[0], mins[1])), _mm256_setr_m128i(mins[2], mins[3]), 1);
            const __m512 f = _mm512_setr_ps(dmin[0], dmin[0], dmin[0], dmin[0], dmin[1], dmin[1], dmin[1], dmin[1], dmin[2], dmin[2],
                                            dmin[2], dmin[2], dmin[3], dmin[3], dmin[3], dmin[3]);
            _Pragma("GCC unroll 4")
            for (int c = 0; c < AR; c++) {
                const uint8_t * q = a + c * a_stride + g * PACKED_K_GROUP;
                const __m512 da = _mm512_loadu_ps(q + 320);
                min_terms[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(t, _mm512_loadu_si512(q + 256))), _mm512_mul_ps(f, da), min_terms[c]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < AR; c++) {
        float lanes[16];
        _mm512_storeu_ps(lanes, min_terms[c]);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < WR; r++) {
            const float term = lanes[4 * r] + lanes[4 * r + 1] + lanes[4 * r + 2] + lanes[4 * r + 3];
            out[c * out_stride + r] = _mm512_reduce_add_ps(acc[r][c]) - term;
        }
    }
}

#define K_TILE(name, kind)                                                                                  \
    VBMI_INLINE void name(const int WR, const int AR, int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) { \
        k_tile(kind, WR, AR, n, w, ws, a, as, out, os);                                                      \
    }
K_TILE(q4_K_tile, KIND_Q4_K)
K_TILE(q5_K_tile, KIND_Q5_K)
K_TILE(q6_K_tile, KIND_Q6_K)
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
static tile_kernel * const q8_0_tiles[4][4] = TILE_TABLE(q8_0_vbmi);
static tile_kernel * const q4_K_tiles[4][4] = TILE_TABLE(q4_K_vbmi);
static tile_kernel * const q5_K_tiles[4][4] = TILE_TABLE(q5_K_vbmi);
static tile_kernel * const q6_K_tiles[4][4] = TILE_TABLE(q6_K_vbmi);
static tile_kernel * const q8_0_tiles_u[4][4] = TILE_TABLE(q8_0_vbmi_u);


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
    /* q8_0 only: its tiles spend a third of their time unpacking (1.7x faster when it is done once per
     * 64 activation rows); the K-quant tiles unpack in registers more cheaply than they reload. */
    return type == MEMRA_TYPE_Q8_0 ? (size_t)(n / 256) * MEMRA_GEMM_TILE_W * Q8_0_UNPACKED : 0;
#else
    return 0;
#endif
}

void memra_gemm_unpack(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, void * unpacked) {
#ifdef MEMRA_GEMM_X86
    if (type == MEMRA_TYPE_Q8_0) unpack_q8_0(n, weight, w_stride, w_rows, unpacked);
#else
    (void)type; (void)n; (void)weight; (void)w_stride; (void)w_rows; (void)unpacked;
#endif
}

void memra_gemm_tile_unpacked(int type, int64_t n, const void * unpacked, int w_rows, const void * packed, size_t a_stride, int a_rows, float * out,
                              int64_t out_stride) {
#ifdef MEMRA_GEMM_X86
    if (type == MEMRA_TYPE_Q8_0) q8_0_tiles_u[w_rows - 1][a_rows - 1](n, unpacked, 0, packed, a_stride, out, out_stride);
#else
    (void)type; (void)n; (void)unpacked; (void)w_rows; (void)packed; (void)a_stride; (void)a_rows; (void)out; (void)out_stride;
#endif
}
