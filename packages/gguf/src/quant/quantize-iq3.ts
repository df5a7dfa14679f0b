/**
 * iq3_xxs and iq3_s quantization, byte for byte as ggml's quantize_iq3_xxs and quantize_iq3_s
 * (what llama-quantize runs for IQ3_XXS, IQ3_S and IQ3_M files): ggml-quants.c's
 * quantize_row_iq3_xxs_impl with the 256-entry grid and quantize_row_iq3_s_impl with the 512-entry
 * grid of iq3xs_init_impl. native/cpu/quantize-iq3.c is the same arithmetic in C.
 *
 * Per 32-value sub-block: magnitudes searched over candidate scales (31 for iq3_xxs, 19 for iq3_s);
 * a group of 4 levels (0..7, value 2l+1) that is not a grid point becomes the best of its nearest grid
 * points (those at the two (256) or three (512) smallest squared distances, in (distance, index)
 * order); the best weighted fit is kept and refitted once. Then the super-block's f16 scale and 4-bit
 * sub-block scales. The weights are x², or given importance (one per value, indexed like x)
 * importance * sqrt(sigma2 + x²) with sigma2 = 2 * mean x² over the super-block. iq3_xxs keeps 7 sign
 * bits per 8 values (an odd count of negatives flips the least important value). Float rules as in
 * scale-search.ts: Math.fround after every binary32 operation ggml performs.
 */
import { f32ToF16Bits } from "./half";
import { IQ3S_GRID, IQ3XXS_GRID } from "./iq-grids";
import {
  type GridScaleSearch,
  type IqGridTables,
  evenMagnitudesAndSigns,
  gridIndex,
  groupWeights,
  largest,
  magnitudesAndSigns,
  positiveScale,
  putU16,
  putU32,
  scaleCode,
  searchGridScale,
  squareRoots,
  superBlockSigma2,
} from "./quantize-iq-common";

const f = Math.fround;
/** ggml's GROUP_MAX_EPS_IQ3_XXS: an iq3_xxs sub-block whose largest magnitude is below this is zero. */
const IQ3XXS_GROUP_MAX_EPS = f(1e-8);
/** The scale searches: (15 + 0.2 is) / max for |is| ≤ 15 (iq3_xxs) or 9 (iq3_s); iq3_xxs refits only the groups off the grid, iq3_s all. */
const IQ3XXS_SEARCH: GridScaleSearch = { group: 4, candidates: 15, base: 15, step: f(0.2), refitAllGroups: false };
const IQ3S_SEARCH: GridScaleSearch = { group: 4, candidates: 9, base: 15, step: f(0.2), refitAllGroups: true };

/** Per grid, its tables: levels (0..7) of each entry's 4 values, patterns of 4 × 3 bits. */
const tables = new Map<number, IqGridTables>();

/**
 * iq3xs_init_impl(gridSize): the grid's levels (from the dequantization grids: iq3s values are
 * 2l + 1, iq3xxs values 8l + 4 but 62 for l = 7), which level patterns are grid points, and for
 * every other pattern its neighbour list.
 */
function iq3Tables(gridSize: 256 | 512): IqGridTables {
  const cached = tables.get(gridSize);
  if (cached) return cached;
  const levels = new Uint8Array(gridSize * 4);
  for (let i = 0; i < levels.length; i++) levels[i] = gridSize === 512 ? (IQ3S_GRID[i]! - 1) >> 1 : IQ3XXS_GRID[i]! >> 3;
  const distances = gridSize === 512 ? 3 : 2;
  const map = new Int32Array(4096).fill(-1);
  for (let j = 0; j < gridSize; j++) map[levels[4 * j]! | (levels[4 * j + 1]! << 3) | (levels[4 * j + 2]! << 6) | (levels[4 * j + 3]! << 9)] = j;
  const lists: number[] = [];
  const distance = new Int32Array(gridSize);
  for (let u = 0; u < 4096; u++) {
    if (map[u]! >= 0) continue;
    const distinct = new Set<number>();
    for (let j = 0; j < gridSize; j++) {
      let d2 = 0;
      for (let k = 0; k < 4; k++) {
        const diff = 2 * (levels[4 * j + k]! - ((u >> (3 * k)) & 7));
        d2 += diff * diff;
      }
      distance[j] = d2;
      distinct.add(d2);
    }
    const nearest = [...distinct].sort((a, b) => a - b).slice(0, distances);
    map[u] = -lists.length - 1;
    const at = lists.length;
    lists.push(0);
    for (const d2 of nearest) for (let j = 0; j < gridSize; j++) if (distance[j] === d2) lists.push(j);
    lists[at] = lists.length - at - 1;
  }
  const built = { map, neighbours: Uint16Array.from(lists), levels };
  tables.set(gridSize, built);
  return built;
}

