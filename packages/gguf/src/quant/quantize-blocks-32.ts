/**
 * Reference quantization into the 32-element block types, following ggml's
 * `quantize_row_{q4_0,q4_1,q5_0,q5_1,q8_0}_ref` operation for operation (binary32 arithmetic via
 * Math.fround, C's truncating float->int casts as x86-64 performs them, roundf's ties away from
 * zero). Each function
 * quantizes `blockCount` blocks of `x` into `out` (zero-filled, large enough).
 *
 * Given `importance` (one weight per value), q4_0, q4_1, q5_0 and q5_1 follow
 * `quantize_row_{q4_0,q4_1,q5_0,q5_1}_impl` instead: `x` is then ONE ROW, since their weights
 * importance * sqrt(sigma2 + x^2) take sigma2 = the mean of x^2 over the whole row. q8_0 has no
 * weighted quantizer in ggml (quantize_q8_0 ignores the imatrix).
 */
import { f32ToF16Bits } from "./half";
import { searchScaleAndMin, searchSymmetricScale } from "./scale-search";

const f = Math.fround;
const FLT_MAX = 3.4028234663852886e38;

/**
 * C's float -> int8_t/uint8_t cast as x86-64 compiles it: truncate toward zero to a 32-bit integer,
 * where NaN and out-of-range values give INT_MIN, then keep the low 8 bits (returned as 0..255).
 * Reached with infinities when a block's scale is subnormal and its reciprocal overflows.
 */
function truncateToByte(value: number): number {
  const integer = value > -2147483649 && value < 2147483648 ? Math.trunc(value) : -2147483648;
  return integer & 0xff;
}

/** As truncateToByte, read as a signed int8_t. */
function truncateToInt8(value: number): number {
  return (truncateToByte(value) << 24) >> 24;
}

function writeHalf(out: Uint8Array, offset: number, value: number): void {
  const bits = f32ToF16Bits(value);
  out[offset] = bits & 0xff;
  out[offset + 1] = bits >>> 8;
}

/** The value of largest magnitude in x[offset..offset+32) (the first one on ties), sign kept. */
function signedAbsoluteMax(x: Float32Array, offset: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < 32; j++) {
    const v = x[offset + j]!;
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

const weights = new Float32Array(32);
const levels = new Uint8Array(32);
const work = new Uint8Array(32);
const minus = new Float32Array(1);

/** sigma2 of the _impl quantizers: the mean of x^2 over the row x[0..count), summed in order. */
function rowSigma2(x: Float32Array, count: number): number {
  let sum = 0;
  for (let j = 0; j < count; j++) sum = f(sum + f(x[j]! * x[j]!));
  return f(sum / count);
}

/** The block at x[xb..xb+32)'s weights importance * sqrt(sigma2 + x^2), to `weights`. */
function blockWeights(x: Float32Array, xb: number, importance: Float32Array, sigma2: number): void {
  for (let j = 0; j < 32; j++) weights[j] = f(importance[xb + j]! * f(Math.sqrt(f(sigma2 + f(x[xb + j]! * x[xb + j]!)))));
}

/**
 * quantize_row_q4_0_impl / q5_0_impl: per block, the symmetric weighted search (make_qx_quants with
 * nmax 8 or 16) gives d and the levels L in [0, 2 nmax).
 */
function quantizeSymmetricWeighted(x: Float32Array, out: Uint8Array, blockCount: number, importance: Float32Array, nmax: number, bytesPerBlock: number): void {
  const sigma2 = rowSigma2(x, blockCount * 32);
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * bytesPerBlock;
    blockWeights(x, xb, importance, sigma2);
    writeHalf(out, yb, searchSymmetricScale(32, nmax, x, xb, levels, 0, weights, 0));
    if (nmax === 8) {
      for (let j = 0; j < 16; j++) out[yb + 2 + j] = levels[j]! | (levels[j + 16]! << 4);
    } else {
      packFiveBitLevels(out, yb + 2, yb + 6);
    }
  }
}

/**
 * quantize_row_q4_1_impl / q5_1_impl: per block, the weighted scale-and-min search
 * (make_qkx3_quants(32, nmax, ..., -0.9f, 0.05f, 36)) gives d, m = min and the levels in [0, nmax].
 */
function quantizeAffineWeighted(x: Float32Array, out: Uint8Array, blockCount: number, importance: Float32Array, nmax: number, bytesPerBlock: number): void {
  const sigma2 = rowSigma2(x, blockCount * 32);
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * bytesPerBlock;
    blockWeights(x, xb, importance, sigma2);
    const d = searchScaleAndMin(32, nmax, x, xb, weights, levels, 0, minus, 0, work, f(-0.9), f(0.05), 36, false);
    writeHalf(out, yb, d);
    writeHalf(out, yb + 2, -minus[0]!);
    if (nmax === 15) {
      for (let j = 0; j < 16; j++) out[yb + 4 + j] = levels[j]! | (levels[j + 16]! << 4);
    } else {
      packFiveBitLevels(out, yb + 4, yb + 8);
    }
  }
}

