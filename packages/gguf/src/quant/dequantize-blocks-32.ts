/**
 * Dequantization of the 32-element block types (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl), bit-exact
 * with ggml's `dequantize_row_*`.
 *
 * Float semantics: ggml computes in binary32 and each C operation rounds once. Here every product
 * of a block scale, sub-scale and quant is exact in binary32: an f16 scale has 11 significant bits
 * and the integer factors add at most 12 more (q6_K: 7 for the int8 scale, 5 for the quant; iq4_xs:
 * 5 and 7), and no product leaves the normal float32 range. So it is exact in a double too, and
 * only the final add or subtract of a minimum can round: computing it in doubles and storing into
 * the Float32Array rounds once to the same float32 (a double has more than 2*24+2 bits, so the
 * double rounding is innocuous). For the same reason a fused multiply-add in ggml would give
 * the same result, so these outputs do not depend on how ggml was compiled. Per-sub-block scales
 * are still rounded with Math.fround where ggml rounds them.
 *
 * Each function reads `blockCount` blocks from the start of `src` and writes 32 floats per block
 * from the start of `out`; the caller has checked the lengths.
 */
import { F16_TO_F32 } from "./half";
import { IQ4_NL_VALUES } from "./iq4-nl-values";

const HALF = F16_TO_F32;

/** q4_0 (18 bytes): f16 d, 16 bytes of nibbles; element j = (nibble - 8) * d, low nibbles first. */
export function dequantizeQ4_0(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 18, y += 32) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    for (let j = 0; j < 16; j++) {
      const byte = src[s + 2 + j]!;
      out[y + j] = ((byte & 0x0f) - 8) * d;
      out[y + j + 16] = ((byte >>> 4) - 8) * d;
    }
  }
}

/** q4_1 (20 bytes): f16 d, f16 m, 16 bytes of nibbles; element = nibble * d + m. */
export function dequantizeQ4_1(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 20, y += 32) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    const m = HALF[src[s + 2]! | (src[s + 3]! << 8)]!;
    for (let j = 0; j < 16; j++) {
      const byte = src[s + 4 + j]!;
      out[y + j] = (byte & 0x0f) * d + m;
      out[y + j + 16] = (byte >>> 4) * d + m;
    }
  }
}

/** q5_0 (22 bytes): f16 d, u32 of fifth bits, 16 bytes of nibbles; element = (5-bit q - 16) * d. */
export function dequantizeQ5_0(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 22, y += 32) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    const high = (src[s + 2]! | (src[s + 3]! << 8) | (src[s + 4]! << 16) | (src[s + 5]! << 24)) >>> 0;
    for (let j = 0; j < 16; j++) {
      const byte = src[s + 6 + j]!;
      const q0 = ((byte & 0x0f) | (((high >>> j) << 4) & 0x10)) - 16;
      const q1 = ((byte >>> 4) | ((high >>> (j + 12)) & 0x10)) - 16;
      out[y + j] = q0 * d;
      out[y + j + 16] = q1 * d;
    }
  }
}

/** q5_1 (24 bytes): f16 d, f16 m, u32 of fifth bits, 16 bytes of nibbles; element = q * d + m. */
export function dequantizeQ5_1(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 24, y += 32) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    const m = HALF[src[s + 2]! | (src[s + 3]! << 8)]!;
    const high = (src[s + 4]! | (src[s + 5]! << 8) | (src[s + 6]! << 16) | (src[s + 7]! << 24)) >>> 0;
    for (let j = 0; j < 16; j++) {
      const byte = src[s + 8 + j]!;
      const q0 = (byte & 0x0f) | (((high >>> j) << 4) & 0x10);
      const q1 = (byte >>> 4) | ((high >>> (j + 12)) & 0x10);
      out[y + j] = q0 * d + m;
      out[y + j + 16] = q1 * d + m;
    }
  }
}

/** q8_0 (34 bytes): f16 d, 32 int8 quants; element = q * d. */
export function dequantizeQ8_0(src: Uint8Array, out: Float32Array, blockCount: number): void {
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 34, y += 32) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    for (let j = 0; j < 32; j++) {
      out[y + j] = ((src[s + 2 + j]! << 24) >> 24) * d;
    }
  }
}

/** iq4_nl (18 bytes): f16 d, 16 bytes of 4-bit codes into the non-linear table; element = d * level. */
export function dequantizeIQ4_NL(src: Uint8Array, out: Float32Array, blockCount: number): void {
  const levels = IQ4_NL_VALUES;
  for (let block = 0, s = 0, y = 0; block < blockCount; block++, s += 18, y += 32) {
    const d = HALF[src[s]! | (src[s + 1]! << 8)]!;
    for (let j = 0; j < 16; j++) {
      const byte = src[s + 2 + j]!;
      out[y + j] = d * levels[byte & 0x0f]!;
      out[y + j + 16] = d * levels[byte >>> 4]!;
    }
  }
}
