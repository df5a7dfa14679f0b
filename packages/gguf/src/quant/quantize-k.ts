/**
 * Reference quantization into the 256-element super-block types, following ggml's
 * `quantize_row_{q2,q3,q4,q5,q6}_K_ref` (no importance matrix) and, given importance,
 * `quantize_row_{q2,q3,q4,q5,q6}_K_impl` operation for operation; see scale-search.ts for the float
 * rules. Each function quantizes `blockCount` super-blocks of `x` into `out` (which must be
 * zero-filled and large enough); `importance`, when given, holds one weight per value of `x` (a row:
 * ggml indexes its quant_weights by the position in the row).
 */
import { F16_TO_F32, f32ToF16Bits } from "./half";
import {
  GROUP_MAX_EPS,
  nearestInt,
  searchPositiveScale,
  searchScaleAndMin,
  searchSymmetricScale,
  searchSymmetricScaleQ3,
} from "./scale-search";

const f = Math.fround;
const HALF = F16_TO_F32;
const ONE_TENTH = f(0.1);
/** The scale search of the weighted k-quants (ggml's make_qkx3_quants(..., -0.9f, 0.05f, 36, false)). */
const WEIGHTED_RMIN = f(-0.9);
const WEIGHTED_RDELTA = f(0.05);
const WEIGHTED_STEPS = 36;

const levels = new Uint8Array(256);
const work = new Uint8Array(32);
const weights = new Float32Array(32);
const scales = new Float32Array(16);
const mins = new Float32Array(16);
const signedWork = new Int32Array(16);
const groupWeights = new Float32Array(16);
const scaleLevels = new Uint8Array(16);
const minLevels = new Uint8Array(16);

/** Sum of x^2 over the super-block at x[xb..xb+256), in order. */
function sumOfSquares(x: Float32Array, xb: number): number {
  let sum = 0;
  for (let i = 0; i < 256; i++) sum = f(sum + f(x[xb + i]! * x[xb + i]!));
  return sum;
}

/**
 * The weighted k-quants' weights of `count` values at x[xo..]: importance * sqrt(sigma2 + x^2), to
 * `weights[0..count)`; returns their sum (ggml's sw[j]), accumulated in order.
 */
function importanceWeights(x: Float32Array, xo: number, importance: Float32Array, count: number, sigma2: number): number {
  let sum = 0;
  for (let l = 0; l < count; l++) {
    weights[l] = f(importance[xo + l]! * f(Math.sqrt(f(sigma2 + f(x[xo + l]! * x[xo + l]!)))));
    sum = f(sum + weights[l]!);
  }
  return sum;
}

function writeHalf(out: Uint8Array, offset: number, value: number): number {
  const bits = f32ToF16Bits(value);
  out[offset] = bits & 0xff;
  out[offset + 1] = bits >>> 8;
  return HALF[bits]!;
}

/** Packs four 2-bit level planes: byte l of each 32-byte group holds levels l, l+32, l+64, l+96 of 128. */
function packTwoBitLevels(out: Uint8Array, qs: number): void {
  for (let j = 0; j < 256; j += 128) {
    for (let l = 0; l < 32; l++) {
      out[qs + j / 4 + l] =
        levels[j + l]! | (levels[j + l + 32]! << 2) | (levels[j + l + 64]! << 4) | (levels[j + l + 96]! << 6);
    }
  }
}

/** q2_K's levels from its stored d, dmin and 4-bit scales and mins (groups whose scale is 0 keep the search's), packed. */
function q2KLevels(x: Float32Array, xb: number, out: Uint8Array, yb: number, d: number, dmin: number): void {
  for (let j = 0; j < 16; j++) {
    const dl = f(d * (out[yb + j]! & 0x0f));
    if (dl === 0) continue;
    const ml = f(dmin * (out[yb + j]! >>> 4));
    for (let i = 0; i < 16; i++) {
      const l = nearestInt(f(f(x[xb + 16 * j + i]! + ml) / dl));
      levels[16 * j + i] = Math.max(0, Math.min(3, l));
    }
  }
  packTwoBitLevels(out, yb + 16);
}

