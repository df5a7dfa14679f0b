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
import { iq2GridTables, type Iq2GridTables } from "./iq2-grid-tables";
import { GROUP_MAX_EPS, nearestInt } from "./scale-search";

const f = Math.fround;
const FLT_MAX = 3.4028234663852886e38;
const ONE_TENTH = f(0.1);
const GROUP_MAX_EPS_IQ2_S = f(1e-8);
const QK_K = 256;

const weight = new Float32Array(32);
const waux = new Float32Array(32);
const xval = new Float32Array(32);
const L = new Int8Array(32);
const Laux = new Int8Array(32);
/** L as make_qp_quants writes it (ggml passes (uint8_t *)L). */
const Lqp = new Uint8Array(L.buffer);
const scales = new Float32Array(16);
const blockSigns = new Uint8Array(4);
const onGrid = [true, true];
const onGridAux = [true, true];

/** Checks the shape of a call; returns the blocks per row. */
function blocksPerRow(name: string, x: Float32Array, out: Uint8Array, rows: number, rowLength: number, bytesPerBlock: number, importance: Float32Array | undefined): number {
  if (!Number.isInteger(rowLength) || rowLength <= 0 || rowLength % QK_K !== 0) throw new RangeError(`${name}: row length ${rowLength} is not a positive multiple of ${QK_K}`);
  if (!Number.isInteger(rows) || rows < 0 || x.length < rows * rowLength) throw new RangeError(`${name}: ${rows} rows of ${rowLength} values need ${rows * rowLength} values, have ${x.length}`);
  const blocks = rowLength / QK_K;
  if (out.length < rows * blocks * bytesPerBlock) throw new RangeError(`${name}: out has ${out.length} bytes, ${rows * blocks} blocks need ${rows * blocks * bytesPerBlock}`);
  if (importance !== undefined && importance.length !== rowLength) throw new RangeError(`${name}: importance has ${importance.length} values, a row ${rowLength}`);
  return blocks;
}

/** Σ x² over the super-block at `at`, in order. */
function sumOfSquares(x: Float32Array, at: number): number {
  let sum = 0;
  for (let i = 0; i < QK_K; i++) sum = f(sum + f(x[at + i]! * x[at + i]!));
  return sum;
}

/**
 * ggml's iq2_find_best_neighbour: of the list at `list`, the entry closest to xval[at..at+8] at
 * `scale` under the weights waux[at..]; its levels to `levelsOut[at..]`. ggml asserts that one is
 * closer than FLT_MAX (false only for non-finite input); then the first is taken.
 */
function bestNeighbour(t: Iq2GridTables, list: number, at: number, scale: number, levelsOut: Int8Array): number {
  const neighbours = t.neighbours;
  const levels = t.levels;
  let bestD2 = FLT_MAX;
  let best = -1;
  for (let j = 1, count = neighbours[list]!; j <= count; j++) {
    const g = neighbours[list + j]!;
    let d2 = 0;
    for (let i = 0; i < 8; i++) {
      const diff = f(f(scale * (2 * levels[8 * g + i]! + 1)) - xval[at + i]!);
      d2 = f(d2 + f(f(waux[at + i]! * diff) * diff));
    }
    if (d2 < bestD2) {
      bestD2 = d2;
      best = g;
    }
  }
  if (best < 0) best = neighbours[list + 1]!;
  for (let i = 0; i < 8; i++) levelsOut[at + i] = levels[8 * best + i]!;
  return best;
}

/**
 * Levels 0..2 of xval[at..at+8] at inverse scale `id`, to `levelsOut[at..]`, moved to the best
 * neighbour (at `scale`) when not a grid entry. Returns whether they were one.
 */
function gridLevels(t: Iq2GridTables, id: number, scale: number, at: number, levelsOut: Int8Array): boolean {
  let u = 0;
  for (let i = 0; i < 8; i++) {
    const l = Math.max(0, Math.min(2, nearestInt(f(0.5 * f(f(id * xval[at + i]!) - 1)))));
    levelsOut[at + i] = l;
    u |= l << (2 * i);
  }
  const entry = t.map[u]!;
  if (entry >= 0) return true;
  bestNeighbour(t, -entry - 1, at, scale, levelsOut);
  return false;
}

