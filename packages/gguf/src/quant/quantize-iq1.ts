/**
 * iq1_s and iq1_m quantization, byte for byte as ggml's quantize_iq1_s / quantize_iq1_m
 * (ggml-quants.c, quantize_row_iq1_*_impl): what llama-quantize runs with an importance matrix.
 * iq1_s needs one (ggml asserts it); iq1_m also works without (weights x²). native/cpu/quantize-iq1.c
 * is the same arithmetic in C.
 *
 * Per group of 32 (iq1_s) or 16 (iq1_m) values, each value becomes scale · (q + δ), q in −1, 0, 1 and
 * δ = ±1/8 (iq1_m: a δ per 8 values): the values sorted ascending, every split into three runs is
 * scored exactly from prefix sums, the best kept; a pattern of 8 levels that is not a grid entry
 * becomes the nearest of its listed neighbours (iq2-grid-tables.ts, the 2048-entry grid), and the
 * scale is refitted. Then the super-block's scale and 3-bit group scales. The weights are
 * importance · √(σ² + x²), σ² twice the super-block's mean square.
 *
 * ggml sorts (value, index) pairs with qsort comparing the values only, so equal values keep an
 * order the sort chooses: glibc's qsort (a top-down merge sort for arrays this small) keeps them in
 * index order, and so does `mergeSort` here, step for step. Float rules as in scale-search.ts.
 * `importance` holds one row's importance (rowLength values) and applies to every row.
 */
import { f32ToF16Bits } from "./half";
import { iq2GridTables, type Iq2GridTables } from "./iq2-grid-tables";
import { FLT_MAX, QK_K, blocksPerRow, groupWeights, putU16, scaleCode, superBlockSigma2 } from "./quantize-iq-common";

const f = Math.fround;
const GROUP_MAX_EPS_IQ1_S = f(1e-12);
const GROUP_MAX_EPS_IQ1_M = f(1e-7);
/** The three values of a level (0, 1, 2) with δ = +1/8 and −1/8. */
const X_P = new Float32Array([-1 + 0.125, 0.125, 1 + 0.125]);
const X_M = new Float32Array([-1 - 0.125, -0.125, 1 - 0.125]);
const IQ1M_SHIFT_MASKS = [0x00, 0x80, 0x08, 0x88];

const weight = new Float32Array(32);
const L = new Int8Array(32);
const scales = new Float32Array(16);
/** Per group its δ code k (deltaValues). */
const deltas = new Int8Array(16);
const order = new Int32Array(32);
const sortScratch = new Int32Array(32);
const sumx = new Float32Array(33);
const sumw = new Float32Array(33);
const index = new Uint16Array(32);
const sumqx = new Float32Array(4);
const sumq2 = new Float32Array(4);
/** iq1_m: per sorted value and level, w·x·(±δ value), w·(±δ value)². */
const plusX = new Float32Array(48);
const minusX = new Float32Array(48);
const plus2 = new Float32Array(48);
const minus2 = new Float32Array(48);
const secondHalf = new Uint8Array(16);
/** The best split of a group's search: runs [0, i1), [i1, i2), [i2, n) of the sorted values, δ code k (−1: none). */
const split = { i1: -1, i2: -1, k: -1 };

/**
 * A group's δ as one code k, the δ of its first and second 8 values: 0 +,+  1 +,−  2 −,+  3 −,−
 * (iq1_s, one δ for all 32 values: 0 or 3). The values of levels 0..2 of the 8 values at 8g.
 */
function deltaValues(k: number, g: number): Float32Array {
  return (g === 0 ? k < 2 : k % 2 === 0) ? X_P : X_M;
}

