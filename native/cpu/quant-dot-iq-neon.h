/*
 * NEON kernels of the i-quants below iq4 (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s): the
 * one- and four-row dot products and the decoded-rows route of matrix-matrix products. Part of
 * quant-dot.c, included in its section 6b after the other NEON kernels (it uses their helpers: dot16_fn,
 * fma_neon, Q8K_AT_NEON, prefetch_next_rows_neon, NEON_ROWS).
 *
 * Values: NEON multiplies signed bytes by signed bytes, so the weights are made signed here, not the
 * activations (as on x86): each group of 8 grid magnitudes (iq3: two grid entries of 4) is negated where
 * its sign bit is set, (g ^ m) - m with m the 0xff bytes that vtst spreads from the group's sign byte.
 * iq1's values g + delta (g in {-1, 0, 1}, delta +-1/8) are taken in units of 1/8: v = 8g +- 1, in -9..9,
 * so that sum(scale * v * a) is the integer sum of the scalar kernel (its codes u = v + 9, less 9 * bsum)
 * without the bsums, and the row's sum is multiplied by 1/8 at the end (with iq2_*'s constant 1/8 and
 * iq3_xxs's 1/4, see section 4).
 *
 * Per block and row: the sign bytes of the 32 groups of 8 (iq1: the delta's sign as 0xff bytes) and the
 * scales (2 * code + 1, one per 32 values or, for iq2_xs, iq2_s and iq1_m, per 16) are computed for the
 * whole block with vector instructions (iq_block_neon), and so are the grid indices whose bits lie in
 * several fields; then per 16 values the grid entries are loaded one by one into a vector, the signs
 * applied, and the bytes multiplied with the activations (dot16: smull/sadalp or sdot). The products of four
 * scale groups (units) are reduced pairwise (addp) to one lane each and multiplied with the four scales at
 * once (mla): isum, exact in int32 (|isum| < 256 * 62 * 127 * 31 < 2^31).
 *
 * Floats, the same on every kernel of both paths: acc = fma(d_w * d_a, (float)isum, acc) per block, and
 * the row's acc times the type's constant at the end. The integer sums are exact, so the one-row, four-row
 * and decoded kernels give the same bits (and "neon" and "neondot" too), and they differ from ggml's
 * per-block formula only in the order of the float additions.
 *
 * Decoded rows (memra_dot_decode_rows4): per block and row (NEON_IQ_DECODED_BLOCK bytes) the 256 signed
 * values v, the scales as int32 in iq_block_neon's order (64 B), d f32 and padding. The decoded kernel
 * runs the row kernel's products on them, each 16 activation bytes loaded once for the four rows; the
 * activation rows are read as they are (no prepare step), and memra_dot_decoded_tile runs it on one
 * activation row after the other (its generic loop). (A tile of the four rows with two activation rows,
 * each load shared by 8 products, came out at more instructions per product with GCC 12: it interleaves
 * the rows' products and spills.)
 */

#define IQ_NEON_PER16(type) ((type) == MEMRA_TYPE_IQ2_XS || (type) == MEMRA_TYPE_IQ2_S || (type) == MEMRA_TYPE_IQ1_M)
#define IQ_NEON_IQ1(type) ((type) == MEMRA_TYPE_IQ1_S || (type) == MEMRA_TYPE_IQ1_M)

enum { NEON_IQ_DECODED_BLOCK = 336 }; /* v[256] | scales int32[16] | d f32 | padding */

/* What a block's values need besides the bytes read as they are. */
typedef struct {
    /* byte g%16 of signs[g/16]: the sign byte of group g (bit j set: value 8g+j negative); iq1_m: 0xff where
     * group g's delta is negative; iq1_s: bytes 2s, 2s+1 0xff where sub-block s's delta is negative */
    uint8x16_t signs[2];
    /* the scales of units 4q .. 4q+3 (units: sub-blocks of 32 values, or of 16 for IQ_NEON_PER16 types;
     * scales[2], scales[3] zero where there are 8 units) */
    int32x4_t scales[4];
    /* the grid index of each group of 8 (iq3_s: of 4) values, for the types that spread its bits over
     * several fields (iq2_xs: masked off the signs), assembled with vector instructions */
    uint16_t index[64];
} iq_block_neon;

