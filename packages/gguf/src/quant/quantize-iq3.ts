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
import { nearestInt } from "./scale-search";

const f = Math.fround;
const FLT_MAX = 3.4028234663852886e38;
/** ggml's GROUP_MAX_EPS_IQ3_XXS: an iq3_xxs sub-block whose largest magnitude is below this is zero. */
const IQ3XXS_GROUP_MAX_EPS = f(1e-8);

interface Iq3Tables {
  /** Level pattern (4 × 3 bits) → grid index, or −(offset + 1) of its neighbour list. */
  readonly map: Int32Array;
  /** Per off-grid pattern: a count, then that many grid indices. */
  readonly neighbours: Uint16Array;
  /** Levels (0..7) of each grid entry's 4 values. */
  readonly levels: Uint8Array;
}

const tables = new Map<number, Iq3Tables>();

/**
 * iq3xs_init_impl(gridSize): the grid's levels (from the dequantization grids: iq3s values are
 * 2l + 1, iq3xxs values 8l + 4 but 62 for l = 7), which level patterns are grid points, and for
 * every other pattern its neighbour list.
 */
function iq3Tables(gridSize: 256 | 512): Iq3Tables {
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
const Laux = new Int8Array(32);
const onGrid = new Array<boolean>(8);
const onGridAux = new Array<boolean>(8);
const blockSigns = new Uint8Array(4);
const scales = new Float32Array(8);

/**
 * The grid entry for 4 values (at xval[at..]) at inverse scale id: their nearest levels if those are a
 * grid point, else the best neighbour at `scale`. Levels to `levelsOut[at..]`; returns whether the
 * nearest levels were on the grid.
 */
function gridEntry(t: Iq3Tables, id: number, scale: number, at: number, levelsOut: Int8Array): boolean {
  let u = 0;
  for (let i = 0; i < 4; i++) {
    const l = Math.max(0, Math.min(7, nearestInt(f(0.5 * f(f(id * xval[at + i]!) - 1)))));
    levelsOut[at + i] = l;
    u |= l << (3 * i);
  }
  const entry = t.map[u]!;
  if (entry >= 0) return true;
  const list = -entry - 1;
  let bestD2 = FLT_MAX;
  let best = t.neighbours[list + 1]!;
  for (let j = 1; j <= t.neighbours[list]!; j++) {
    const g = t.neighbours[list + j]!;
    let d2 = 0;
    for (let i = 0; i < 4; i++) {
      const q = 2 * t.levels[4 * g + i]! + 1;
      const diff = f(f(scale * q) - xval[at + i]!);
      d2 = f(d2 + f(f(waux[at + i]! * diff) * diff));
    }
    if (d2 < bestD2) {
      bestD2 = d2;
      best = g;
    }
  }
  for (let i = 0; i < 4; i++) levelsOut[at + i] = t.levels[4 * best + i]!;
  return false;
}

/** Σ w·x·q and Σ w·q² over the sub-block with levels `levelsIn` (q = 2l + 1), summed in order. */
function fit(levelsIn: Int8Array): [number, number] {
  let sumqx = 0;
  let sumq2 = 0;
  for (let i = 0; i < 32; i++) {
    const w = weight[i]!;
    const q = 2 * levelsIn[i]! + 1;
    sumqx = f(sumqx + f(f(w * xval[i]!) * q));
    sumq2 = f(sumq2 + f(f(w * q) * q));
  }
  return [sumqx, sumq2];
}

/** sigma2 of the weighted i-quants: 2 * the mean of x² over the super-block at x[xb..xb+256). */
function superBlockSigma2(x: Float32Array, xb: number): number {
  let sum = 0;
  for (let i = 0; i < 256; i++) sum = f(sum + f(x[xb + i]! * x[xb + i]!));
  return f(f(2 * sum) / 256);
}

/** The sub-block at x[xb..xb+32)'s weights (x², or importance * sqrt(sigma2 + x²)) and their square roots. */
function subBlockWeights(x: Float32Array, xb: number, importance: Float32Array | undefined, sigma2: number): void {
  if (importance) {
    for (let i = 0; i < 32; i++) weight[i] = f(importance[xb + i]! * f(Math.sqrt(f(sigma2 + f(x[xb + i]! * x[xb + i]!)))));
  } else {
    for (let i = 0; i < 32; i++) weight[i] = f(x[xb + i]! * x[xb + i]!);
  }
  for (let i = 0; i < 32; i++) waux[i] = Math.sqrt(weight[i]!);
}

/** The largest of xval (ggml's MAX chain: a NaN wins where it is compared second). */
function largestMagnitude(): number {
  let max = xval[0]!;
  for (let i = 1; i < 32; i++) max = max > xval[i]! ? max : xval[i]!;
  return max;
}

/**
 * The scale search of a prepared sub-block (weight, waux, xval set; max > 0): candidate inverse
 * scales (15 + 0.2 is) / max for |is| <= `candidates`, the best weighted fit's levels to L, then, if
 * some group was off the grid, one refit with the off-grid groups (iq3_xxs) or all groups (iq3_s)
 * moved to their grid entries at the best scale. Returns the scale.
 */
function searchSubBlock(t: Iq3Tables, max: number, candidates: number, refitAllGroups: boolean): number {
  let best = 0;
  let scale = f(max / 15);
  // iq3_xxs starts with every group on the grid, iq3_s with none (it refits all anyway)
  onGrid.fill(!refitAllGroups);
  for (let is = -candidates; is <= candidates; is++) {
    const id = f(f(15 + f(is * f(0.2))) / max);
    const thisScale = f(1 / id);
    for (let k = 0; k < 8; k++) onGridAux[k] = gridEntry(t, id, thisScale, 4 * k, Laux);
    const [sumqx, sumq2] = fit(Laux);
    if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
      scale = f(sumqx / sumq2);
      best = f(scale * sumqx);
      L.set(Laux);
      for (let k = 0; k < 8; k++) onGrid[k] = onGridAux[k]!;
    }
  }
  if (onGrid.some((on) => !on) && scale > 0) {
    const id = f(1 / scale);
    for (let k = 0; k < 8; k++) if (refitAllGroups || !onGrid[k]) gridEntry(t, id, scale, 4 * k, L);
    const [sumqx, sumq2] = fit(L);
    if (sumq2 > 0) scale = f(sumqx / sumq2);
  }
  return scale;
}