/** q2_K: 16 groups of 16 with a 4-bit scale and 4-bit min each, 2-bit levels; 84 bytes. */
export function quantizeQ2_K(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  if (importance) {
    for (let block = 0; block < blockCount; block++) quantizeQ2_KWeighted(x, block * 256, out, block * 84, importance);
    return;
  }
  const q4scale = 15;
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 256;
    const yb = block * 84;
    let maxScale = 0;
    let maxMin = 0;
    for (let j = 0; j < 16; j++) {
      for (let l = 0; l < 16; l++) weights[l] = Math.abs(x[xb + 16 * j + l]!);
      const scale = searchScaleAndMin(
        16, 3, x, xb + 16 * j, weights, levels, 16 * j, mins, j, work, -0.5, ONE_TENTH, 15, true,
      );
      scales[j] = scale;
      if (scale > maxScale) maxScale = scale;
      if (mins[j]! > maxMin) maxMin = mins[j]!;
    }
    let d: number;
    if (maxScale > 0) {
      const iscale = f(q4scale / maxScale);
      for (let j = 0; j < 16; j++) out[yb + j] = nearestInt(f(iscale * scales[j]!)) & 0xff;
      d = writeHalf(out, yb + 80, f(maxScale / q4scale));
    } else {
      for (let j = 0; j < 16; j++) out[yb + j] = 0;
      d = writeHalf(out, yb + 80, 0);
    }
    let dmin: number;
    if (maxMin > 0) {
      const iscale = f(q4scale / maxMin);
      for (let j = 0; j < 16; j++) out[yb + j] = (out[yb + j]! | (nearestInt(f(iscale * mins[j]!)) << 4)) & 0xff;
      dmin = writeHalf(out, yb + 82, f(maxMin / q4scale));
    } else {
      dmin = writeHalf(out, yb + 82, 0);
    }
    q2KLevels(x, xb, out, yb, d, dmin);
  }
}

/**
 * quantize_row_q2_K_impl's super-block: scales and mins by the weighted search, then 4-bit group
 * scales and mins of their own weighted fit (make_qp_quants, weighted by the groups' summed weights).
 */
function quantizeQ2_KWeighted(x: Float32Array, xb: number, out: Uint8Array, yb: number, importance: Float32Array): void {
  const sigma2 = f(sumOfSquares(x, xb) / 256);
  for (let j = 0; j < 16; j++) {
    groupWeights[j] = importanceWeights(x, xb + 16 * j, importance, 16, sigma2);
    scales[j] = searchScaleAndMin(
      16, 3, x, xb + 16 * j, weights, levels, 16 * j, mins, j, work, WEIGHTED_RMIN, WEIGHTED_RDELTA, WEIGHTED_STEPS, false,
    );
  }
  const d = writeHalf(out, yb + 80, searchPositiveScale(16, 15, scales, scaleLevels, groupWeights));
  const dmin = writeHalf(out, yb + 82, searchPositiveScale(16, 15, mins, minLevels, groupWeights));
  for (let j = 0; j < 16; j++) out[yb + j] = scaleLevels[j]! | (minLevels[j]! << 4);
  q2KLevels(x, xb, out, yb, d, dmin);
}

/** q3_K: 16 groups of 16 with signed 6-bit scales, 3-bit levels (2 low bits + high mask); 110 bytes. */
export function quantizeQ3_K(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 256;
    const yb = block * 110;
    const packed = yb + 96;
    const d = importance ? quantizeQ3_KScalesWeighted(x, xb, out, yb, importance) : quantizeQ3_KScales(x, xb, out, yb);
    for (let j = 0; j < 16; j++) {
      const low = j < 8 ? out[packed + j]! & 0x0f : out[packed + j - 8]! >>> 4;
      const scale = (low | (((out[packed + 8 + (j % 4)]! >>> (2 * (j >>> 2))) & 3) << 4)) - 32;
      const dl = f(d * scale);
      if (dl === 0) continue;
      for (let i = 0; i < 16; i++) {
        const l = nearestInt(f(x[xb + 16 * j + i]! / dl));
        levels[16 * j + i] = Math.max(-4, Math.min(3, l)) + 4;
      }
    }
    out.fill(0, yb, yb + 32);
    let m = 0;
    let highBit = 1;
    for (let j = 0; j < 256; j++) {
      if (levels[j]! > 3) {
        out[yb + m] = out[yb + m]! | highBit;
        levels[j] = levels[j]! - 4;
      }
      if (++m === 32) {
        m = 0;
        highBit <<= 1;
      }
    }
    packTwoBitLevels(out, yb + 32);
  }
}