/* The constant factor of the row sum (see the top of this file). */
static inline float iq_factor_neon(int type) {
    return type == MEMRA_TYPE_IQ3_XXS ? 0.25f : type == MEMRA_TYPE_IQ3_S ? 1.0f : 0.125f;
}

static inline float iq_d_neon(int type, const uint8_t * xw) {
    return type == MEMRA_TYPE_IQ1_M ? f16_to_f32(iq1m_d_bits(xw + 48)) : fp16_at(xw);
}

/* Four 7-bit sign fields per u32 (at bits 0, 7, 14, 21: iq2_xxs, iq3_xxs) spread to its four bytes. */
NEON_INLINE uint8x16_t iq_spread7_neon(uint32x4_t a) {
    uint32x4_t x = vandq_u32(a, vdupq_n_u32(0x7f));
    x = vorrq_u32(x, vandq_u32(vshlq_n_u32(a, 1), vdupq_n_u32(0x7f00)));
    x = vorrq_u32(x, vandq_u32(vshlq_n_u32(a, 2), vdupq_n_u32(0x7f0000)));
    x = vorrq_u32(x, vandq_u32(vshlq_n_u32(a, 3), vdupq_n_u32(0x7f000000)));
    return vreinterpretq_u8_u32(x);
}

/* 7 sign bits per byte completed with their parity bit (bit 7), as memra_ksigns_iq2xs: the low 4 bits of
 * x ^ (x >> 4) have the parity of all 7, looked up in a table of 16. */
NEON_INLINE uint8x16_t iq_parity_neon(uint8x16_t x) {
    static const uint8_t odd[16] = { 0, 128, 128, 0, 128, 0, 0, 128, 128, 0, 0, 128, 0, 128, 128, 0 };
    const uint8x16_t t = vandq_u8(veorq_u8(x, vshrq_n_u8(x, 4)), vdupq_n_u8(15));
    return vorrq_u8(x, vqtbl1q_u8(vld1q_u8(odd), t));
}

/* 8 scale codes (one per sub-block of 32) -> 2 * code + 1 as int32 in scales[0], scales[1]. */
NEON_INLINE void iq_scales8_neon(uint8x8_t codes, int32x4_t * scales) {
    const uint16x8_t s = vmovl_u8(vorr_u8(vshl_n_u8(codes, 1), vdup_n_u8(1)));
    scales[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s)));
    scales[1] = vreinterpretq_s32_u32(vmovl_high_u16(s));
    scales[2] = scales[3] = vdupq_n_s32(0);
}

/* 16 scale codes (one per 16 values) -> 2 * code + 1 as int32 in scales[0..3]. */
NEON_INLINE void iq_scales16_neon(uint8x16_t codes, int32x4_t * scales) {
    const uint8x16_t s = vorrq_u8(vshlq_n_u8(codes, 1), vdupq_n_u8(1));
    const uint16x8_t lo = vmovl_u8(vget_low_u8(s)), hi = vmovl_high_u8(s);
    scales[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo)));
    scales[1] = vreinterpretq_s32_u32(vmovl_high_u16(lo));
    scales[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi)));
    scales[3] = vreinterpretq_s32_u32(vmovl_high_u16(hi));
}

/* Nibbles of 8 bytes, low nibble first: 16 codes in the order of their bytes (iq2_xs, iq2_s scales). */
NEON_INLINE uint8x16_t iq_nibbles8_neon(const uint8_t * p) {
    const uint8x8_t b = vld1_u8(p), lo = vand_u8(b, vdup_n_u8(15)), hi = vshr_n_u8(b, 4);
    return vcombine_u8(vzip1_u8(lo, hi), vzip2_u8(lo, hi));
}

/* Lane tables: iq_pair_neon + 2k picks (vqtbl) the bytes of groups 2k and 2k+1 for 8 lanes each, whose
 * bit j % 8 iq_bit_neon tests; iq_words_neon + 4k copies u16 2k and 2k+1 to four u16 lanes each, which
 * iq_shift3_neon shifts right by 0, 3, 6, 9 (the 3-bit fields of iq1_s's index bits and iq1_m's scales). */
