/**
 * Dequantization of the 256-element super-block types (q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs),
 * bit-exact with ggml's `dequantize_row_*` under the float rules described in
 * dequantize-blocks-32.ts: ggml's operations in ggml's order, each rounding to float32 where ggml's
 * can round (Math.fround on sub-block scales, the store into the Float32Array for the element).
 *
 * Each function reads `blockCount` super-blocks from the start of `src` and writes 256 floats per
 * super-block from the start of `out`.
 */
import { F16_TO_F32 } from "./half";
import { IQ4_NL_VALUES } from "./iq4-nl-values";

const HALF = F16_TO_F32;

/**
 * q2_K (84 bytes): scales[16] (low nibble: scale, high nibble: min, per 16 elements), qs[64] of
 * 2-bit quants, f16 d, f16 dmin. element = (d * scale) * q - (dmin * min).
 */
export function dequantizeQ2_K(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const round = Math.fround;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 84) {
    const d = HALF[src[s + 80]! | (src[s + 81]! << 8)]!;
    const dmin = HALF[src[s + 82]! | (src[s + 83]! << 8)]!;
    let scaleIndex = s;
    for (let half = 0; half < 2; half++) {
      const q = s + 16 + half * 32;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let part = 0; part < 32; part += 16) {
          const scaleByte = src[scaleIndex++]!;
          const dl = round(d * (scaleByte & 0x0f));
          const ml = round(dmin * (scaleByte >>> 4));
          for (let l = 0; l < 16; l++) {
            out[y++] = dl * ((src[q + part + l]! >>> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

const q3Scales = new Int32Array(16);

/**
 * q3_K (110 bytes): hmask[32] (high bits), qs[64] (low 2 bits), scales[12] (16 packed 6-bit scales,
 * offset by 32), f16 d. element = (d * (scale - 32)) * (low2 - (high bit set ? 0 : 4)).
 */
export function dequantizeQ3_K(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const round = Math.fround;
  const scales = q3Scales;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 110) {
    const d = HALF[src[s + 108]! | (src[s + 109]! << 8)]!;
    const packed = s + 96;
    for (let j = 0; j < 16; j++) {
      const low = j < 8 ? src[packed + j]! & 0x0f : src[packed + j - 8]! >>> 4;
      const high = (src[packed + 8 + (j & 3)]! >>> (2 * (j >>> 2))) & 3;
      scales[j] = (low | (high << 4)) - 32;
    }
    let scaleIndex = 0;
    let highBit = 0; // hmask bit for this 32-element plane: 0..7 across the super-block
    for (let half = 0; half < 2; half++) {
      const q = s + 32 + half * 32;
      for (let shift = 0; shift < 8; shift += 2, highBit++) {
        for (let part = 0; part < 32; part += 16) {
          const dl = round(d * scales[scaleIndex++]!);
          for (let l = 0; l < 16; l++) {
            // low 2 bits, minus 4 unless the hmask bit is set (branch-free: data-dependent branches mispredict)
            const low = (src[q + part + l]! >>> shift) & 3;
            const high = (src[s + part + l]! >>> highBit) & 1;
            out[y++] = dl * (low - 4 + (high << 2));
          }
        }
      }
    }
  }
}

/**
 * q4_K (144 bytes): f16 d, f16 dmin, scales[12] (8 packed 6-bit scales and mins), qs[128].
 * element = (d * scale) * q - (dmin * min); 64 elements per 32 qs bytes, low nibbles first.
 */
export function dequantizeQ4_K(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const round = Math.fround;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 144) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    const dmin = HALF[src[s + 2]! | (src[s + 3]! << 8)]!;
    const packed = s + 4;
    for (let group = 0; group < 4; group++) {
      const j = group * 2;
      const d1 = round(d * scaleK4(src, packed, j));
      const m1 = round(dmin * minK4(src, packed, j));
      const d2 = round(d * scaleK4(src, packed, j + 1));
      const m2 = round(dmin * minK4(src, packed, j + 1));
      const q = s + 16 + group * 32;
      for (let l = 0; l < 32; l++) out[y + l] = d1 * (src[q + l]! & 0x0f) - m1;
      for (let l = 0; l < 32; l++) out[y + 32 + l] = d2 * (src[q + l]! >>> 4) - m2;
      y += 64;
    }
  }
}

/**
 * q5_K (176 bytes): f16 d, f16 dmin, scales[12], qh[32] (fifth bits), qs[128].
 * element = (d * scale) * (nibble + 16 * high bit) - (dmin * min).
 */
export function dequantizeQ5_K(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const round = Math.fround;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 176) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    const dmin = HALF[src[s + 2]! | (src[s + 3]! << 8)]!;
    const packed = s + 4;
    const qh = s + 16;
    for (let group = 0; group < 4; group++) {
      const j = group * 2;
      const d1 = round(d * scaleK4(src, packed, j));
      const m1 = round(dmin * minK4(src, packed, j));
      const d2 = round(d * scaleK4(src, packed, j + 1));
      const m2 = round(dmin * minK4(src, packed, j + 1));
      const ql = s + 48 + group * 32;
      // The fifth bit of sub-block j is bit j of qh[l]; shifted arithmetically, not branched on.
      for (let l = 0; l < 32; l++) {
        const q = (src[ql + l]! & 0x0f) | (((src[qh + l]! >>> j) & 1) << 4);
        out[y + l] = d1 * q - m1;
      }
      for (let l = 0; l < 32; l++) {
        const q = (src[ql + l]! >>> 4) | (((src[qh + l]! >>> (j + 1)) & 1) << 4);
        out[y + 32 + l] = d2 * q - m2;
      }
      y += 64;
    }
  }
}