/** Writes q3_K's packed 6-bit scales (quantize_row_q3_K_ref) and its f16 d; returns d as stored. */
function quantizeQ3_KScales(x: Float32Array, xb: number, out: Uint8Array, yb: number): number {
  const packed = yb + 96;
  let maxScale = 0;
  let amax = 0;
  for (let j = 0; j < 16; j++) {
    const scale = searchSymmetricScaleQ3(16, 4, x, xb + 16 * j, levels, 16 * j, signedWork);
    scales[j] = scale;
    const abs = Math.abs(scale);
    if (abs > amax) {
      amax = abs;
      maxScale = scale;
    }
  }
  out.fill(0, packed, packed + 12);
  if (maxScale !== 0) {
    const iscale = f(-32 / maxScale);
    for (let j = 0; j < 16; j++) {
      let l = (nearestInt(f(iscale * scales[j]!)) << 24) >> 24; // stored in an int8_t in ggml
      l = Math.max(-32, Math.min(31, l)) + 32;
      if (j < 8) out[packed + j] = l & 0x0f;
      else out[packed + j - 8] = out[packed + j - 8]! | ((l & 0x0f) << 4);
      out[packed + 8 + (j % 4)] = out[packed + 8 + (j % 4)]! | ((l >>> 4) << (2 * (j >>> 2)));
    }
    return writeHalf(out, yb + 108, f(1 / iscale));
  }
  return writeHalf(out, yb + 108, 0);
}

/**
 * quantize_row_q3_K_impl's scales: each group's by make_qx_quants weighted with importance *
 * sqrt(sigma2 + x^2), then the 16 scales' own weighted fit (6-bit levels) gives the packed scales
 * and d. Returns d as stored.
 */
function quantizeQ3_KScalesWeighted(x: Float32Array, xb: number, out: Uint8Array, yb: number, importance: Float32Array): number {
  const packed = yb + 96;
  const sigma2 = f(f(2 * sumOfSquares(x, xb)) / 256);
  for (let j = 0; j < 16; j++) {
    groupWeights[j] = importanceWeights(x, xb + 16 * j, importance, 16, sigma2);
    scales[j] = searchSymmetricScale(16, 4, x, xb + 16 * j, levels, 16 * j, weights, 0);
  }
  out.fill(0, packed, packed + 12);
  const dBlock = searchSymmetricScale(16, 32, scales, 0, scaleLevels, 0, groupWeights, 0);
  for (let j = 0; j < 16; j++) {
    const l = scaleLevels[j]!;
    if (j < 8) out[packed + j] = l & 0x0f;
    else out[packed + j - 8] = out[packed + j - 8]! | ((l & 0x0f) << 4);
    out[packed + 8 + (j % 4)] = out[packed + 8 + (j % 4)]! | ((l >>> 4) << (2 * (j >>> 2)));
  }
  return writeHalf(out, yb + 108, dBlock);
}

/**
 * The shared part of q4_K and q5_K: d, dmin and the 6-bit scales and mins packed as get_scale_min_k4
 * reads them (from quantize_row_q{4,5}_K_ref's search, or given importance from _impl's), then the
 * levels recomputed from the stored scales. Leaves the levels (0..nmax) in `levels`.
 */