static const uint8_t iq_pair_neon[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1 };
static const uint8_t iq_bit_neon[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
static const uint8_t iq_words_neon[16] = { 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3 };
static const int16_t iq_shift3_neon[8] = { 0, -3, -6, -9, 0, -3, -6, -9 };

/* pair + 2k: the table index of groups 2k, 2k+1 (see iq_pair_neon) */
NEON_INLINE uint8x16_t iq_pair_index_neon(int k) { return vaddq_u8(vld1q_u8(iq_pair_neon), vdupq_n_u8((uint8_t)(2 * k))); }

/* indices 16j .. 16j+15: the low bytes lo and high bytes hi, interleaved into u16 */
NEON_INLINE void iq_store_index16_neon(uint16_t * index, uint8x16_t lo, uint8x16_t hi) {
    vst1q_u8((uint8_t *)index, vzip1q_u8(lo, hi));
    vst1q_u8((uint8_t *)(index + 8), vzip2q_u8(lo, hi));
}

/* The sign bytes (or iq1's delta signs), scales and assembled grid indices of block xw. */
NEON_INLINE void iq_block_prepare_neon(const int type, const uint8_t * xw, iq_block_neon * b) {
    switch (type) {
    case MEMRA_TYPE_IQ2_XXS: case MEMRA_TYPE_IQ3_XXS: {
        /* the u32 of each sub-block: four 7-bit sign fields, the scale code in bits 28..31
         * (iq2_xxs: after each sub-block's 4 grid bytes, the odd u32, uzp2; iq3_xxs: at 66). Weights are
         * loaded as bytes: a block's fields have no alignment. */
        uint32x4_t a0, a1;
        if (type == MEMRA_TYPE_IQ2_XXS) {
            a0 = vuzp2q_u32(vreinterpretq_u32_u8(vld1q_u8(xw + 2)), vreinterpretq_u32_u8(vld1q_u8(xw + 18)));
            a1 = vuzp2q_u32(vreinterpretq_u32_u8(vld1q_u8(xw + 34)), vreinterpretq_u32_u8(vld1q_u8(xw + 50)));
        } else {
            a0 = vreinterpretq_u32_u8(vld1q_u8(xw + 66));
            a1 = vreinterpretq_u32_u8(vld1q_u8(xw + 82));
        }
        b->signs[0] = iq_parity_neon(iq_spread7_neon(a0));
        b->signs[1] = iq_parity_neon(iq_spread7_neon(a1));
        /* (a >> 27) | 1 = 2 * (a >> 28) + 1 */
        b->scales[0] = vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(a0, 27), vdupq_n_u32(1)));
        b->scales[1] = vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(a1, 27), vdupq_n_u32(1)));
        b->scales[2] = b->scales[3] = vdupq_n_s32(0);
        break;
    }
    case MEMRA_TYPE_IQ2_XS: {
        /* the u16 of group g: the grid index in bits 0..8; the sign field in bits 9..15, the high byte
         * (uzp2) shifted right by 1 */
        const uint8x16_t q0 = vld1q_u8(xw + 2), q1 = vld1q_u8(xw + 18), q2 = vld1q_u8(xw + 34), q3 = vld1q_u8(xw + 50);
        b->signs[0] = iq_parity_neon(vshrq_n_u8(vuzp2q_u8(q0, q1), 1));
        b->signs[1] = iq_parity_neon(vshrq_n_u8(vuzp2q_u8(q2, q3), 1));
        const uint8x16_t one = vdupq_n_u8(1);
        iq_store_index16_neon(b->index, vuzp1q_u8(q0, q1), vandq_u8(vuzp2q_u8(q0, q1), one));
        iq_store_index16_neon(b->index + 16, vuzp1q_u8(q2, q3), vandq_u8(vuzp2q_u8(q2, q3), one));
        iq_scales16_neon(iq_nibbles8_neon(xw + 66), b->scales);
        break;
    }
    case MEMRA_TYPE_IQ2_S: {
        /* a sign byte per group at 34; group g's index: qs[g] (at 2) and bits 2(g%4), +1 of qh[g/4] (at 66) */
        b->signs[0] = vld1q_u8(xw + 34);
        b->signs[1] = vld1q_u8(xw + 50);
        static const uint8_t quads[16] = { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3 };
        static const int8_t shifts[16] = { 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6 };
        const uint8x16_t qh = vcombine_u8(vld1_u8(xw + 66), vdup_n_u8(0));
        for (int j = 0; j < 2; j++) {
            const uint8x16_t h = vqtbl1q_u8(qh, vaddq_u8(vld1q_u8(quads), vdupq_n_u8((uint8_t)(4 * j))));
            const uint8x16_t bits = vandq_u8(vshlq_u8(h, vld1q_s8(shifts)), vdupq_n_u8(3));
            iq_store_index16_neon(b->index + 16 * j, vld1q_u8(xw + 2 + 16 * j), bits);
        }
        iq_scales16_neon(iq_nibbles8_neon(xw + 74), b->scales);
        break;
    }
    case MEMRA_TYPE_IQ3_S: {
        /* a sign byte per group of 8 at 74; entry k's index (4 values): qs[k] (at 2) and bit k%8 of qh[k/8]
         * (at 66); 4 bytes of scale nibbles at 106, one per sub-block */
        b->signs[0] = vld1q_u8(xw + 74);
        b->signs[1] = vld1q_u8(xw + 90);
        const uint8x16_t qh = vcombine_u8(vld1_u8(xw + 66), vdup_n_u8(0));
        for (int j = 0; j < 4; j++) {
            const uint8x16_t h = vtstq_u8(vqtbl1q_u8(qh, iq_pair_index_neon(j)), vld1q_u8(iq_bit_neon));
            iq_store_index16_neon(b->index + 16 * j, vld1q_u8(xw + 2 + 16 * j), vandq_u8(h, vdupq_n_u8(1)));
        }
        const uint8x8_t v = vcreate_u8(ld_u32(xw + 106));
        iq_scales8_neon(vzip1_u8(vand_u8(v, vdup_n_u8(15)), vshr_n_u8(v, 4)), b->scales);
        break;
    }
    case MEMRA_TYPE_IQ1_S: {
        /* the u16 qh of each sub-block s at 34: group 4s+l's index bits 8..10 at bit 3l, the scale code in bits
         * 12..14, the delta negative when bit 15 is set; the index's low byte qs[g] at 2 */
        const uint8x16_t qhb = vld1q_u8(xw + 34);
        const uint16x8_t qh = vreinterpretq_u16_u8(qhb);
        b->signs[0] = vreinterpretq_u8_u16(vtstq_u16(qh, vdupq_n_u16(0x8000)));
        b->signs[1] = vdupq_n_u8(0);
        for (int j = 0; j < 4; j++) { /* groups 8j .. 8j+7: sub-blocks 2j, 2j+1 */
            const uint8x16_t words = vaddq_u8(vld1q_u8(iq_words_neon), vdupq_n_u8((uint8_t)(4 * j)));
            const uint16x8_t qh4 = vreinterpretq_u16_u8(vqtbl1q_u8(qhb, words)); /* each u16 in four lanes */
            const uint16x8_t h = vandq_u16(vshlq_u16(qh4, vld1q_s16(iq_shift3_neon)), vdupq_n_u16(7));
            vst1q_u16(b->index + 8 * j, vorrq_u16(vshlq_n_u16(h, 8), vmovl_u8(vld1_u8(xw + 2 + 8 * j))));
        }
        iq_scales8_neon(vmovn_u16(vandq_u16(vshrq_n_u16(qh, 12), vdupq_n_u16(7))), b->scales);
        break;
    }
    default: { /* iq1_m */
        /* qh at 32: a nibble per group (byte g/2, the low one for even g), the grid index's bits 8..10 and the
         * delta's sign (bit 3); the index's low byte qs[g] at 0 */
        const uint8x16_t qh = vld1q_u8(xw + 32);
        const uint8x16_t lo = vtstq_u8(qh, vdupq_n_u8(0x08)), hi = vtstq_u8(qh, vdupq_n_u8(0x80));
        b->signs[0] = vzip1q_u8(lo, hi);
        b->signs[1] = vzip2q_u8(lo, hi);
        const uint8x16_t bits_lo = vandq_u8(qh, vdupq_n_u8(7)), bits_hi = vandq_u8(vshrq_n_u8(qh, 4), vdupq_n_u8(7));
        iq_store_index16_neon(b->index, vld1q_u8(xw), vzip1q_u8(bits_lo, bits_hi));
        iq_store_index16_neon(b->index + 16, vld1q_u8(xw + 16), vzip2q_u8(bits_lo, bits_hi));
        /* scale j (16 values) is bits 3(j%4) .. of u16 j/4 at 48: each u16 copied to four lanes, shifted */
        const uint8x8_t words = vld1_u8(xw + 48);
        const uint8x16_t table = vcombine_u8(words, words);
        const uint8x16_t spread = vld1q_u8(iq_words_neon);
        const uint16x8_t w01 = vreinterpretq_u16_u8(vqtbl1q_u8(table, spread));
        const uint16x8_t w23 = vreinterpretq_u16_u8(vqtbl1q_u8(table, vaddq_u8(spread, vdupq_n_u8(4))));
        const int16x8_t shift = vld1q_s16(iq_shift3_neon);
        const uint16x8_t c0 = vandq_u16(vshlq_u16(w01, shift), vdupq_n_u16(7));
        const uint16x8_t c1 = vandq_u16(vshlq_u16(w23, shift), vdupq_n_u16(7));
        iq_scales16_neon(vcombine_u8(vmovn_u16(c0), vmovn_u16(c1)), b->scales);
        break;
    }
    }
}