const q6Scales = new Float64Array(16);

/**
 * q6_K (210 bytes): ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], f16 d.
 * element = (d * scale) * (6-bit q - 32).
 */
export function dequantizeQ6_K(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const round = Math.fround;
  const scales = q6Scales;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 210) {
    const d = HALF[src[s + 208]! | (src[s + 209]! << 8)]!;
    for (let j = 0; j < 16; j++) scales[j] = round(d * ((src[s + 192 + j]! << 24) >> 24));
    for (let half = 0; half < 2; half++) {
      const ql = s + half * 64;
      const qh = s + 128 + half * 32;
      const sc = half * 8;
      for (let l = 0; l < 32; l++) {
        const is = sc + (l >>> 4);
        const low0 = src[ql + l]!;
        const low1 = src[ql + l + 32]!;
        const high = src[qh + l]!;
        out[y + l] = scales[is]! * (((low0 & 0x0f) | ((high & 3) << 4)) - 32);
        out[y + l + 32] = scales[is + 2]! * (((low1 & 0x0f) | (((high >>> 2) & 3) << 4)) - 32);
        out[y + l + 64] = scales[is + 4]! * (((low0 >>> 4) | (((high >>> 4) & 3) << 4)) - 32);
        out[y + l + 96] = scales[is + 6]! * (((low1 >>> 4) | (((high >>> 6) & 3) << 4)) - 32);
      }
      y += 128;
    }
  }
}

/**
 * iq4_xs (136 bytes): f16 d, u16 scales_h (2 high bits per 32 elements), scales_l[4] (4 low bits
 * per 32 elements), qs[128] of 4-bit codes. element = (d * (scale - 32)) * level[code].
 */
export function dequantizeIQ4_XS(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const round = Math.fround;
  const levels = IQ4_NL_VALUES;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 136) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    const scalesHigh = src[s + 2]! | (src[s + 3]! << 8);
    for (let ib = 0; ib < 8; ib++) {
      const low = (src[s + 4 + (ib >>> 1)]! >>> (4 * (ib & 1))) & 0x0f;
      const scale = low | (((scalesHigh >>> (2 * ib)) & 3) << 4);
      const dl = round(d * (scale - 32));
      const q = s + 8 + ib * 16;
      for (let j = 0; j < 16; j++) {
        const byte = src[q + j]!;
        out[y + j] = dl * levels[byte & 0x0f]!;
        out[y + j + 16] = dl * levels[byte >>> 4]!;
      }
      y += 32;
    }
  }
}

/**
 * The 6-bit scale of sub-block `j` (0..7) from the 12 packed bytes at `src[offset..]` (ggml's
 * `get_scale_min_k4`): sub-blocks 0-3 use the low 6 bits of bytes 0-3; 4-7 combine the low nibble of
 * bytes 8-11 with the top 2 bits of bytes 0-3.
 */
export function scaleK4(src: Uint8Array, offset: number, j: number): number {
  return j < 4
    ? src[offset + j]! & 63
    : (src[offset + j + 4]! & 0x0f) | ((src[offset + j - 4]! >>> 6) << 4);
}

/** The 6-bit min of sub-block `j` (see scaleK4): bytes 4-7 low 6 bits, or high nibble of 8-11 with top bits of 4-7. */
export function minK4(src: Uint8Array, offset: number, j: number): number {
  return j < 4
    ? src[offset + j + 4]! & 63
    : (src[offset + j + 4]! >>> 4) | ((src[offset + j]! >>> 6) << 4);
}