/** The grid index of levels[at..at+8] (a grid entry by construction; ggml aborts otherwise, non-finite input only: then 0). */
function gridIndex(t: Iq2GridTables, levels: Int8Array, at: number): number {
  let u = 0;
  for (let i = 0; i < 8; i++) u |= levels[at + i]! << (2 * i);
  const entry = t.map[u & 0xffff]!;
  return entry >= 0 ? entry : 0;
}

/** Σ w·x·q and Σ w·q² over n values with levels `levels` (q = 2l + 1), in order. */
function weightedFit(n: number, levels: Int8Array): [number, number] {
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
 * Magnitudes of x[xb..xb+n] to xval, groups of 8 with an even count of negatives (the least
 * weighted value's sign flipped when odd); their 7 sign bits to blockSigns.
 */
function evenSigns(x: Float32Array, xb: number, n: number): void {
  for (let k = 0; k < n / 8; k++) {
    let flips = 0;
    let s = 0;
    for (let i = 0; i < 8; i++) {
      const v = x[xb + 8 * k + i]!;
      if (v >= 0) xval[8 * k + i] = v;
      else {
        xval[8 * k + i] = -v;
        flips++;
        s |= 1 << i;
      }
    }
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
      s ^= 1 << imin;
    }
    blockSigns[k] = s & 127;
  }
}

/** weight[i] = importance · √(σ² + x²) for n values, then waux = √weight. */
function importanceWeights(x: Float32Array, xb: number, importance: Float32Array, qw: number, sigma2: number, n: number): void {
  for (let i = 0; i < n; i++) weight[i] = f(importance[qw + i]! * f(Math.sqrt(f(sigma2 + f(x[xb + i]! * x[xb + i]!)))));
  for (let i = 0; i < n; i++) waux[i] = Math.sqrt(weight[i]!);
}

function largest(n: number): number {
  let max = xval[0]!;
  for (let i = 1; i < n; i++) max = max > xval[i]! ? max : xval[i]!;
  return max;
}

/**
 * ggml's make_qp_quants(n, nmax, xval, (uint8_t *)L, weight): the scale of a fit of xval by
 * scale · l, l ≤ nmax, over 9 candidate scales and then 5 rounds of single-level moves. Levels to Lqp
 * (negative ones wrap as ggml's uint8_t do).
 */
function makeQpQuants(n: number, nmax: number): number {
  let max = 0;
  for (let i = 0; i < n; i++) max = max > xval[i]! ? max : xval[i]!;
  if (max < GROUP_MAX_EPS) {
    Lqp.fill(0, 0, n);
    return 0;
  }
  let iscale = f(nmax / max);
  for (let i = 0; i < n; i++) Lqp[i] = nearestInt(f(iscale * xval[i]!));
  const scale = f(1 / iscale);
  let bestMse = 0;
  for (let i = 0; i < n; i++) {
    const diff = f(xval[i]! - f(scale * Lqp[i]!));
    bestMse = f(bestMse + f(f(weight[i]! * diff) * diff));
  }
  for (let is = -4; is <= 4; is++) {
    if (is === 0) continue;
    const iscaleIs = f(f(f(ONE_TENTH * is) + nmax) / max);
    const scaleIs = f(1 / iscaleIs);
    let mse = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.min(nmax, nearestInt(f(iscaleIs * xval[i]!)));
      const diff = f(xval[i]! - f(scaleIs * l));
      mse = f(mse + f(f(weight[i]! * diff) * diff));
    }
    if (mse < bestMse) {
      bestMse = mse;
      iscale = iscaleIs;
    }
  }
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.min(nmax, nearestInt(f(iscale * xval[i]!)));
    Lqp[i] = l;
    const w = weight[i]!;
    sumlx = f(sumlx + f(f(w * xval[i]!) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const w = weight[i]!;
      const li = Lqp[i]!;
      let slx = f(sumlx - f(f(w * xval[i]!) * li));
      let sl2 = f(suml2 - f(f(w * li) * li));
      if (slx > 0 && sl2 > 0) {
        const newL = Math.min(nmax, nearestInt(f(f(xval[i]! * sl2) / slx)));
        if (newL !== li) {
          slx = f(slx + f(f(w * xval[i]!) * newL));
          sl2 = f(sl2 + f(f(w * newL) * newL));
          if (f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2)) {
            Lqp[i] = newL;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (!changed) break;
  }
  return suml2 > 0 ? f(sumlx / suml2) : 0;
}

/** The 4-bit code of a group scale under super-block scale d = 1/id. */
function scaleCode(id: number, scale: number): number {
  return Math.max(0, Math.min(15, nearestInt(f(0.5 * f(f(id * scale) - 1)))));
}

function putU16(out: Uint8Array, at: number, value: number): void {
  out[at] = value & 0xff;
  out[at + 1] = (value >>> 8) & 0xff;
}

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
        importanceWeights(x, xb, importance, ibl * QK_K + 32 * ib, sigma2, 32);
        evenSigns(x, xb, 32);
        const max = largest(32);
        if (max < GROUP_MAX_EPS) {
          scales[ib] = 0;
          L.fill(0);
          continue;
        }
        let scale = makeQpQuants(32, 4);
        const effMax = f(scale * 3);
        if (effMax <= 0) {
          scales[ib] = 0;
          L.fill(0);
          continue;
        }
        let best = 0;
        for (let is = -6; is <= 6; is++) {
          const id = f(f(5 + f(is * ONE_TENTH)) / effMax);
          const thisScale = f(1 / id);
          for (let k = 0; k < 4; k++) gridLevels(t, id, thisScale, 8 * k, Laux);
          const [sumqx, sumq2] = weightedFit(32, Laux);
          if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
            scale = f(sumqx / sumq2);
            best = f(scale * sumqx);
            L.set(Laux);
          }
        }
        if (scale > 0) {
          const id = f(1 / scale);
          for (let k = 0; k < 4; k++) {
            gridLevels(t, id, scale, 8 * k, L);
          }
          const [sumqx, sumq2] = weightedFit(32, L);
          if (sumq2 > 0) scale = f(sumqx / sumq2);
        }
        if (scale < 0) {
          scale = -scale;
          for (let k = 0; k < 4; k++) blockSigns[k] = ~blockSigns[k]! & 127;
        }
        for (let k = 0; k < 4; k++) {
          indices[4 * ib + k] = gridIndex(t, L, 8 * k);
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
        const word = (words[ib]! | (scaleCode(id, scales[ib]!) << 28)) >>> 0;
        const q = y + 2 + 8 * ib;
        for (let k = 0; k < 4; k++) out[q + k] = indices[4 * ib + k]!;
        for (let b = 0; b < 4; b++) out[q + 4 + b] = (word >>> (8 * b)) & 0xff;
      }
    }
  }
}

