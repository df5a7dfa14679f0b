/**
 * What the i-quant quantizers share (quantize-iq1.ts, quantize-iq2.ts, quantize-iq3.ts): the shape
 * check of a call, a super-block's sum of squares, a group's weights, magnitudes and signs, the grid
 * search of iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s, and little-endian stores. Float rules as in
 * scale-search.ts. native/cpu/quantize-common.h is the same in C.
 *
 * A grid entry holds `group` values: 8 of levels 0..2 (the iq2 grids, 2 bits a level in a pattern)
 * or 4 of levels 0..7 (the iq3 grids, 3 bits); level l stands for the value 2l + 1.
 */
import { nearestInt } from "./scale-search";

const f = Math.fround;
export const QK_K = 256;
export const FLT_MAX = 3.4028234663852886e38;

/** A grid's search tables (ggml's iq2xs_init_impl, iq3xs_init_impl). */
export interface IqGridTables {
  /** Level pattern → grid index, or −(offset + 1) of its neighbour list. */
  readonly map: Int32Array;
  /** Neighbour lists: a count, then that many grid indices. */
  readonly neighbours: Uint16Array;
  /** Each entry's levels, `group` per entry. */
  readonly levels: Uint8Array;
}

/** Checks the shape of a call of `rows` rows of `rowLength` values; returns the blocks per row. */
export function blocksPerRow(name: string, x: Float32Array, out: Uint8Array, rows: number, rowLength: number, bytesPerBlock: number, importance: Float32Array | undefined): number {
  if (!Number.isInteger(rowLength) || rowLength <= 0 || rowLength % QK_K !== 0) throw new RangeError(`${name}: row length ${rowLength} is not a positive multiple of ${QK_K}`);
  if (!Number.isInteger(rows) || rows < 0 || x.length < rows * rowLength) throw new RangeError(`${name}: ${rows} rows of ${rowLength} values need ${rows * rowLength} values, have ${x.length}`);
  const blocks = rowLength / QK_K;
  if (out.length < rows * blocks * bytesPerBlock) throw new RangeError(`${name}: out has ${out.length} bytes, ${rows * blocks} blocks need ${rows * blocks * bytesPerBlock}`);
  if (importance !== undefined && importance.length !== rowLength) throw new RangeError(`${name}: importance has ${importance.length} values, a row ${rowLength}`);
  return blocks;
}

/** Σ x² over the super-block at `at`, in order. */
export function sumOfSquares(x: Float32Array, at: number): number {
  let sum = 0;
  for (let i = 0; i < QK_K; i++) sum = f(sum + f(x[at + i]! * x[at + i]!));
  return sum;
}

/** σ² of most weighted i-quants: twice the mean of x² over the super-block at `at`. */
export function superBlockSigma2(x: Float32Array, at: number): number {
  return f(f(2 * sumOfSquares(x, at)) / QK_K);
}

/** weight[0..n) for the values at x[xb..]: importance[qw..] · √(σ² + x²), or x² without importance. */
export function groupWeights(weight: Float32Array, x: Float32Array, xb: number, importance: Float32Array | undefined, qw: number, sigma2: number, n: number): void {
  if (importance) for (let i = 0; i < n; i++) weight[i] = f(importance[qw + i]! * f(Math.sqrt(f(sigma2 + f(x[xb + i]! * x[xb + i]!)))));
  else for (let i = 0; i < n; i++) weight[i] = f(x[xb + i]! * x[xb + i]!);
}

/** waux[0..n) = √weight, ggml's waux. */
export function squareRoots(waux: Float32Array, weight: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) waux[i] = Math.sqrt(weight[i]!);
}

/** The largest of values[0..n) (ggml's MAX chain: a NaN wins where it is compared second). */
export function largest(values: Float32Array, n: number): number {
  let max = values[0]!;
  for (let i = 1; i < n; i++) max = max > values[i]! ? max : values[i]!;
  return max;
}

/** The 3-bit (high 7) or 4-bit (high 15) code of a group scale under the super-block scale d = 1/id. */
export function scaleCode(id: number, scale: number, high: number): number {
  return Math.max(0, Math.min(high, nearestInt(f(0.5 * f(f(id * scale) - 1)))));
}

