/**
 * iq2_xxs, iq2_xs and iq2_s quantization, byte for byte as ggml's quantize_iq2_xxs / _xs / _s
 * (ggml-quants.c, quantize_row_iq2_*_impl): what llama-quantize runs with an importance matrix.
 * iq2_xxs and iq2_xs need one (ggml asserts it); iq2_s also works without. native/cpu/quantize-iq2.c
 * is the same arithmetic in C.
 *
 * Per group of 32 (iq2_xxs) or 16 values: the magnitudes, each group of 8 with an even count of
 * negatives (iq2_xxs, iq2_xs: the sign of the least important value is flipped when odd), are
 * fitted as scale · (2l + 1), l in 0..2, over candidate scales; a pattern of 8 levels that is not a
 * grid entry becomes the best of its listed neighbours (iq2-grid-tables.ts); the best weighted fit
 * is kept and refitted once. Then the super-block's f16 scale and 4-bit group scales. The weights
 * are importance · √(σ² + x²) per value, σ² the super-block's mean square (iq2_s: twice that; without
 * an importance matrix 0.25·σ² + x²).
 *
 * Float rules as in scale-search.ts: Math.fround after every binary32 operation ggml performs, in
 * ggml's order. `importance` holds one row's importance (rowLength values) and applies to every row.
 */
import { f32ToF16Bits } from "./half";
import { iq2GridTables } from "./iq2-grid-tables";
import {
  type GridScaleSearch,
  QK_K,
  blocksPerRow,
  evenMagnitudesAndSigns,
  gridIndex,
  gridLevels,
  groupWeights,
  largest,
  magnitudesAndSigns,
  positiveScale,
  putU16,
  putU32,
  scaleCode,
  searchGridScale,
  squareRoots,
  sumOfSquares,
  superBlockSigma2,
  weightedFit,
} from "./quantize-iq-common";
import { GROUP_MAX_EPS, searchPositiveScale } from "./scale-search";

const f = Math.fround;
const ONE_TENTH = f(0.1);
const GROUP_MAX_EPS_IQ2_S = f(1e-8);
/** The scale search of iq2_xs and iq2_s: (5 + 0.1 is) / max for |is| ≤ 9, only the groups off the grid refitted. */
const SEARCH_16: GridScaleSearch = { group: 8, candidates: 9, base: 5, step: ONE_TENTH, refitAllGroups: false };

const weight = new Float32Array(32);
const waux = new Float32Array(32);
const xval = new Float32Array(32);
const L = new Int8Array(32);
const Laux = new Int8Array(32);
/** L as make_qp_quants writes it (ggml passes (uint8_t *)L). */
const Lqp = new Uint8Array(L.buffer);
const scales = new Float32Array(16);
const blockSigns = new Uint8Array(4);

/**
 * iq2_xxs: `rows` rows of `rowLength` values (a multiple of 256) → 66 bytes per 256 (f16 d | per 32
 * values 4 grid indices and a u32 of 4 × 7 sign bits and a 4-bit scale). `importance` is required.
 */
export function quantizeIQ2_XXS(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  if (importance === undefined) throw new Error("quantizeIQ2_XXS: needs an importance matrix (ggml quantizes iq2_xxs only with one)");
  const blocks = blocksPerRow("quantizeIQ2_XXS", x, out, rows, rowLength, 66, importance);
  const t = iq2GridTables(256);
  const indices = new Uint8Array(32); // per group of 32: 4 grid indices
  const words = new Uint32Array(8); // per group of 32: signs and scale
  for (let row = 0; row < rows; row++) {
    for (let ibl = 0; ibl < blocks; ibl++) {
      const xbl = row * rowLength + ibl * QK_K;
      const y = (row * blocks + ibl) * 66;
      out.fill(0, y, y + 66);
      indices.fill(0);
      words.fill(0);
      let maxScale = 0;
      const sigma2 = f(sumOfSquares(x, xbl) / QK_K);
      for (let ib = 0; ib < 8; ib++) {
        const xb = xbl + 32 * ib;
        groupWeights(weight, x, xb, importance, ibl * QK_K + 32 * ib, sigma2, 32);
        squareRoots(waux, weight, 32);
        evenMagnitudesAndSigns(x, xb, 32, weight, xval, blockSigns);
        const max = largest(xval, 32);
        if (max < GROUP_MAX_EPS) {
          scales[ib] = 0;
          continue;
        }
        let scale = searchPositiveScale(32, 4, xval, Lqp, weight);
        const effMax = f(scale * 3);
        if (effMax <= 0) {
          scales[ib] = 0;
          continue;
        }
        let best = 0;
        for (let is = -6; is <= 6; is++) {
          const id = f(f(5 + f(is * ONE_TENTH)) / effMax);
          const thisScale = f(1 / id);
          for (let k = 0; k < 4; k++) gridLevels(t, 8, id, thisScale, xval, waux, 8 * k, Laux);
          const [sumqx, sumq2] = weightedFit(32, weight, xval, Laux);
          if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
            scale = f(sumqx / sumq2);
            best = f(scale * sumqx);
            L.set(Laux);
          }
        }
        if (scale > 0) {
          const id = f(1 / scale);
          for (let k = 0; k < 4; k++) gridLevels(t, 8, id, scale, xval, waux, 8 * k, L);
          const [sumqx, sumq2] = weightedFit(32, weight, xval, L);
          if (sumq2 > 0) scale = f(sumqx / sumq2);
        }
        scale = positiveScale(scale, 4, 127, blockSigns);
        for (let k = 0; k < 4; k++) {
          indices[4 * ib + k] = gridIndex(t, 8, L, 8 * k);
          words[ib] = (words[ib]! | (blockSigns[k]! << (7 * k))) >>> 0;
        }
        scales[ib] = scale;
        maxScale = maxScale > scale ? maxScale : scale;
      }
      if (maxScale === 0) continue;
      const d = f(maxScale / 31);
      putU16(out, y, f32ToF16Bits(d));
      const id = f(1 / d);
      for (let ib = 0; ib < 8; ib++) {
        const q = y + 2 + 8 * ib;
        for (let k = 0; k < 4; k++) out[q + k] = indices[4 * ib + k]!;
        putU32(out, q + 4, (words[ib]! | (scaleCode(id, scales[ib]!, 15) << 28)) >>> 0);
      }
    }
  }
}