/**
 * The shared search of iq2_xs and iq2_s for one group of 16 values (weights, waux, xval set): levels
 * to L, returns the scale (non-negative; signs flipped in blockSigns when it came out negative,
 * `signMask` the bits kept), or −1 for a group whose magnitudes are below `eps` (scale 0, L zero).
 */
function searchGroupOf16(t: Iq2GridTables, eps: number, signMask: number): number {
  const max = largest(16);
  L.fill(0, 0, 16);
  if (max < eps) return -1;
  let best = 0;
  let scale = f(max / 5);
  onGrid[0] = onGrid[1] = true;
  for (let is = -9; is <= 9; is++) {
    const id = f(f(5 + f(is * ONE_TENTH)) / max);
    const thisScale = f(1 / id);
    for (let k = 0; k < 2; k++) onGridAux[k] = gridLevels(t, id, thisScale, 8 * k, Laux);
    const [sumqx, sumq2] = weightedFit(16, Laux);
    if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
      scale = f(sumqx / sumq2);
      best = f(scale * sumqx);
      for (let i = 0; i < 16; i++) L[i] = Laux[i]!;
      onGrid[0] = onGridAux[0]!;
      onGrid[1] = onGridAux[1]!;
    }
  }
  if ((!onGrid[0] || !onGrid[1]) && scale > 0) {
    const id = f(1 / scale);
    for (let k = 0; k < 2; k++) if (!onGrid[k]) gridLevels(t, id, scale, 8 * k, L);
    const [sumqx, sumq2] = weightedFit(16, L);
    if (sumq2 > 0) scale = f(sumqx / sumq2);
  }
  if (scale < 0) {
    scale = -scale;
    for (let k = 0; k < 2; k++) blockSigns[k] = ~blockSigns[k]! & signMask;
  }
  return scale;
}

/**
 * iq2_xs: `rows` rows of `rowLength` values (a multiple of 256) → 74 bytes per 256 (f16 d | per 8
 * values a u16 of a 9-bit grid index and 7 sign bits | a 4-bit scale per 16). `importance` is required.
 */