const weight = new Float32Array(32);
const waux = new Float32Array(32);
const xval = new Float32Array(32);
const L = new Int8Array(32);
const blockSigns = new Uint8Array(4);
const scales = new Float32Array(8);

/**
 * The sub-block at x[xb..xb+32): its weights (x², or importance · √(σ² + x²)) and their square roots,
 * its magnitudes and signs (iq3_xxs: `even`, 7 bits per 8). Returns the largest magnitude.
 */
function prepareSubBlock(x: Float32Array, xb: number, importance: Float32Array | undefined, sigma2: number, even: boolean): number {
  groupWeights(weight, x, xb, importance, xb, sigma2, 32);
  squareRoots(waux, weight, 32);
  if (even) evenMagnitudesAndSigns(x, xb, 32, weight, xval, blockSigns);
  else magnitudesAndSigns(x, xb, 32, xval, blockSigns);
  return largest(xval, 32);
}

/** iq3_xxs: super-blocks of 256 values → 98 bytes (d f16 | grid indices[64] | per 32 values a u32 of 4 × 7 sign bits and a 4-bit scale). */
export function quantizeIQ3_XXS(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  const t = iq3Tables(256);
  const signsAndScales = new Uint32Array(8);
  for (let block = 0; block < blockCount; block++) {
    const y = block * 98;
    out.fill(0, y, y + 98);
    signsAndScales.fill(0);
    const sigma2 = importance ? superBlockSigma2(x, block * 256) : 0;
    let maxScale = 0;
    for (let ib = 0; ib < 8; ib++) {
      const max = prepareSubBlock(x, block * 256 + 32 * ib, importance, sigma2, true);
      if (max < IQ3XXS_GROUP_MAX_EPS) {
        scales[ib] = 0; // its grid indices and signs stay 0
        continue;
      }
      const scale = positiveScale(searchGridScale(t, IQ3XXS_SEARCH, 32, max, weight, waux, xval, L), 4, 127, blockSigns);
      for (let k = 0; k < 8; k++) out[y + 2 + 8 * ib + k] = gridIndex(t, 4, L, 4 * k);
      signsAndScales[ib] = blockSigns[0]! | (blockSigns[1]! << 7) | (blockSigns[2]! << 14) | (blockSigns[3]! << 21);
      scales[ib] = scale;
      maxScale = maxScale > scale ? maxScale : scale;
    }
    if (maxScale === 0) {
      out.fill(0, y, y + 98);
      continue;
    }
    const d = f(maxScale / 31);
    putU16(out, y, f32ToF16Bits(f(d * f(1.0125))));
    const id = f(1 / d);
    for (let ib = 0; ib < 8; ib++) putU32(out, y + 66 + 4 * ib, (signsAndScales[ib]! | (scaleCode(id, scales[ib]!, 15) << 28)) >>> 0);
  }
}

/** iq3_s: super-blocks of 256 values → 110 bytes (d f16 | qs[64] | qh[8] | signs[32] | scales[4]). */
export function quantizeIQ3_S(x: Float32Array, out: Uint8Array, blockCount: number, importance?: Float32Array): void {
  const t = iq3Tables(512);
  for (let block = 0; block < blockCount; block++) {
    const y = block * 110;
    out.fill(0, y, y + 110);
    let qs = y + 2;
    let signs = y + 74;
    const qh = y + 66;
    const sigma2 = importance ? superBlockSigma2(x, block * 256) : 0;
    let maxScale = 0;
    for (let ib = 0; ib < 8; ib++) {
      const max = prepareSubBlock(x, block * 256 + 32 * ib, importance, sigma2, false);
      if (max === 0) {
        // As ggml: an all-zero sub-block writes nothing and does not advance qs and signs.
        scales[ib] = 0;
        continue;
      }
      const scale = positiveScale(searchGridScale(t, IQ3S_SEARCH, 32, max, weight, waux, xval, L), 4, 0xff, blockSigns);
      for (let k = 0; k < 8; k++) {
        const entry = gridIndex(t, 4, L, 4 * k);
        out[qs + k] = entry & 255;
        out[qh + ((ib * 8 + k) >> 3)]! |= (entry >> 8) << ((ib * 8 + k) & 7);
      }
      qs += 8;
      for (let k = 0; k < 4; k++) out[signs + k] = blockSigns[k]!;
      signs += 4;
      scales[ib] = scale;
      maxScale = maxScale > scale ? maxScale : scale;
    }
    if (maxScale === 0) continue;
    const d = f(maxScale / 31);
    putU16(out, y, f32ToF16Bits(f(d * f(1.033))));
    const id = f(1 / d);
    for (let ib = 0; ib < 8; ib += 2) out[y + 106 + ib / 2] = scaleCode(id, scales[ib]!, 15) | (scaleCode(id, scales[ib + 1]!, 15) << 4);
  }
}