export function putU16(out: Uint8Array, at: number, value: number): void {
  out[at] = value & 0xff;
  out[at + 1] = (value >>> 8) & 0xff;
}

export function putU32(out: Uint8Array, at: number, value: number): void {
  for (let b = 0; b < 4; b++) out[at + b] = (value >>> (8 * b)) & 0xff;
}

/** The magnitudes of x[xb..xb+n) to xval; per 8 values their sign bits to signs (iq2_s, iq3_s). */
export function magnitudesAndSigns(x: Float32Array, xb: number, n: number, xval: Float32Array, signs: Uint8Array): void {
  for (let k = 0; k < n / 8; k++) {
    let s = 0;
    for (let i = 0; i < 8; i++) {
      const v = x[xb + 8 * k + i]!;
      if (v >= 0) xval[8 * k + i] = v;
      else {
        xval[8 * k + i] = -v;
        s |= 1 << i;
      }
    }
    signs[k] = s;
  }
}

/**
 * The same with an even count of negatives in each 8 (iq2_xxs, iq2_xs, iq3_xxs keep 7 sign bits):
 * when odd, the value of least weight · x² keeps the wrong sign.
 */
export function evenMagnitudesAndSigns(x: Float32Array, xb: number, n: number, weight: Float32Array, xval: Float32Array, signs: Uint8Array): void {
  magnitudesAndSigns(x, xb, n, xval, signs);
  for (let k = 0; k < n / 8; k++) {
    let flips = 0;
    for (let i = 0; i < 8; i++) flips += (signs[k]! >> i) & 1;
    if (flips % 2) {
      let imin = 0;
      let min = f(f(weight[8 * k]! * x[xb + 8 * k]!) * x[xb + 8 * k]!);
      for (let i = 1; i < 8; i++) {
        const ax = f(f(weight[8 * k + i]! * x[xb + 8 * k + i]!) * x[xb + 8 * k + i]!);
        if (ax < min) {
          min = ax;
          imin = i;
        }
      }
      xval[8 * k + imin] = -xval[8 * k + imin]!;
      signs[k]! ^= 1 << imin;
    }
    signs[k]! &= 127;
  }
}

/** A scale made non-negative: when negative, the signs of the groups' values flip (`mask`: the sign bits kept). */
export function positiveScale(scale: number, groups: number, mask: number, signs: Uint8Array): number {
  if (!(scale < 0)) return scale;
  for (let k = 0; k < groups; k++) signs[k] = ~signs[k]! & mask;
  return -scale;
}

/** Σ w·x·q and Σ w·q² over n values with levels `levels` (q = 2l + 1), in order. */
export function weightedFit(n: number, weight: Float32Array, xval: Float32Array, levels: Int8Array): [number, number] {
  let sumqx = 0;
  let sumq2 = 0;
  for (let i = 0; i < n; i++) {
    const w = weight[i]!;
    const q = 2 * levels[i]! + 1;
    sumqx = f(sumqx + f(f(w * xval[i]!) * q));
    sumq2 = f(sumq2 + f(f(w * q) * q));
  }
  return [sumqx, sumq2];
}

/**
 * ggml's iq2_find_best_neighbour / iq3_find_best_neighbour: of the list at `list`, the entry closest
 * to xval[at..at+group) at `scale` under waux[at..]; its levels to `levelsOut[at..]`. ggml asserts one
 * is closer than FLT_MAX (false only for non-finite input); then the first is taken.
 */
function bestNeighbour(t: IqGridTables, group: number, list: number, xval: Float32Array, waux: Float32Array, at: number, scale: number, levelsOut: Int8Array): void {
  const neighbours = t.neighbours;
  const levels = t.levels;
  let bestD2 = FLT_MAX;
  let best = -1;
  for (let j = 1, count = neighbours[list]!; j <= count; j++) {
    const g = neighbours[list + j]!;
    let d2 = 0;
    for (let i = 0; i < group; i++) {
      const diff = f(f(scale * (2 * levels[group * g + i]! + 1)) - xval[at + i]!);
      d2 = f(d2 + f(f(waux[at + i]! * diff) * diff));
    }
    if (d2 < bestD2) {
      bestD2 = d2;
      best = g;
    }
  }
  if (best < 0) best = neighbours[list + 1]!;
  for (let i = 0; i < group; i++) levelsOut[at + i] = levels[group * best + i]!;
}