/* Two 8-byte grid entries, four 4-byte ones. */
NEON_INLINE uint8x16_t iq_grid8x2_neon(const uint64_t * grid, unsigned i0, unsigned i1) {
    return vreinterpretq_u8_u64(vcombine_u64(vld1_u64(grid + i0), vld1_u64(grid + i1)));
}
NEON_INLINE uint8x16_t iq_grid4x4_neon(const uint32_t * grid, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    const uint64_t lo = grid[i0] | (uint64_t)grid[i1] << 32, hi = grid[i2] | (uint64_t)grid[i3] << 32;
    return vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
}

/* The signed values 16c .. 16c+15 (groups 2c, 2c+1) of block xw (iq1: 8g +- 1). */
NEON_INLINE int8x16_t iq_values16_neon(const int type, const uint8_t * xw, const iq_block_neon * b, const int c) {
    const int g = 2 * c;
    uint8x16_t u; /* the grid bytes: magnitudes, iq1: g in {-1, 0, 1} */
    switch (type) {
    case MEMRA_TYPE_IQ2_XXS: { /* sub-block g/4's 4 grid indices at 2 + 8(g/4) */
        const uint8_t * q = xw + 2 + 8 * (g / 4) + g % 4;
        u = iq_grid8x2_neon(memra_iq2xxs_grid, q[0], q[1]);
        break;
    }
    case MEMRA_TYPE_IQ2_XS: u = iq_grid8x2_neon(memra_iq2xs_grid, b->index[g], b->index[g + 1]); break;
    case MEMRA_TYPE_IQ2_S: u = iq_grid8x2_neon(memra_iq2s_grid, b->index[g], b->index[g + 1]); break;
    case MEMRA_TYPE_IQ3_XXS: {
        const uint8_t * q = xw + 2 + 4 * c;
        u = iq_grid4x4_neon(memra_iq3xxs_grid, q[0], q[1], q[2], q[3]);
        break;
    }
    case MEMRA_TYPE_IQ3_S: {
        const uint16_t * k = b->index + 4 * c;
        u = iq_grid4x4_neon(memra_iq3s_grid, k[0], k[1], k[2], k[3]);
        break;
    }
    default: u = iq_grid8x2_neon(memra_iq1s_grid, b->index[g], b->index[g + 1]); break; /* iq1_s, iq1_m */
    }
    /* the bytes of groups g, g+1 (their sign bytes, iq1: their delta signs), each in 8 lanes */
    const uint8x16_t index = type == MEMRA_TYPE_IQ1_S ? vdupq_n_u8((uint8_t)(2 * (c / 2))) : iq_pair_index_neon(c % 8);
    const uint8x16_t spread = vqtbl1q_u8(b->signs[type == MEMRA_TYPE_IQ1_S ? 0 : c / 8], index);
    if (IQ_NEON_IQ1(type)) /* 8g, plus 0xff (-1) where the delta is negative, else 1 */
        return vreinterpretq_s8_u8(vaddq_u8(vshlq_n_u8(u, 3), vorrq_u8(spread, vdupq_n_u8(1))));
    /* 0xff where the lane's sign bit is set: the magnitude negated there */
    const uint8x16_t m = vtstq_u8(spread, vld1q_u8(iq_bit_neon));
    return vreinterpretq_s8_u8(vsubq_u8(veorq_u8(u, m), m));
}