function quantizeScalesAndMinsK4(
  x: Float32Array,
  xb: number,
  out: Uint8Array,
  yb: number,
  nmax: number,
  rmin: number,
  nstep: number,
  importance: Float32Array | undefined,
): void {
  if (importance) packWeightedScalesAndMinsK4(x, xb, out, yb, nmax, importance);
  else packScalesAndMinsK4(x, xb, out, yb, nmax, rmin, nstep);
  const d = HALF[out[yb]! | (out[yb + 1]! << 8)]!;
  const dmin = HALF[out[yb + 2]! | (out[yb + 3]! << 8)]!;
  const packed = yb + 4;
  for (let j = 0; j < 8; j++) {
    let scale: number;
    let min: number;
    if (j < 4) {
      scale = out[packed + j]! & 63;
      min = out[packed + j + 4]! & 63;
    } else {
      scale = (out[packed + j + 4]! & 0x0f) | ((out[packed + j - 4]! >>> 6) << 4);
      min = (out[packed + j + 4]! >>> 4) | ((out[packed + j]! >>> 6) << 4);
    }
    const dl = f(d * scale);
    if (dl === 0) continue;
    const ml = f(dmin * min);
    for (let i = 0; i < 32; i++) {
      const l = nearestInt(f(f(x[xb + 32 * j + i]! + ml) / dl));
      levels[32 * j + i] = Math.max(0, Math.min(nmax, l));
    }
  }
}

/** Packs scale and min levels (6 bits each) of the 8 groups at out[packed..packed+12). */
function packScaleAndMinLevels(out: Uint8Array, packed: number, j: number, ls: number, lm: number): void {
  if (j < 4) {
    out[packed + j] = ls;
    out[packed + j + 4] = lm;
  } else {
    out[packed + j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
    out[packed + j - 4] = out[packed + j - 4]! | ((ls >>> 4) << 6);
    out[packed + j] = out[packed + j]! | ((lm >>> 4) << 6);
  }
}

/** quantize_row_q{4,5}_K_ref's scales: per group of 32, weights sqrt(mean x^2) + |x|, max-scaled 6-bit levels. */
function packScalesAndMinsK4(x: Float32Array, xb: number, out: Uint8Array, yb: number, nmax: number, rmin: number, nstep: number): void {
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    const xo = xb + 32 * j;
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) sumX2 = f(sumX2 + f(x[xo + l]! * x[xo + l]!));
    const averageX = f(Math.sqrt(f(sumX2 / 32)));
    for (let l = 0; l < 32; l++) weights[l] = averageX + Math.abs(x[xo + l]!); // rounded on store
    const scale = searchScaleAndMin(
      32, nmax, x, xo, weights, levels, 32 * j, mins, j, work, rmin, ONE_TENTH, nstep, false,
    );
    scales[j] = scale;
    if (scale > maxScale) maxScale = scale;
    if (mins[j]! > maxMin) maxMin = mins[j]!;
  }
  const inverseScale = maxScale > 0 ? f(63 / maxScale) : 0;
  const inverseMin = maxMin > 0 ? f(63 / maxMin) : 0;
  for (let j = 0; j < 8; j++) {
    // uint8_t in ggml: the int result wraps to 8 bits before MIN(63, ...).
    const ls = Math.min(63, nearestInt(f(inverseScale * scales[j]!)) & 0xff);
    const lm = Math.min(63, nearestInt(f(inverseMin * mins[j]!)) & 0xff);
    packScaleAndMinLevels(out, yb + 4, j, ls, lm);
  }
  writeHalf(out, yb, f(maxScale / 63));
  writeHalf(out, yb + 2, f(maxMin / 63));
}

/**
 * quantize_row_q{4,5}_K_impl's scales: per group of 32, the weighted search with importance *
 * sqrt(sigma2 + x^2), then the scales' and mins' own weighted fits (make_qp_quants, 6 bits) give d
 * and dmin. q5_K caps the levels at 63 as it packs them, q4_K does not (they only exceed 63 wrapped).
 */
function packWeightedScalesAndMinsK4(x: Float32Array, xb: number, out: Uint8Array, yb: number, nmax: number, importance: Float32Array): void {
  const sigma2 = f(f(2 * sumOfSquares(x, xb)) / 256);
  for (let j = 0; j < 8; j++) {
    groupWeights[j] = importanceWeights(x, xb + 32 * j, importance, 32, sigma2);
    scales[j] = searchScaleAndMin(
      32, nmax, x, xb + 32 * j, weights, levels, 32 * j, mins, j, work, WEIGHTED_RMIN, WEIGHTED_RDELTA, WEIGHTED_STEPS, false,
    );
  }
  const dBlock = searchPositiveScale(8, 63, scales, scaleLevels, groupWeights);
  const mBlock = searchPositiveScale(8, 63, mins, minLevels, groupWeights);
  const cap = nmax === 31 ? 63 : 255;
  for (let j = 0; j < 8; j++) packScaleAndMinLevels(out, yb + 4, j, Math.min(cap, scaleLevels[j]!), Math.min(cap, minLevels[j]!));
  writeHalf(out, yb, dBlock);
  writeHalf(out, yb + 2, mBlock);
}

