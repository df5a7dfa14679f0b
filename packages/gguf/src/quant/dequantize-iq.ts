/**
 * Dequantization of ggml's i-quant super-block types (256 values per block): iq2_xxs, iq2_xs,
 * iq2_s, iq3_xxs, iq3_s, iq1_s and iq1_m, bit-exact with ggml's `dequantize_row_*` under the float
 * rules of dequantize-blocks-32.ts (ggml's operations in ggml's order, Math.fround where ggml's
 * float arithmetic rounds, the Float32Array store for the element).
 *
 * Each value is a sub-block scale times an entry of a lookup grid (iq-grids.ts): 8 values per
 * entry (iq2, iq1) or 4 (iq3), with signs from a 7-bit index into KSIGNS_IQ2XS (iq2_xxs, iq2_xs,
 * iq3_xxs) or from explicit sign bytes (iq2_s, iq3_s); iq1 grids hold −1, 0, 1 and add ±1/8.
 *
 * Each function reads `blockCount` blocks from the start of `src` and writes 256 floats per block
 * from the start of `out`.
 */
import { F16_TO_F32 } from "./half";
import { IQ1_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS } from "./iq-grids";

const HALF = F16_TO_F32;
const round = Math.fround;

function u16(src: Uint8Array, at: number): number {
  return src[at]! | (src[at + 1]! << 8);
}

function u32(src: Uint8Array, at: number): number {
  return (src[at]! | (src[at + 1]! << 8) | (src[at + 2]! << 16) | (src[at + 3]! << 24)) >>> 0;
}

/** 8 values of a grid entry, each negated where `signs` has its bit j. */
function put8(out: Float32Array, y: number, scale: number, grid: Uint8Array, entry: number, signs: number): void {
  const g = entry * 8;
  for (let j = 0; j < 8; j++) {
    const value = scale * grid[g + j]!;
    out[y + j] = signs & (1 << j) ? -round(value) : value;
  }
}

/** iq2_xxs (66 bytes): f16 d | 8 × (4 grid indices u8, u32 of 4 × 7 sign bits + 4-bit scale s). db = d·(0.5+s)·0.25. */
export function dequantizeIQ2_XXS(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 66) {
    const d = HALF[u16(src, s)]!;
    for (let ib = 0; ib < 8; ib++) {
      const q = s + 2 + 8 * ib;
      const aux = u32(src, q + 4);
      const db = round(round(d * (0.5 + (aux >>> 28))) * 0.25);
      for (let l = 0; l < 4; l++, y += 8) put8(out, y, db, IQ2XXS_GRID, src[q + l]!, KSIGNS_IQ2XS[(aux >>> (7 * l)) & 127]!);
    }
  }
}

/** iq2_xs (74 bytes): f16 d | qs u16[32] (9-bit grid index, 7 sign bits) | scales[8] (two 4-bit per 32 values). */
export function dequantizeIQ2_XS(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 74) {
    const d = HALF[u16(src, s)]!;
    for (let ib = 0; ib < 8; ib++) {
      const scales = src[s + 66 + ib]!;
      const db0 = round(round(d * (0.5 + (scales & 15))) * 0.25);
      const db1 = round(round(d * (0.5 + (scales >>> 4))) * 0.25);
      for (let l = 0; l < 4; l++, y += 8) {
        const q = u16(src, s + 2 + 2 * (4 * ib + l));
        put8(out, y, l < 2 ? db0 : db1, IQ2XS_GRID, q & 511, KSIGNS_IQ2XS[q >>> 9]!);
      }
    }
  }
}

/** iq2_s (82 bytes): f16 d | qs[32] grid index low bits | signs[32] | qh[8] (2 high bits per index) | scales[8]. */
export function dequantizeIQ2_S(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 82) {
    const d = HALF[u16(src, s)]!;
    for (let ib = 0; ib < 8; ib++) {
      const scales = src[s + 74 + ib]!;
      const qh = src[s + 66 + ib]!;
      const db0 = round(round(d * (0.5 + (scales & 15))) * 0.25);
      const db1 = round(round(d * (0.5 + (scales >>> 4))) * 0.25);
      for (let l = 0; l < 4; l++, y += 8) {
        const entry = src[s + 2 + 4 * ib + l]! | ((qh << (8 - 2 * l)) & 0x300);
        put8(out, y, l < 2 ? db0 : db1, IQ2S_GRID, entry, src[s + 34 + 4 * ib + l]!);
      }
    }
  }
}