/* isum of unit products p[0..3] with their scales: each p's lanes summed (addp), times its scale. */
NEON_INLINE int32x4_t iq_scale4_neon(int32x4_t isum, const int32x4_t * p, int32x4_t scales) {
    return vmlaq_s32(isum, vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3])), scales);
}

/* The one- and four-row kernel: per block and row isum (in four lanes), then acc += d_w * d_a * isum. */
NEON_INLINE void iq_neon(const int type, const int nr, int64_t n, const uint8_t * w, size_t stride, const uint8_t * a, float * out, dot16_fn * dot16) {
    const int wbytes = block_bytes(type);
    const int span = IQ_NEON_PER16(type) ? 1 : 2, quads = 4 / span; /* 16-value pieces per unit; units / 4 */
    float acc[4];
    for (int r = 0; r < nr; r++) acc[r] = 0.0f;
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        if (nr == 4) prefetch_next_rows_neon(w, stride, n / 256 * wbytes, ib * wbytes, wbytes);
        const float da = ld_f32(ya);
        for (int r = 0; r < nr; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            iq_block_neon b;
            iq_block_prepare_neon(type, xw, &b);
            int32x4_t isum = vdupq_n_s32(0);
            _Pragma("GCC unroll 4")
            for (int q = 0; q < quads; q++) {
                int32x4_t p[4];
                _Pragma("GCC unroll 4")
                for (int k = 0; k < 4; k++) {
                    p[k] = vdupq_n_s32(0);
                    _Pragma("GCC unroll 2")
                    for (int h = 0; h < span; h++) {
                        const int c = span * (4 * q + k) + h;
                        p[k] = dot16(p[k], iq_values16_neon(type, xw, &b, c), vld1q_s8(Q8K_AT_NEON(ya, c)));
                    }
                }
                isum = iq_scale4_neon(isum, p, b.scales[q]);
            }
            acc[r] = fma_neon(iq_d_neon(type, xw) * da, (float)vaddvq_s32(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = iq_factor_neon(type) * acc[r];
}

/* Four weight rows decoded (see the top of this file). No products: one version serves both paths. */
NEON_INLINE void iq_decode_rows4_neon(const int type, int64_t n, const uint8_t * w, size_t stride, uint8_t * decoded) {
    const int wbytes = block_bytes(type);
    for (int64_t ib = 0; ib < n / 256; ib++)
        for (int r = 0; r < 4; r++) {
            const uint8_t * xw = w + r * stride + ib * wbytes;
            uint8_t * o = decoded + (4 * ib + r) * NEON_IQ_DECODED_BLOCK;
            iq_block_neon b;
            iq_block_prepare_neon(type, xw, &b);
            _Pragma("GCC unroll 16")
            for (int c = 0; c < 16; c++) vst1q_s8((int8_t *)(o + 16 * c), iq_values16_neon(type, xw, &b, c));
            for (int q = 0; q < 4; q++) vst1q_u8(o + 256 + 16 * q, vreinterpretq_u8_s32(b.scales[q]));
            st_f32(o + 320, iq_d_neon(type, xw));
            memset(o + 324, 0, NEON_IQ_DECODED_BLOCK - 324);
        }
}

/* iq_neon's sequence for the four decoded rows and one activation row, each 16 activation bytes loaded
 * once for the four rows. */
NEON_INLINE void iq_decoded_neon(const int type, int64_t n, const uint8_t * decoded, const uint8_t * a, float * out, dot16_fn * dot16) {
    const int span = IQ_NEON_PER16(type) ? 1 : 2, quads = 4 / span;
    float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    for (int64_t ib = 0; ib < n / 256; ib++) {
        const uint8_t * ya = a + ib * Q8_K_BYTES;
        const uint8_t * blk = decoded + 4 * ib * NEON_IQ_DECODED_BLOCK;
        const float da = ld_f32(ya);
        int32x4_t isum[4];
        for (int r = 0; r < 4; r++) isum[r] = vdupq_n_s32(0);
        _Pragma("GCC unroll 4")
        for (int q = 0; q < quads; q++) {
            int8x16_t av[8]; /* the activations of this quad of units */
            _Pragma("GCC unroll 8")
            for (int j = 0; j < 4 * span; j++) av[j] = vld1q_s8(Q8K_AT_NEON(ya, 4 * span * q + j));
            _Pragma("GCC unroll 4")
            for (int r = 0; r < 4; r++) {
                const uint8_t * o = blk + r * NEON_IQ_DECODED_BLOCK;
                int32x4_t p[4];
                _Pragma("GCC unroll 4")
                for (int k = 0; k < 4; k++) {
                    p[k] = vdupq_n_s32(0);
                    _Pragma("GCC unroll 2")
                    for (int h = 0; h < span; h++) {
                        const int c = span * (4 * q + k) + h;
                        p[k] = dot16(p[k], vld1q_s8((const int8_t *)(o + 16 * c)), av[span * k + h]);
                    }
                }
                isum[r] = iq_scale4_neon(isum[r], p, vreinterpretq_s32_u8(vld1q_u8(o + 256 + 16 * q)));
            }
        }
        for (int r = 0; r < 4; r++)
            acc[r] = fma_neon(ld_f32(blk + r * NEON_IQ_DECODED_BLOCK + 320) * da, (float)vaddvq_s32(isum[r]), acc[r]);
    }
    for (int r = 0; r < 4; r++) out[r] = iq_factor_neon(type) * acc[r];
}

/* --- entry points: name_neon_rowsN and name_neondot_rowsN (NEON_ROWS), name_neon_decode (both paths),
 * name_neon_decoded and name_neondot_decoded --- */

#define IQ2_XXS_NEON(dot) iq_neon(MEMRA_TYPE_IQ2_XXS, NR, n, w, stride, a, out, dot)
#define IQ2_XS_NEON(dot) iq_neon(MEMRA_TYPE_IQ2_XS, NR, n, w, stride, a, out, dot)
#define IQ2_S_NEON(dot) iq_neon(MEMRA_TYPE_IQ2_S, NR, n, w, stride, a, out, dot)
#define IQ3_XXS_NEON(dot) iq_neon(MEMRA_TYPE_IQ3_XXS, NR, n, w, stride, a, out, dot)
#define IQ3_S_NEON(dot) iq_neon(MEMRA_TYPE_IQ3_S, NR, n, w, stride, a, out, dot)
#define IQ1_S_NEON(dot) iq_neon(MEMRA_TYPE_IQ1_S, NR, n, w, stride, a, out, dot)
#define IQ1_M_NEON(dot) iq_neon(MEMRA_TYPE_IQ1_M, NR, n, w, stride, a, out, dot)

NEON_ROWS(iq2_xxs, IQ2_XXS_NEON)
NEON_ROWS(iq2_xs, IQ2_XS_NEON)
NEON_ROWS(iq2_s, IQ2_S_NEON)
NEON_ROWS(iq3_xxs, IQ3_XXS_NEON)
NEON_ROWS(iq3_s, IQ3_S_NEON)
NEON_ROWS(iq1_s, IQ1_S_NEON)
NEON_ROWS(iq1_m, IQ1_M_NEON)

#ifdef MEMRA_NEONDOT
#define IQ_DECODED_NEONDOT(name, type)                                                                 \
    NEONDOT_FN void name##_neondot_decoded(int64_t n, const uint8_t * d, const uint8_t * a, float * out) { \
        iq_decoded_neon(type, n, d, a, out, dot16_neondot);                                            \
    }
#else
#define IQ_DECODED_NEONDOT(name, type)
#endif
#define IQ_DECODED_NEON(name, type)                                                                    \
    NEON_FN void name##_neon_decode(int64_t n, const uint8_t * w, size_t stride, uint8_t * d) {        \
        iq_decode_rows4_neon(type, n, w, stride, d);                                                   \
    }                                                                                                  \
    NEON_FN void name##_neon_decoded(int64_t n, const uint8_t * d, const uint8_t * a, float * out) {   \
        iq_decoded_neon(type, n, d, a, out, dot16_neon);                                               \
    }                                                                                                  \
    IQ_DECODED_NEONDOT(name, type)
IQ_DECODED_NEON(iq2_xxs, MEMRA_TYPE_IQ2_XXS)
IQ_DECODED_NEON(iq2_xs, MEMRA_TYPE_IQ2_XS)
IQ_DECODED_NEON(iq2_s, MEMRA_TYPE_IQ2_S)
IQ_DECODED_NEON(iq3_xxs, MEMRA_TYPE_IQ3_XXS)
IQ_DECODED_NEON(iq3_s, MEMRA_TYPE_IQ3_S)
IQ_DECODED_NEON(iq1_s, MEMRA_TYPE_IQ1_S)
IQ_DECODED_NEON(iq1_m, MEMRA_TYPE_IQ1_M)