/** q4_K: 8 groups of 32 with 6-bit scales and mins, 4-bit levels; 144 bytes. */
export function quantizeQ4_K(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  for (let block = 0; block < blockCount; block++) {
    const yb = block * 144;
    quantizeScalesAndMinsK4(x, block * 256, out, yb, 15, -1, 20, importance);
    for (let j = 0, q = yb + 16; j < 256; j += 64, q += 32) {
      for (let l = 0; l < 32; l++) out[q + l] = levels[j + l]! | (levels[j + l + 32]! << 4);
    }
  }
}

/** q5_K: as q4_K with 5-bit levels (fifth bits in qh); 176 bytes. */
export function quantizeQ5_K(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  for (let block = 0; block < blockCount; block++) {
    const yb = block * 176;
    quantizeScalesAndMinsK4(x, block * 256, out, yb, 31, -0.5, 15, importance);
    const qh = yb + 16;
    out.fill(0, qh, qh + 32);
    let bit1 = 1;
    let bit2 = 2;
    for (let n = 0, ql = yb + 48; n < 256; n += 64, ql += 32) {
      for (let j = 0; j < 32; j++) {
        let l1 = levels[n + j]!;
        if (l1 > 15) {
          l1 -= 16;
          out[qh + j] = out[qh + j]! | bit1;
        }
        let l2 = levels[n + j + 32]!;
        if (l2 > 15) {
          l2 -= 16;
          out[qh + j] = out[qh + j]! | bit2;
        }
        out[ql + j] = l1 | (l2 << 4);
      }
      bit1 <<= 2;
      bit2 <<= 2;
    }
  }
}

/** q6_K: 16 groups of 16 with int8 scales, 6-bit levels (4 low bits in ql, 2 high in qh); 210 bytes. */
export function quantizeQ6_K(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 256;
    const yb = block * 210;
    let maxScale = 0;
    let maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      // quantize_row_q6_K_impl weighs the fit with the importance itself (no sigma2 term)
      const scale = searchSymmetricScale(16, 32, x, xb + 16 * ib, levels, 16 * ib, importance, xb + 16 * ib);
      scales[ib] = scale;
      const abs = Math.abs(scale);
      if (abs > maxAbsScale) {
        maxAbsScale = abs;
        maxScale = scale;
      }
    }
    if (maxAbsScale < GROUP_MAX_EPS) {
      out.fill(0, yb, yb + 210);
      continue;
    }
    const iscale = f(-128 / maxScale);
    const d = writeHalf(out, yb + 208, f(1 / iscale));
    for (let ib = 0; ib < 16; ib++) {
      out[yb + 192 + ib] = Math.min(127, nearestInt(f(iscale * scales[ib]!))) & 0xff;
    }
    for (let j = 0; j < 16; j++) {
      const dl = f(d * ((out[yb + 192 + j]! << 24) >> 24));
      if (dl === 0) continue;
      for (let i = 0; i < 16; i++) {
        const l = nearestInt(f(x[xb + 16 * j + i]! / dl));
        levels[16 * j + i] = Math.max(-32, Math.min(31, l)) + 32;
      }
    }
    for (let j = 0, ql = yb, qh = yb + 128; j < 256; j += 128, ql += 64, qh += 32) {
      for (let l = 0; l < 32; l++) {
        const l0 = levels[j + l]!;
        const l1 = levels[j + l + 32]!;
        const l2 = levels[j + l + 64]!;
        const l3 = levels[j + l + 96]!;
        out[ql + l] = (l0 & 0x0f) | ((l2 & 0x0f) << 4);
        out[ql + l + 32] = (l1 & 0x0f) | ((l3 & 0x0f) << 4);
        out[qh + l] = (l0 >>> 4) | ((l1 >>> 4) << 2) | ((l2 >>> 4) << 4) | ((l3 >>> 4) << 6);
      }
    }
  }
}