/**
 * iq2_xs (`iq2s` false: 512-entry grid, 74 bytes: f16 d | per 8 values a u16 of a 9-bit grid index
 * and 7 sign bits | 4-bit scales) and iq2_s (1024 entries, 82 bytes: f16 d | grid index low bytes[32]
 * | sign bytes[32] | 2 high index bits per 8 values[8] | 4-bit scales): the same search per group of 16.
 */
function quantizeGroupsOf16(iq2s: boolean, x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance: Float32Array | undefined): void {
  const bytes = iq2s ? 82 : 74;
  const blocks = blocksPerRow(iq2s ? "quantizeIQ2_S" : "quantizeIQ2_XS", x, out, rows, rowLength, bytes, importance);
  const t = iq2GridTables(iq2s ? 1024 : 512);
  for (let row = 0; row < rows; row++) {
    for (let ibl = 0; ibl < blocks; ibl++) {
      const xbl = row * rowLength + ibl * QK_K;
      const y = (row * blocks + ibl) * bytes;
      out.fill(0, y, y + bytes);
      let maxScale = 0;
      const sigma2 = iq2s ? superBlockSigma2(x, xbl) : f(sumOfSquares(x, xbl) / QK_K);
      for (let ib = 0; ib < 16; ib++) {
        const xb = xbl + 16 * ib;
        if (importance) groupWeights(weight, x, xb, importance, ibl * QK_K + 16 * ib, sigma2, 16);
        else for (let i = 0; i < 16; i++) weight[i] = f(f(0.25 * sigma2) + f(x[xb + i]! * x[xb + i]!)); // iq2_s only
        squareRoots(waux, weight, 16);
        if (iq2s) magnitudesAndSigns(x, xb, 16, xval, blockSigns);
        else evenMagnitudesAndSigns(x, xb, 16, weight, xval, blockSigns);
        const max = largest(xval, 16);
        if (max < (iq2s ? GROUP_MAX_EPS_IQ2_S : GROUP_MAX_EPS)) {
          scales[ib] = 0;
          continue;
        }
        const scale = positiveScale(searchGridScale(t, SEARCH_16, 16, max, weight, waux, xval, L), 2, iq2s ? 255 : 127, blockSigns);
        for (let k = 0; k < 2; k++) {
          const entry = gridIndex(t, 8, L, 8 * k);
          const i8 = 2 * ib + k;
          if (iq2s) {
            out[y + 2 + i8] = entry & 255;
            out[y + 66 + (i8 >> 2)]! |= (entry >> 8) << (2 * (i8 % 4));
            out[y + 34 + i8] = blockSigns[k]!;
          } else {
            putU16(out, y + 2 + 2 * i8, entry | (blockSigns[k]! << 9));
          }
        }
        scales[ib] = scale;
        maxScale = maxScale > scale ? maxScale : scale;
      }
      if (maxScale === 0) {
        if (!iq2s) out.fill(0, y + 2, y + 66);
        continue;
      }
      const d = f(maxScale / 31);
      putU16(out, y, f32ToF16Bits(iq2s ? f(d * f(0.9875)) : d));
      const id = f(1 / d);
      for (let ib = 0; ib < 16; ib += 2) out[y + bytes - 8 + ib / 2] = scaleCode(id, scales[ib]!, 15) | (scaleCode(id, scales[ib + 1]!, 15) << 4);
    }
  }
}

/**
 * iq2_xs: `rows` rows of `rowLength` values (a multiple of 256) → 74 bytes per 256 (f16 d | per 8
 * values a u16 of a 9-bit grid index and 7 sign bits | a 4-bit scale per 16). `importance` is required.
 */
export function quantizeIQ2_XS(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  if (importance === undefined) throw new Error("quantizeIQ2_XS: needs an importance matrix (ggml quantizes iq2_xs only with one)");
  quantizeGroupsOf16(false, x, out, rows, rowLength, importance);
}

/**
 * iq2_s: `rows` rows of `rowLength` values (a multiple of 256) → 82 bytes per 256 (f16 d | grid index
 * low bytes[32] | sign bytes[32] | 2 high index bits per 8 values[8] | a 4-bit scale per 16). Without
 * `importance`, the weights are 0.25·σ² + x².
 */
export function quantizeIQ2_S(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  quantizeGroupsOf16(true, x, out, rows, rowLength, importance);
}