/** 5-bit `levels`: low nibbles at out[qs..qs+16) (level j and j + 16 per byte), fifth bits as a u32 at out[qh..]. */
function packFiveBitLevels(out: Uint8Array, qh: number, qs: number): void {
  let high = 0;
  for (let j = 0; j < 16; j++) {
    const q0 = levels[j]!;
    const q1 = levels[j + 16]!;
    out[qs + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
    high |= ((q0 & 0x10) >>> 4) << j;
    high |= ((q1 & 0x10) >>> 4) << (j + 16);
  }
  writeWord(out, qh, high);
}

/** q4_0: d = max / -8 where max is the signed value of largest magnitude; q = min(15, trunc(x/d + 8.5)). */
export function quantizeQ4_0(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  if (importance) return quantizeSymmetricWeighted(x, out, blockCount, importance, 8, 18);
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * 18;
    const d = f(signedAbsoluteMax(x, xb) / -8);
    const id = d !== 0 ? f(1 / d) : 0;
    writeHalf(out, yb, d);
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, truncateToInt8(f(f(x[xb + j]! * id) + 8.5))) & 0xff;
      const q1 = Math.min(15, truncateToInt8(f(f(x[xb + 16 + j]! * id) + 8.5))) & 0xff;
      out[yb + 2 + j] = q0 | (q1 << 4);
    }
  }
}

/** q4_1: d = (max - min) / 15, m = min; q = min(15, trunc((x - min)/d + 0.5)). */
export function quantizeQ4_1(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  if (importance) return quantizeAffineWeighted(x, out, blockCount, importance, 15, 20);
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * 20;
    let min = FLT_MAX;
    let max = -FLT_MAX;
    for (let j = 0; j < 32; j++) {
      const v = x[xb + j]!;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const d = f(f(max - min) / 15);
    const id = d !== 0 ? f(1 / d) : 0;
    writeHalf(out, yb, d);
    writeHalf(out, yb + 2, min);
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, truncateToInt8(f(f(f(x[xb + j]! - min) * id) + 0.5))) & 0xff;
      const q1 = Math.min(15, truncateToInt8(f(f(f(x[xb + 16 + j]! - min) * id) + 0.5))) & 0xff;
      out[yb + 4 + j] = q0 | (q1 << 4);
    }
  }
}

/** Stores a 32-bit little-endian word. */
function writeWord(out: Uint8Array, offset: number, word: number): void {
  out[offset] = word & 0xff;
  out[offset + 1] = (word >>> 8) & 0xff;
  out[offset + 2] = (word >>> 16) & 0xff;
  out[offset + 3] = word >>> 24;
}

/** q5_0: d = max / -16; q = min(31, trunc(x/d + 16.5)), fifth bits gathered into a u32. */
export function quantizeQ5_0(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  if (importance) return quantizeSymmetricWeighted(x, out, blockCount, importance, 16, 22);
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * 22;
    const d = f(signedAbsoluteMax(x, xb) / -16);
    const id = d !== 0 ? f(1 / d) : 0;
    writeHalf(out, yb, d);
    let high = 0;
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(31, truncateToInt8(f(f(x[xb + j]! * id) + 16.5))) & 0xff;
      const q1 = Math.min(31, truncateToInt8(f(f(x[xb + 16 + j]! * id) + 16.5))) & 0xff;
      out[yb + 6 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
      high |= ((q0 & 0x10) >>> 4) << j;
      high |= ((q1 & 0x10) >>> 4) << (j + 16);
    }
    writeWord(out, yb + 2, high);
  }
}

/** q5_1: d = (max - min) / 31, m = min; q = trunc((x - min)/d + 0.5), fifth bits into a u32. */
export function quantizeQ5_1(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  if (importance) return quantizeAffineWeighted(x, out, blockCount, importance, 31, 24);
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * 24;
    let min = FLT_MAX;
    let max = -FLT_MAX;
    for (let j = 0; j < 32; j++) {
      const v = x[xb + j]!;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const d = f(f(max - min) / 31);
    const id = d !== 0 ? f(1 / d) : 0;
    writeHalf(out, yb, d);
    writeHalf(out, yb + 2, min);
    let high = 0;
    for (let j = 0; j < 16; j++) {
      const q0 = truncateToByte(f(f(f(x[xb + j]! - min) * id) + 0.5));
      const q1 = truncateToByte(f(f(f(x[xb + 16 + j]! - min) * id) + 0.5));
      out[yb + 8 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
      high |= ((q0 & 0x10) >>> 4) << j;
      high |= ((q1 & 0x10) >>> 4) << (j + 16);
    }
    writeWord(out, yb + 4, high);
  }
}

/** q8_0: d = amax / 127; q = roundf(x / d) (ties away from zero). */
export function quantizeQ8_0(x: Float32Array, out: Uint8Array, blockCount: number): void {
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * 34;
    let amax = 0;
    for (let j = 0; j < 32; j++) {
      const a = Math.abs(x[xb + j]!);
      amax = amax > a ? amax : a;
    }
    const d = f(amax / 127);
    const id = d !== 0 ? f(1 / d) : 0;
    writeHalf(out, yb, d);
    for (let j = 0; j < 32; j++) {
      const v = f(x[xb + j]! * id);
      out[yb + 2 + j] = truncateToByte(v < 0 ? v - 0.5 : v + 0.5); // roundf, then the int8_t cast
    }
  }
}
