/**
 * iq4_nl and iq4_xs quantization as llama-quantize writes them: ggml's `quantize_iq4_nl` /
 * `quantize_iq4_xs` (ggml_quantize_chunk's path: the scale search with ntry 7 and weights x^2, or
 * given importance importance * sqrt(sigma2 + x^2) with sigma2 = 2 * mean x^2 over the super-block;
 * `quantize_row_iq4_nl_ref` searches no scales and is not what files hold), every operation in
 * binary32 in ggml's order.
 */
import { f32ToF16Bits } from "./half";
import { IQ4_NL_VALUES } from "./iq4-nl-values";
import { GROUP_MAX_EPS, nearestInt } from "./scale-search";

const f = Math.fround;
const VALUES = IQ4_NL_VALUES;
const NTRY = 7;

/** ggml's best_index_int8 over the 16 levels: the nearest level's index, the upper one on a tie. */
function bestIndex(x: number): number {
  if (x <= VALUES[0]!) return 0;
  if (x >= VALUES[15]!) return 15;
  let low = 0;
  let high = 15;
  while (high - low > 1) {
    const mid = (low + high) >> 1;
    if (x < VALUES[mid]!) high = mid;
    else low = mid;
  }
  return f(x - VALUES[high - 1]!) < f(VALUES[high]! - x) ? high - 1 : high;
}

const weight = new Float32Array(32);
const levels = new Uint8Array(256);
const scales = new Float32Array(8);

/**
 * The scale of the 32 values at x[offset..] (0 for an all-zero block), their nearest levels written to
 * levels[levelOffset..] (left as they were for an all-zero block): quantize_row_iq4_nl_impl's inner loop.
 * With importance (indexed like x), the weights are importance * sqrt(sigma2 + x^2).
 */
function searchBlock(x: Float32Array, offset: number, levelOffset: number, importance: Float32Array | undefined, sigma2: number): number {
  if (importance) {
    for (let j = 0; j < 32; j++) weight[j] = f(importance[offset + j]! * f(Math.sqrt(f(sigma2 + f(x[offset + j]! * x[offset + j]!)))));
  } else {
    for (let j = 0; j < 32; j++) weight[j] = f(x[offset + j]! * x[offset + j]!);
  }
  let amax = 0;
  let max = 0;
  for (let j = 0; j < 32; j++) {
    const ax = Math.abs(x[offset + j]!);
    if (ax > amax) {
      amax = ax;
      max = x[offset + j]!;
    }
  }
  if (amax < GROUP_MAX_EPS) return 0;
  let d = f(-max / VALUES[0]!);
  let id = f(1 / d);
  let sumqx = 0;
  let sumq2 = 0;
  for (let j = 0; j < 32; j++) {
    const xj = x[offset + j]!;
    const l = bestIndex(f(id * xj));
    levels[levelOffset + j] = l;
    const q = VALUES[l]!;
    const wq = f(weight[j]! * q);
    sumqx = f(sumqx + f(wq * xj));
    sumq2 = f(sumq2 + f(wq * q));
  }
  d = sumq2 > 0 ? f(sumqx / sumq2) : 0;
  let best = f(d * sumqx);
  for (let itry = -NTRY; itry <= NTRY; itry++) {
    id = f((itry + VALUES[0]!) / max);
    sumqx = 0;
    sumq2 = 0;
    for (let j = 0; j < 32; j++) {
      const xj = x[offset + j]!;
      const q = VALUES[bestIndex(f(id * xj))]!;
      const wq = f(weight[j]! * q);
      sumqx = f(sumqx + f(wq * xj));
      sumq2 = f(sumq2 + f(wq * q));
    }
    if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
      d = f(sumqx / sumq2);
      best = f(d * sumqx);
    }
  }
  return d;
}

/** quantize_row_iq4_nl_impl's sigma2: the sum of x^2 over the super-block, times 2 / its size. */
function superBlockSigma2(x: Float32Array, offset: number, size: number): number {
  let sum = 0;
  for (let j = 0; j < size; j++) sum = f(sum + f(x[offset + j]! * x[offset + j]!));
  return f(sum * f(2 / size));
}

function writeHalf(out: Uint8Array, offset: number, value: number): void {
  const bits = f32ToF16Bits(value);
  out[offset] = bits & 0xff;
  out[offset + 1] = bits >>> 8;
}

/** Packs 32 levels per 16 bytes: byte j holds level j (low nibble) and level 16 + j (high). */
function packLevels(out: Uint8Array, at: number, count: number): void {
  for (let i = 0; i < count / 32; i++) {
    for (let j = 0; j < 16; j++) out[at + 16 * i + j] = levels[32 * i + j]! | (levels[32 * i + 16 + j]! << 4);
  }
}

/** iq4_nl: blocks of 32 values, an f16 scale and 16 bytes of 4-bit level indices (18 bytes). */
export function quantizeIQ4_NL(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 32;
    const yb = block * 18;
    const scale = searchBlock(x, xb, 0, importance, importance ? superBlockSigma2(x, xb, 32) : 0);
    writeHalf(out, yb, scale);
    const id = scale !== 0 ? f(1 / scale) : 0;
    for (let j = 0; j < 32; j++) levels[j] = bestIndex(f(id * x[xb + j]!));
    packLevels(out, yb + 2, 32);
  }
}

/**
 * iq4_xs: super-blocks of 256 values (136 bytes): an f16 scale, 6-bit block scales (2 high bits of
 * each in a u16, 4 low bits in 4 bytes) and 128 bytes of level indices.
 */
export function quantizeIQ4_XS(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  for (let block = 0; block < blockCount; block++) {
    const xs = block * 256;
    const yb = block * 136;
    let maxScale = 0;
    let amaxScale = 0;
    const sigma2 = importance ? superBlockSigma2(x, xs, 256) : 0;
    for (let ib = 0; ib < 8; ib++) {
      const d = searchBlock(x, xs + 32 * ib, 32 * ib, importance, sigma2);
      scales[ib] = d;
      if (Math.abs(d) > amaxScale) {
        amaxScale = Math.abs(d);
        maxScale = d;
      }
    }
    const d = f(-maxScale / 32);
    writeHalf(out, yb, d);
    const id = d !== 0 ? f(1 / d) : 0;
    let high = 0;
    for (let ib = 0; ib < 8; ib++) {
      let l = nearestInt(f(id * scales[ib]!));
      l = Math.max(-32, Math.min(31, l));
      const dl = f(d * l);
      const idl = dl !== 0 ? f(1 / dl) : 0;
      for (let j = 0; j < 32; j++) levels[32 * ib + j] = bestIndex(f(idl * x[xs + 32 * ib + j]!));
      l += 32;
      if (ib % 2 === 0) out[yb + 4 + (ib >> 1)] = l & 0xf;
      else out[yb + 4 + (ib >> 1)]! |= (l & 0xf) << 4;
      high |= (l >> 4) << (2 * ib);
    }
    out[yb + 2] = high & 0xff;
    out[yb + 3] = high >>> 8;
    packLevels(out, yb + 8, 256);
  }
}