/** iq1_sort_helper: −1, 1 or 0 (equal, or either NaN). */
function compare(a: number, b: number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * order[from .. from + n) sorted by x[xb + order[i]] as glibc's msort_with_tmp sorts: halves of
 * ⌊n/2⌋ and the rest sorted, then merged taking from the first half while it compares ≤ 0.
 */
function mergeSort(x: Float32Array, xb: number, from: number, n: number): void {
  if (n <= 1) return;
  const n1 = n >> 1;
  mergeSort(x, xb, from, n1);
  mergeSort(x, xb, from + n1, n - n1);
  let a = from;
  let b = from + n1;
  const aEnd = b;
  const bEnd = from + n;
  let out = 0;
  while (a < aEnd && b < bEnd) {
    if (compare(x[xb + order[a]!]!, x[xb + order[b]!]!) <= 0) sortScratch[out++] = order[a++]!;
    else sortScratch[out++] = order[b++]!;
  }
  while (a < aEnd) sortScratch[out++] = order[a++]!;
  for (let i = 0; i < out; i++) order[from + i] = sortScratch[i]!;
}

function largestMagnitude(x: Float32Array, xb: number, n: number): number {
  let max = Math.abs(x[xb]!);
  for (let i = 1; i < n; i++) {
    const a = Math.abs(x[xb + i]!);
    max = max > a ? max : a;
  }
  return max;
}

/**
 * ggml's iq1_find_best_neighbour2: of the list at `list`, the entry whose values xx[level] at `scale`
 * are closest to x[xb..xb+8] under weight[wAt..]; levels to L[wAt..]. When none is closer than FLT_MAX
 * (non-finite or huge input), ggml scans the whole grid reading x at xb + (grid index) rather than
 * xb + (value index), past the row's end if need be; read here only within the super-block
 * (`blockEnd`), else that entry does not count, so rows and chunks split alike. When that finds none
 * either ggml aborts; the first neighbour is taken.
 */
function bestNeighbour2(t: Iq2GridTables, list: number, x: Float32Array, xb: number, blockEnd: number, wAt: number, scale: number, xx: Float32Array): number {
  const neighbours = t.neighbours;
  const levels = t.levels;
  let bestScore = FLT_MAX;
  let best = -1;
  for (let j = 1, count = neighbours[list]!; j <= count; j++) {
    const g = neighbours[list + j]!;
    let d2 = 0;
    for (let i = 0; i < 8; i++) {
      const diff = f(f(scale * xx[levels[8 * g + i]!]!) - x[xb + i]!);
      d2 = f(d2 + f(f(weight[wAt + i]! * diff) * diff));
    }
    if (d2 < bestScore) {
      bestScore = d2;
      best = g;
    }
  }
  if (best < 0) {
    for (let g = 0; g < t.gridSize; g++) {
      const value = xb + g < blockEnd ? x[xb + g]! : Number.NaN;
      let d2 = 0;
      for (let j = 0; j < 8; j++) {
        const diff = f(f(scale * xx[levels[8 * g + j]!]!) - value);
        d2 = f(d2 + f(f(weight[wAt + j]! * diff) * diff));
      }
      if (d2 < bestScore) {
        bestScore = d2;
        best = g;
      }
    }
  }
  if (best < 0) best = neighbours[list + 1]!;
  for (let i = 0; i < 8; i++) L[wAt + i] = levels[8 * best + i]!;
  return best;
}

/** The grid index of L[at..at+8], or ggml's neighbour search when it is none. Second: whether it was one. */
function patternIndex(t: Iq2GridTables, at: number, x: Float32Array, xb: number, blockEnd: number, scale: number, xx: Float32Array): number {
  let u = 0;
  for (let j = 0; j < 8; j++) u |= L[at + j]! << (2 * j);
  const entry = t.map[u]!;
  if (entry >= 0) return entry;
  return -1 - bestNeighbour2(t, -entry - 1, x, xb + at, blockEnd, at, scale, xx);
}

/**
 * iq1_s's split search over the 32 sorted values at x[xb..] (order): every split into runs of levels
 * 0, 1, 2 with δ + (k 0) and − (k 3), scored from prefix sums. Returns the best scale (max when none),
 * its split to `split`.
 */
function bestSplitOneDelta(x: Float32Array, xb: number, max: number): number {
  const n = 32;
  sumx[0] = sumw[0] = 0;
  for (let j = 0; j < n; j++) {
    const i = order[j]!;
    sumx[j + 1] = f(sumx[j]! + f(weight[i]! * x[xb + i]!));
    sumw[j + 1] = f(sumw[j]! + weight[i]!);
  }
  let bestScore = -FLT_MAX;
  let scale = max;
  split.i1 = split.i2 = split.k = -1;
  for (let i1 = 0; i1 <= n; i1++) {
    for (let i2 = i1; i2 <= n; i2++) {
      for (let k = 0; k <= 3; k += 3) {
        const xs = k === 0 ? X_P : X_M;
        const qx = f(f(f(f(sumx[i1]! - sumx[0]!) * xs[0]!) + f(f(sumx[i2]! - sumx[i1]!) * xs[1]!)) + f(f(sumx[n]! - sumx[i2]!) * xs[2]!));
        const q2 = f(
          f(f(f(f(sumw[i1]! - sumw[0]!) * xs[0]!) * xs[0]!) + f(f(f(sumw[i2]! - sumw[i1]!) * xs[1]!) * xs[1]!)) +
            f(f(f(sumw[n]! - sumw[i2]!) * xs[2]!) * xs[2]!),
        );
        if (q2 > 0 && f(qx * qx) > f(bestScore * q2)) {
          scale = f(qx / q2);
          bestScore = f(scale * qx);
          split.i1 = i1;
          split.i2 = i2;
          split.k = k;
        }
      }
    }
  }
  return scale;
}

/** iq1_m's split search over 16 sorted values, as bestSplitOneDelta with a δ per 8 values (k 0..3). */
function bestSplitTwoDeltas(x: Float32Array, xb: number, max: number): number {
  const n = 16;
  // each sorted value's four terms at each level (ggml computes them inside the split loops; same products)
  for (let j = 0; j < n; j++) {
    const i = order[j]!;
    const w = weight[i]!;
    const xi = x[xb + i]!;
    for (let level = 0; level < 3; level++) {
      plusX[3 * j + level] = f(f(w * X_P[level]!) * xi);
      minusX[3 * j + level] = f(f(w * X_M[level]!) * xi);
      plus2[3 * j + level] = f(f(w * X_P[level]!) * X_P[level]!);
      minus2[3 * j + level] = f(f(w * X_M[level]!) * X_M[level]!);
    }
    secondHalf[j] = i < n / 2 ? 0 : 1; // first half: k 0, 1 take +; second half: k 0, 2
  }
  let bestScore = -FLT_MAX;
  let scale = max;
  split.i1 = split.i2 = split.k = -1;
  for (let i1 = 0; i1 <= n; i1++) {
    for (let i2 = i1; i2 <= n; i2++) {
      // sums for k = 0..3, each in ggml's order
      let qx0 = 0, qx1 = 0, qx2 = 0, qx3 = 0, q20 = 0, q21 = 0, q22 = 0, q23 = 0;
      for (let j = 0; j < n; j++) {
        const at = 3 * j + (j < i1 ? 0 : j < i2 ? 1 : 2);
        const px = plusX[at]!;
        const mx = minusX[at]!;
        const p2 = plus2[at]!;
        const m2 = minus2[at]!;
        qx0 = f(qx0 + px);
        qx3 = f(qx3 + mx);
        q20 = f(q20 + p2);
        q23 = f(q23 + m2);
        if (secondHalf[j]) {
          qx2 = f(qx2 + px);
          qx1 = f(qx1 + mx);
          q22 = f(q22 + p2);
          q21 = f(q21 + m2);
        } else {
          qx1 = f(qx1 + px);
          qx2 = f(qx2 + mx);
          q21 = f(q21 + p2);
          q22 = f(q22 + m2);
        }
      }
      sumqx[0] = qx0;
      sumqx[1] = qx1;
      sumqx[2] = qx2;
      sumqx[3] = qx3;
      sumq2[0] = q20;
      sumq2[1] = q21;
      sumq2[2] = q22;
      sumq2[3] = q23;
      for (let k = 0; k < 4; k++) {
        if (sumq2[k]! > 0 && f(sumqx[k]! * sumqx[k]!) > f(bestScore * sumq2[k]!)) {
          scale = f(sumqx[k]! / sumq2[k]!);
          bestScore = f(scale * sumqx[k]!);
          split.i1 = i1;
          split.i2 = i2;
          split.k = k;
        }
      }
    }
  }
  return scale;
}

/**
 * One group of n values at x[xb..] (iq1_s: 32, one δ; iq1_m: 16, a δ per 8) with its weights set: the
 * best split of the sorted values into levels 0, 1, 2 and δ code (to deltas[ib]), the levels' grid
 * entries to index[n / 8 · ib ..], the scale refitted when one was not an entry. Returns the scale, or
 * −1 (δ code 0, indices 0) for a group that stays zero.
 */
function quantizeGroup(t: Iq2GridTables, n: number, eps: number, x: Float32Array, xb: number, blockEnd: number, ib: number): number {
  const at = (n / 8) * ib;
  deltas[ib] = 0;
  index.fill(0, at, at + n / 8);
  const max = largestMagnitude(x, xb, n);
  if (max < eps) return -1;
  for (let j = 0; j < n; j++) order[j] = j;
  mergeSort(x, xb, 0, n);
  let scale = n === 32 ? bestSplitOneDelta(x, xb, max) : bestSplitTwoDeltas(x, xb, max);
  let k = split.k;
  if (split.i1 < 0 || split.i2 < 0 || k < 0) return -1;
  // levels of the sorted runs: order[0, i1) → 0, [i1, i2) → 1, the rest 2
  for (let j = 0; j < split.i1; j++) L[order[j]!] = 0;
  for (let j = split.i1; j < split.i2; j++) L[order[j]!] = 1;
  for (let j = split.i2; j < n; j++) L[order[j]!] = 2;
  if (scale < 0) {
    for (let j = 0; j < n; j++) L[j] = 2 - L[j]!;
    scale = -scale;
    k = 3 - k;
  }
  let allOnGrid = true;
  for (let g = 0; g < n / 8; g++) {
    const entry = patternIndex(t, 8 * g, x, xb, blockEnd, scale, deltaValues(k, g));
    if (entry < 0) allOnGrid = false;
    index[at + g] = entry < 0 ? -1 - entry : entry;
  }
  if (!allOnGrid) {
    let qx = 0;
    let q2 = 0;
    for (let g = 0; g < n / 8; g++) {
      const xx = deltaValues(k, g);
      for (let j = 0; j < 8; j++) {
        const w = weight[8 * g + j]!;
        const q = xx[t.levels[8 * index[at + g]! + j]!]!;
        qx = f(qx + f(f(w * q) * x[xb + 8 * g + j]!));
        q2 = f(q2 + f(f(w * q) * q));
      }
    }
    if (qx > 0 && q2 > 0) scale = f(qx / q2);
  }
  deltas[ib] = k;
  return scale;
}

/**
 * Every group of n values of the super-block at x[xbl..] (its importance at importance[qw..], if any)
 * as quantizeGroup: scales (0 for a group that stays zero), δ codes and grid indices. Returns the
 * largest scale.
 */
function quantizeGroups(t: Iq2GridTables, n: number, eps: number, x: Float32Array, xbl: number, importance: Float32Array | undefined, qw: number, sigma2: number): number {
  let maxScale = 0;
  for (let ib = 0; ib < QK_K / n; ib++) {
    const xb = xbl + n * ib;
    groupWeights(weight, x, xb, importance, qw + n * ib, sigma2, n);
    const scale = quantizeGroup(t, n, eps, x, xb, xbl + QK_K, ib);
    if (scale < 0) {
      scales[ib] = 0;
      continue;
    }
    scales[ib] = scale;
    maxScale = maxScale > scale ? maxScale : scale;
  }
  return maxScale;
}

/**
 * iq1_s: `rows` rows of `rowLength` values (a multiple of 256) → 50 bytes per 256 (f16 d | grid index
 * low bytes[32] | per 32 values a u16 of 4 × 3 high index bits, a 3-bit scale and δ's sign).
 * `importance` is required.
 */
export function quantizeIQ1_S(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  if (importance === undefined) throw new Error("quantizeIQ1_S: needs an importance matrix (ggml quantizes iq1_s only with one)");
  const blocks = blocksPerRow("quantizeIQ1_S", x, out, rows, rowLength, 50, importance);
  const t = iq2GridTables(2048);
  for (let row = 0; row < rows; row++) {
    for (let ibl = 0; ibl < blocks; ibl++) {
      const xbl = row * rowLength + ibl * QK_K;
      const y = (row * blocks + ibl) * 50;
      out.fill(0, y, y + 50);
      const maxScale = quantizeGroups(t, 32, GROUP_MAX_EPS_IQ1_S, x, xbl, importance, ibl * QK_K, superBlockSigma2(x, xbl));
      for (let ib = 0; ib < 8; ib++) {
        let h = 0;
        for (let k = 0; k < 4; k++) {
          out[y + 2 + 4 * ib + k] = index[4 * ib + k]! & 255;
          h |= (index[4 * ib + k]! >> 8) << (3 * k);
        }
        putU16(out, y + 34 + 2 * ib, h);
      }
      if (maxScale === 0) continue;
      const d = f(maxScale / 15);
      putU16(out, y, f32ToF16Bits(f(d * f(1.125))));
      const id = f(1 / d);
      for (let ib = 0; ib < 8; ib++) out[y + 35 + 2 * ib]! |= (scaleCode(id, scales[ib]!, 7) | (deltas[ib] === 3 ? 8 : 0)) << 4;
    }
  }
}

/**
 * iq1_m: `rows` rows of `rowLength` values (a multiple of 256) → 56 bytes per 256 (grid index low
 * bytes[32] | per 8 values 3 high index bits and δ's sign[16] | u16[4] of 3-bit scales per 16 values,
 * their top nibbles the f16 d). Without `importance`, the weights are x².
 */
export function quantizeIQ1_M(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  const blocks = blocksPerRow("quantizeIQ1_M", x, out, rows, rowLength, 56, importance);
  const t = iq2GridTables(2048);
  for (let row = 0; row < rows; row++) {
    for (let ibl = 0; ibl < blocks; ibl++) {
      const xbl = row * rowLength + ibl * QK_K;
      const y = (row * blocks + ibl) * 56;
      out.fill(0, y, y + 56);
      const sigma2 = superBlockSigma2(x, xbl);
      const maxScale = quantizeGroups(t, 16, GROUP_MAX_EPS_IQ1_M, x, xbl, importance, ibl * QK_K, sigma2);
      for (let ib = 0; ib < 16; ib++) {
        out[y + 2 * ib] = index[2 * ib]! & 255;
        out[y + 2 * ib + 1] = index[2 * ib + 1]! & 255;
        out[y + 32 + ib] = (index[2 * ib]! >> 8) | ((index[2 * ib + 1]! >> 8) << 4);
      }
      if (maxScale === 0) continue;
      const sc = [0, 0, 0, 0];
      let d = f(maxScale / 15);
      const id = f(1 / d);
      let qx = 0;
      let q2 = 0;
      for (let ib = 0; ib < 16; ib++) {
        const l = scaleCode(id, scales[ib]!, 7);
        sc[ib >> 2]! |= l << (3 * (ib % 4));
        out[y + 32 + ib]! |= IQ1M_SHIFT_MASKS[deltas[ib]!]!;
        const xb = xbl + 16 * ib;
        groupWeights(weight, x, xb, importance, ibl * QK_K + 16 * ib, sigma2, 16);
        const qh = out[y + 32 + ib]!;
        for (let k = 0; k < 2; k++) {
          const xx = deltaValues(deltas[ib]!, k);
          const entry = out[y + 2 * ib + k]! + ((qh << (8 - 4 * k)) & 0x700);
          for (let j = 0; j < 8; j++) {
            const w = weight[8 * k + j]!;
            const q = f(xx[t.levels[8 * entry + j]!]! * (2 * l + 1));
            qx = f(qx + f(f(w * q) * x[xb + 8 * k + j]!));
            q2 = f(q2 + f(f(w * q) * q));
          }
        }
      }
      if (q2 > 0) d = f(qx / q2);
      const s = f32ToF16Bits(f(d * f(1.1125)));
      sc[0]! |= (s & 0x000f) << 12;
      sc[1]! |= (s & 0x00f0) << 8;
      sc[2]! |= (s & 0x0f00) << 4;
      sc[3]! |= s & 0xf000;
      for (let i = 0; i < 4; i++) putU16(out, y + 48 + 2 * i, sc[i]!);
    }
  }
}