/** iq3_xxs (98 bytes): f16 d | qs[64] grid indices (4 values each) | 8 × u32 (4 × 7 sign bits + 4-bit scale s). db = d·(0.5+s)·0.5. */
export function dequantizeIQ3_XXS(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 98) {
    const d = HALF[u16(src, s)]!;
    for (let ib = 0; ib < 8; ib++) {
      const aux = u32(src, s + 66 + 4 * ib);
      const db = round(round(d * (0.5 + (aux >>> 28))) * 0.5);
      for (let l = 0; l < 4; l++, y += 8) {
        const signs = KSIGNS_IQ2XS[(aux >>> (7 * l)) & 127]!;
        const g1 = src[s + 2 + 8 * ib + 2 * l]! * 4;
        const g2 = src[s + 2 + 8 * ib + 2 * l + 1]! * 4;
        for (let j = 0; j < 4; j++) {
          const v1 = db * IQ3XXS_GRID[g1 + j]!;
          const v2 = db * IQ3XXS_GRID[g2 + j]!;
          out[y + j] = signs & (1 << j) ? -round(v1) : v1;
          out[y + j + 4] = signs & (1 << (j + 4)) ? -round(v2) : v2;
        }
      }
    }
  }
}

/** iq3_s (110 bytes): f16 d | qs[64] | qh[8] (9th index bits) | signs[32] | scales[4] (4 bits per 32 values). db = d·(1+2s). */
export function dequantizeIQ3_S(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 110) {
    const d = HALF[u16(src, s)]!;
    for (let ib = 0; ib < 8; ib++) {
      const scale = (src[s + 106 + (ib >>> 1)]! >>> (4 * (ib & 1))) & 15;
      const db = round(d * (1 + 2 * scale));
      const qh = src[s + 66 + ib]!;
      for (let l = 0; l < 4; l++, y += 8) {
        const signs = src[s + 74 + 4 * ib + l]!;
        const g1 = (src[s + 2 + 8 * ib + 2 * l]! | ((qh << (8 - 2 * l)) & 256)) * 4;
        const g2 = (src[s + 2 + 8 * ib + 2 * l + 1]! | ((qh << (7 - 2 * l)) & 256)) * 4;
        for (let j = 0; j < 4; j++) {
          const v1 = db * IQ3S_GRID[g1 + j]!;
          const v2 = db * IQ3S_GRID[g2 + j]!;
          out[y + j] = signs & (1 << j) ? -round(v1) : v1;
          out[y + j + 4] = signs & (1 << (j + 4)) ? -round(v2) : v2;
        }
      }
    }
  }
}

/** iq1_s (50 bytes): f16 d | qs[32] grid index low bits | qh u16[8] (4 × 3 high index bits, 3-bit scale, delta sign). dl = d·(2s+1). */
export function dequantizeIQ1_S(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 50) {
    const d = HALF[u16(src, s)]!;
    for (let ib = 0; ib < 8; ib++) {
      const qh = u16(src, s + 34 + 2 * ib);
      const dl = round(d * (2 * ((qh >>> 12) & 7) + 1));
      const delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
      for (let l = 0; l < 4; l++, y += 8) {
        const g = (src[s + 2 + 4 * ib + l]! | (((qh >>> (3 * l)) & 7) << 8)) * 8;
        for (let j = 0; j < 8; j++) out[y + j] = dl * (IQ1S_GRID[g + j]! + delta);
      }
    }
  }
}

/**
 * iq1_m (56 bytes): qs[32] grid index low bits | qh[16] (per 8 values: 3 high index bits and the
 * delta's sign) | scales u16[4] (two 3-bit scales per 32 values; their top nibbles make the f16 d).
 */
export function dequantizeIQ1_M(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 56) {
    const sc0 = u16(src, s + 48);
    const sc1 = u16(src, s + 50);
    const sc2 = u16(src, s + 52);
    const sc3 = u16(src, s + 54);
    const d = HALF[(sc0 >>> 12) | ((sc1 >>> 8) & 0x00f0) | ((sc2 >>> 4) & 0x0f00) | (sc3 & 0xf000)]!;
    const sc = [sc0, sc1, sc2, sc3];
    for (let ib = 0; ib < 8; ib++) {
      const scales = sc[ib >>> 1]!;
      const shift = 6 * (ib & 1);
      const dl1 = round(d * (2 * ((scales >>> shift) & 7) + 1));
      const dl2 = round(d * (2 * ((scales >>> (shift + 3)) & 7) + 1));
      for (let l = 0; l < 4; l++, y += 8) {
        const qh = src[s + 32 + 2 * ib + (l >>> 1)]!;
        const high = l & 1 ? qh << 4 : qh << 8;
        const g = (src[s + 4 * ib + l]! | (high & 0x700)) * 8;
        const delta = qh & (l & 1 ? 0x80 : 0x08) ? -IQ1_DELTA : IQ1_DELTA;
        const dl = l < 2 ? dl1 : dl2;
        for (let j = 0; j < 8; j++) out[y + j] = dl * (IQ1S_GRID[g + j]! + delta);
      }
    }
  }
}
