/**
 * Reference quantization into the 256-element super-block types, following ggml's
 * `quantize_row_{q2,q3,q4,q5,q6}_K_ref` (no importance matrix) operation for operation; see
 * scale-search.ts for the float rules. Each function quantizes `blockCount` super-blocks of `x`
 * into `out` (which must be zero-filled and large enough).
 */
import { F16_TO_F32, f32ToF16Bits } from "./half";
import {
  GROUP_MAX_EPS,
  nearestInt,
  searchScaleAndMin,
  searchSymmetricScale,
  searchSymmetricScaleQ3,
} from "./scale-search";

const f = Math.fround;
const HALF = F16_TO_F32;
const ONE_TENTH = f(0.1);

const levels = new Uint8Array(256);
const work = new Uint8Array(32);
const weights = new Float32Array(32);
const scales = new Float32Array(16);
const mins = new Float32Array(16);
const signedWork = new Int32Array(16);

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

/** q2_K: 16 groups of 16 with a 4-bit scale and 4-bit min each, 2-bit levels; 84 bytes. */
export function quantizeQ2_K(x: Float32Array, out: Uint8Array, blockCount: number): void {
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
}

/** q3_K: 16 groups of 16 with signed 6-bit scales, 3-bit levels (2 low bits + high mask); 110 bytes. */
export function quantizeQ3_K(x: Float32Array, out: Uint8Array, blockCount: number): void {
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 256;
    const yb = block * 110;
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
    let d: number;
    if (maxScale !== 0) {
      const iscale = f(-32 / maxScale);
      for (let j = 0; j < 16; j++) {
        let l = (nearestInt(f(iscale * scales[j]!)) << 24) >> 24; // stored in an int8_t in ggml
        l = Math.max(-32, Math.min(31, l)) + 32;
        if (j < 8) out[packed + j] = l & 0x0f;
        else out[packed + j - 8] = out[packed + j - 8]! | ((l & 0x0f) << 4);
        out[packed + 8 + (j % 4)] = out[packed + 8 + (j % 4)]! | ((l >>> 4) << (2 * (j >>> 2)));
      }
      d = writeHalf(out, yb + 108, f(1 / iscale));
    } else {
      d = writeHalf(out, yb + 108, 0);
    }
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

/**
 * The shared part of q4_K and q5_K: per 32-element group, scale and min by searchScaleAndMin with
 * weights sqrt(mean x^2) + |x|; 6-bit scales and mins packed as get_scale_min_k4 reads them; then
 * levels recomputed from the stored scales. Leaves the levels in `levels`; returns nothing.
 */
function quantizeScalesAndMinsK4(
  x: Float32Array,
  xb: number,
  out: Uint8Array,
  yb: number,
  nmax: number,
  rmin: number,
  nstep: number,
): void {
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
  const packed = yb + 4;
  for (let j = 0; j < 8; j++) {
    // uint8_t in ggml: the int result wraps to 8 bits before MIN(63, ...).
    const ls = Math.min(63, nearestInt(f(inverseScale * scales[j]!)) & 0xff);
    const lm = Math.min(63, nearestInt(f(inverseMin * mins[j]!)) & 0xff);
    if (j < 4) {
      out[packed + j] = ls;
      out[packed + j + 4] = lm;
    } else {
      out[packed + j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
      out[packed + j - 4] = out[packed + j - 4]! | ((ls >>> 4) << 6);
      out[packed + j] = out[packed + j]! | ((lm >>> 4) << 6);
    }
  }
  const d = writeHalf(out, yb, f(maxScale / 63));
  const dmin = writeHalf(out, yb + 2, f(maxMin / 63));
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

/** q4_K: 8 groups of 32 with 6-bit scales and mins, 4-bit levels; 144 bytes. */
export function quantizeQ4_K(x: Float32Array, out: Uint8Array, blockCount: number): void {
  for (let block = 0; block < blockCount; block++) {
    const yb = block * 144;
    quantizeScalesAndMinsK4(x, block * 256, out, yb, 15, -1, 20);
    for (let j = 0, q = yb + 16; j < 256; j += 64, q += 32) {
      for (let l = 0; l < 32; l++) out[q + l] = levels[j + l]! | (levels[j + l + 32]! << 4);
    }
  }
}

/** q5_K: as q4_K with 5-bit levels (fifth bits in qh); 176 bytes. */
export function quantizeQ5_K(x: Float32Array, out: Uint8Array, blockCount: number): void {
  for (let block = 0; block < blockCount; block++) {
    const yb = block * 176;
    quantizeScalesAndMinsK4(x, block * 256, out, yb, 31, -0.5, 15);
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
export function quantizeQ6_K(x: Float32Array, out: Uint8Array, blockCount: number): void {
  for (let block = 0; block < blockCount; block++) {
    const xb = block * 256;
    const yb = block * 210;
    let maxScale = 0;
    let maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      const scale = searchSymmetricScale(16, 32, x, xb + 16 * ib, levels, 16 * ib);
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