/** The grid index of L's group k (on the grid by construction). */
function groupEntry(t: Iq3Tables, k: number): number {
  return t.map[L[4 * k]! | (L[4 * k + 1]! << 3) | (L[4 * k + 2]! << 6) | (L[4 * k + 3]! << 9)]!;
}

/** 0.5 * (scale / d - 1) rounded to 0..15: a sub-block's 4-bit scale. */
function subBlockScaleLevel(id: number, scale: number): number {
  return Math.max(0, Math.min(15, nearestInt(f(0.5 * f(f(id * scale) - 1)))));
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
      const xb = block * 256 + 32 * ib;
      subBlockWeights(x, xb, importance, sigma2);
      for (let k = 0; k < 4; k++) {
        let s = 0;
        let flips = 0;
        for (let i = 0; i < 8; i++) {
          const v = x[xb + 8 * k + i]!;
          if (v >= 0) xval[8 * k + i] = v;
          else {
            xval[8 * k + i] = -v;
            flips++;
            s |= 1 << i;
          }
        }
        if (flips % 2 === 1) {
          // 7 sign bits per 8 values (even parity): the value of least w·x² keeps the wrong sign
          let least = 0;
          let min = f(f(weight[8 * k]! * x[xb + 8 * k]!) * x[xb + 8 * k]!);
          for (let i = 1; i < 8; i++) {
            const v = x[xb + 8 * k + i]!;
            const ax = f(f(weight[8 * k + i]! * v) * v);
            if (ax < min) {
              min = ax;
              least = i;
            }
          }
          xval[8 * k + least] = -xval[8 * k + least]!;
          s ^= 1 << least;
        }
        blockSigns[k] = s & 127;
      }
      const max = largestMagnitude();
      L.fill(0);
      if (max < IQ3XXS_GROUP_MAX_EPS) {
        scales[ib] = 0; // its grid indices and signs stay 0
        continue;
      }
      let scale = searchSubBlock(t, max, 15, false);
      if (scale < 0) {
        scale = -scale;
        for (let k = 0; k < 4; k++) blockSigns[k] = ~blockSigns[k]! & 127;
      }
      for (let k = 0; k < 8; k++) out[y + 2 + 8 * ib + k] = groupEntry(t, k);
      signsAndScales[ib] = blockSigns[0]! | (blockSigns[1]! << 7) | (blockSigns[2]! << 14) | (blockSigns[3]! << 21);
      scales[ib] = scale;
      maxScale = maxScale > scale ? maxScale : scale;
    }
    if (maxScale === 0) {
      out.fill(0, y, y + 98);
      continue;
    }
    const d = f(maxScale / 31);
    const bits = f32ToF16Bits(f(d * f(1.0125)));
    out[y] = bits & 0xff;
    out[y + 1] = bits >> 8;
    const id = f(1 / d);
    for (let ib = 0; ib < 8; ib++) {
      const word = (signsAndScales[ib]! | (subBlockScaleLevel(id, scales[ib]!) << 28)) >>> 0;
      const at = y + 66 + 4 * ib;
      out[at] = word & 0xff;
      out[at + 1] = (word >>> 8) & 0xff;
      out[at + 2] = (word >>> 16) & 0xff;
      out[at + 3] = word >>> 24;
    }
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
      const xb = block * 256 + 32 * ib;
      subBlockWeights(x, xb, importance, sigma2);
      for (let k = 0; k < 4; k++) {
        let s = 0;
        for (let i = 0; i < 8; i++) {
          const v = x[xb + 8 * k + i]!;
          if (v >= 0) xval[8 * k + i] = v;
          else {
            xval[8 * k + i] = -v;
            s |= 1 << i;
          }
        }
        blockSigns[k] = s;
      }
      const max = largestMagnitude();
      L.fill(0);
      if (max === 0) {
        // As ggml: an all-zero sub-block writes nothing and does not advance qs and signs.
        scales[ib] = 0;
        continue;
      }
      let scale = searchSubBlock(t, max, 9, true);
      if (scale < 0) {
        scale = -scale;
        for (let k = 0; k < 4; k++) blockSigns[k] = ~blockSigns[k]! & 0xff;
      }
      for (let k = 0; k < 8; k++) {
        const entry = groupEntry(t, k);
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
    const bits = f32ToF16Bits(f(d * f(1.033)));
    out[y] = bits & 0xff;
    out[y + 1] = bits >> 8;
    const id = f(1 / d);
    for (let ib = 0; ib < 8; ib += 2) out[y + 106 + ib / 2] = subBlockScaleLevel(id, scales[ib]!) | (subBlockScaleLevel(id, scales[ib + 1]!) << 4);
  }
}
