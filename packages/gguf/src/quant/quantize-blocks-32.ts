/**
 * Reference quantization into the 32-element block types, following ggml's
 * `quantize_row_{q4_0,q4_1,q5_0,q5_1,q8_0}_ref` operation for operation (binary32 arithmetic via
 * Math.fround, C's truncating float->int casts as x86-64 performs them, roundf's ties away from
 * zero). Each function
 * quantizes `blockCount` blocks of `x` into `out` (zero-filled, large enough).
 */
import { f32ToF16Bits } from "./half";

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

/** q4_0: d = max / -8 where max is the signed value of largest magnitude; q = min(15, trunc(x/d + 8.5)). */
export function quantizeQ4_0(x: Float32Array, out: Uint8Array, blockCount: number): void {
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
export function quantizeQ4_1(x: Float32Array, out: Uint8Array, blockCount: number): void {
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
export function quantizeQ5_0(x: Float32Array, out: Uint8Array, blockCount: number): void {
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
export function quantizeQ5_1(x: Float32Array, out: Uint8Array, blockCount: number): void {
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