export function quantizeIQ2_XS(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  if (importance === undefined) throw new Error("quantizeIQ2_XS: needs an importance matrix (ggml quantizes iq2_xs only with one)");
  const blocks = blocksPerRow("quantizeIQ2_XS", x, out, rows, rowLength, 74, importance);
  const t = iq2GridTables(512);
  for (let row = 0; row < rows; row++) {
    for (let ibl = 0; ibl < blocks; ibl++) {
      const xbl = row * rowLength + ibl * QK_K;
      const y = (row * blocks + ibl) * 74;
      out.fill(0, y, y + 74);
      let maxScale = 0;
      const sigma2 = f(sumOfSquares(x, xbl) / QK_K);
      for (let ib = 0; ib < 16; ib++) {
        const xb = xbl + 16 * ib;
        importanceWeights(x, xb, importance, ibl * QK_K + 16 * ib, sigma2, 16);
        evenSigns(x, xb, 16);
        const scale = searchGroupOf16(t, GROUP_MAX_EPS, 127);
        if (scale < 0) {
          scales[ib] = 0;
          continue;
        }
        for (let k = 0; k < 2; k++) putU16(out, y + 2 + 2 * (2 * ib + k), gridIndex(t, L, 8 * k) | (blockSigns[k]! << 9));
        scales[ib] = scale;
        maxScale = maxScale > scale ? maxScale : scale;
      }
      if (maxScale === 0) {
        out.fill(0, y + 2, y + 66);
        continue;
      }
      const d = f(maxScale / 31);
      putU16(out, y, f32ToF16Bits(d));
      const id = f(1 / d);
      for (let ib = 0; ib < 16; ib += 2) out[y + 66 + ib / 2] = scaleCode(id, scales[ib]!) | (scaleCode(id, scales[ib + 1]!) << 4);
    }
  }
}

/**
 * iq2_s: `rows` rows of `rowLength` values (a multiple of 256) → 82 bytes per 256 (f16 d | grid index
 * low bytes[32] | sign bytes[32] | 2 high index bits per 8 values[8] | a 4-bit scale per 16). Without
 * `importance`, the weights are 0.25·σ² + x².
 */
export function quantizeIQ2_S(x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array): void {
  const blocks = blocksPerRow("quantizeIQ2_S", x, out, rows, rowLength, 82, importance);
  const t = iq2GridTables(1024);
  for (let row = 0; row < rows; row++) {
    for (let ibl = 0; ibl < blocks; ibl++) {
      const xbl = row * rowLength + ibl * QK_K;
      const y = (row * blocks + ibl) * 82;
      out.fill(0, y, y + 82);
      let maxScale = 0;
      const sigma2 = f(f(2 * sumOfSquares(x, xbl)) / QK_K);
      for (let ib = 0; ib < 16; ib++) {
        const xb = xbl + 16 * ib;
        if (importance) importanceWeights(x, xb, importance, ibl * QK_K + 16 * ib, sigma2, 16);
        else {
          for (let i = 0; i < 16; i++) weight[i] = f(f(0.25 * sigma2) + f(x[xb + i]! * x[xb + i]!));
          for (let i = 0; i < 16; i++) waux[i] = Math.sqrt(weight[i]!);
        }
        for (let k = 0; k < 2; k++) {
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
        const scale = searchGroupOf16(t, GROUP_MAX_EPS_IQ2_S, 255);
        if (scale < 0) {
          scales[ib] = 0;
          continue;
        }
        for (let k = 0; k < 2; k++) {
          const entry = gridIndex(t, L, 8 * k);
          const i8 = 2 * ib + k;
          out[y + 2 + i8] = entry & 255;
          out[y + 66 + (i8 >> 2)]! |= (entry >> 8) << (2 * (i8 % 4));
          out[y + 2 + 32 + i8] = blockSigns[k]!;
        }
        scales[ib] = scale;
        maxScale = maxScale > scale ? maxScale : scale;
      }
      if (maxScale === 0) continue;
      const d = f(maxScale / 31);
      putU16(out, y, f32ToF16Bits(f(d * f(0.9875))));
      const id = f(1 / d);
      for (let ib = 0; ib < 16; ib += 2) out[y + 74 + ib / 2] = scaleCode(id, scales[ib]!) | (scaleCode(id, scales[ib + 1]!) << 4);
    }
  }
}