/**
 * The nearest levels of xval[at..at+group) at inverse scale `id` to `levelsOut[at..]`, moved to the
 * best neighbour (at `scale`) when not a grid entry. Returns whether they were one.
 */
export function gridLevels(t: IqGridTables, group: number, id: number, scale: number, xval: Float32Array, waux: Float32Array, at: number, levelsOut: Int8Array): boolean {
  const bits = group === 8 ? 2 : 3;
  const high = group === 8 ? 2 : 7;
  let u = 0;
  for (let i = 0; i < group; i++) {
    const l = Math.max(0, Math.min(high, nearestInt(f(0.5 * f(f(id * xval[at + i]!) - 1)))));
    levelsOut[at + i] = l;
    u |= l << (bits * i);
  }
  const entry = t.map[u]!;
  if (entry >= 0) return true;
  bestNeighbour(t, group, -entry - 1, xval, waux, at, scale, levelsOut);
  return false;
}

/** The grid index of levels[at..at+group) (an entry by construction; ggml aborts otherwise, non-finite input only: then 0). */
export function gridIndex(t: IqGridTables, group: number, levels: Int8Array, at: number): number {
  const bits = group === 8 ? 2 : 3;
  let u = 0;
  for (let i = 0; i < group; i++) u |= levels[at + i]! << (bits * i);
  const entry = t.map[u & 0xffff]!;
  return entry >= 0 ? entry : 0;
}

/** The constants of a quantizer's scale search (searchGridScale). */
export interface GridScaleSearch {
  readonly group: 4 | 8;
  /** The inverse scales tried: (base + step · is) / max for |is| ≤ candidates. */
  readonly candidates: number;
  readonly base: number;
  readonly step: number;
  /** The refit moves every group to its grid entry (iq3_s), not only those off the grid. */
  readonly refitAllGroups: boolean;
}

const searchLevels = new Int8Array(32);
const onGrid = new Array<boolean>(8);
const onGridAux = new Array<boolean>(8);

/**
 * The scale search of iq2_xs, iq2_s, iq3_xxs and iq3_s on n values (weight, waux, xval set; `max`,
 * their largest, > 0): each candidate's grid levels and weighted fit, the best fit's levels to L
 * (zero when none fits); then, if some group was off the grid, one refit with the groups moved to
 * their entries at the best scale. Returns the scale, negative when the best fit is.
 */
export function searchGridScale(t: IqGridTables, search: GridScaleSearch, n: number, max: number, weight: Float32Array, waux: Float32Array, xval: Float32Array, L: Int8Array): number {
  const { group, base, step } = search;
  const groups = n / group;
  let best = 0;
  let scale = f(max / base);
  L.fill(0, 0, n);
  onGrid.fill(!search.refitAllGroups, 0, groups);
  for (let is = -search.candidates; is <= search.candidates; is++) {
    const id = f(f(base + f(is * step)) / max);
    const thisScale = f(1 / id);
    for (let k = 0; k < groups; k++) onGridAux[k] = gridLevels(t, group, id, thisScale, xval, waux, group * k, searchLevels);
    const [sumqx, sumq2] = weightedFit(n, weight, xval, searchLevels);
    if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
      scale = f(sumqx / sumq2);
      best = f(scale * sumqx);
      for (let i = 0; i < n; i++) L[i] = searchLevels[i]!;
      for (let k = 0; k < groups; k++) onGrid[k] = onGridAux[k]!;
    }
  }
  let offGrid = false;
  for (let k = 0; k < groups; k++) offGrid ||= !onGrid[k];
  if (offGrid && scale > 0) {
    const id = f(1 / scale);
    for (let k = 0; k < groups; k++) if (search.refitAllGroups || !onGrid[k]) gridLevels(t, group, id, scale, xval, waux, group * k, L);
    const [sumqx, sumq2] = weightedFit(n, weight, xval, L);
    if (sumq2 > 0) scale = f(sumqx / sumq2);
  }
  return scale;
}
