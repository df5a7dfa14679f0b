/**
 * iq3_s quantization, byte for byte as ggml's quantize_iq3_s without an importance matrix (what
 * llama-quantize runs for IQ3_S and IQ3_M files): ggml-quants.c's quantize_row_iq3_s_impl with the
 * 512-entry grid of iq3xs_init_impl. native/cpu/quantize-iq3.c is the same arithmetic in C.
 *
 * Per 32-value sub-block: magnitudes searched over 19 candidate scales; a group of 4 levels (0..7,
 * value 2l+1) that is not a grid point becomes the best of its nearest grid points (those at the
 * three smallest squared distances, in (distance, index) order); the best weighted fit (weights x²)
 * is kept and refitted once. Then the super-block's f16 scale and 4-bit sub-block scales. Float
 * rules as in scale-search.ts: Math.fround after every binary32 operation ggml performs.
 */
import { f32ToF16Bits } from "./half";
import { IQ3S_GRID } from "./iq-grids";
import { nearestInt } from "./scale-search";

const f = Math.fround;
const FLT_MAX = 3.4028234663852886e38;

interface Iq3Tables {
  /** Level pattern (4 × 3 bits) → grid index, or −(offset + 1) of its neighbour list. */
  readonly map: Int32Array;
  /** Per off-grid pattern: a count, then that many grid indices. */
  readonly neighbours: Uint16Array;
  /** Levels (0..7) of each grid entry's 4 values. */
  readonly levels: Uint8Array;
}

let tables: Iq3Tables | undefined;

function iq3Tables(): Iq3Tables {
  if (tables) return tables;
  const levels = new Uint8Array(512 * 4);
  for (let i = 0; i < levels.length; i++) levels[i] = (IQ3S_GRID[i]! - 1) >> 1;
  const map = new Int32Array(4096).fill(-1);
  for (let j = 0; j < 512; j++) map[levels[4 * j]! | (levels[4 * j + 1]! << 3) | (levels[4 * j + 2]! << 6) | (levels[4 * j + 3]! << 9)] = j;
  const lists: number[] = [];
  const distance = new Int32Array(512);
  for (let u = 0; u < 4096; u++) {
    if (map[u]! >= 0) continue;
    const distinct = new Set<number>();
    for (let j = 0; j < 512; j++) {
      let d2 = 0;
      for (let k = 0; k < 4; k++) {
        const diff = 2 * (levels[4 * j + k]! - ((u >> (3 * k)) & 7));
        d2 += diff * diff;
      }
      distance[j] = d2;
      distinct.add(d2);
    }
    const nearest = [...distinct].sort((a, b) => a - b).slice(0, 3);
    map[u] = -lists.length - 1;
    const at = lists.length;
    lists.push(0);
    for (const d2 of nearest) for (let j = 0; j < 512; j++) if (distance[j] === d2) lists.push(j);
    lists[at] = lists.length - at - 1;
  }
  tables = { map, neighbours: Uint16Array.from(lists), levels };
  return tables;
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

/** The grid entry for 4 values (at xval[at..]) at inverse scale id: on the grid or the best neighbour. Levels to `levelsOut[at..]`. */
function gridEntry(t: Iq3Tables, id: number, scale: number, at: number, levelsOut: Int8Array): [number, boolean] {
  let u = 0;
  for (let i = 0; i < 4; i++) {
    const l = Math.max(0, Math.min(7, nearestInt(f(0.5 * f(f(id * xval[at + i]!) - 1)))));
    levelsOut[at + i] = l;
    u |= l << (3 * i);
  }
  const entry = t.map[u]!;
  if (entry >= 0) return [entry, true];
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
  return [best, false];
}

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

/** iq3_s: super-blocks of 256 values → 110 bytes (d f16 | qs[64] | qh[8] | signs[32] | scales[4]). */
export function quantizeIQ3_S(x: Float32Array, out: Uint8Array, blockCount: number): void {
  const t = iq3Tables();
  for (let block = 0; block < blockCount; block++) {
    const y = block * 110;
    out.fill(0, y, y + 110);
    let qs = y + 2;
    let signs = y + 74;
    const qh = y + 66;
    let maxScale = 0;
    for (let ib = 0; ib < 8; ib++) {
      const xb = block * 256 + 32 * ib;
      for (let i = 0; i < 32; i++) weight[i] = f(x[xb + i]! * x[xb + i]!);
      for (let i = 0; i < 32; i++) waux[i] = Math.sqrt(weight[i]!);
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
      let max = xval[0]!;
      for (let i = 1; i < 32; i++) max = max > xval[i]! ? max : xval[i]!;
      L.fill(0);
      if (max === 0) {
        // As ggml: an all-zero sub-block writes nothing and does not advance qs and signs.
        scales[ib] = 0;
        continue;
      }
      let best = 0;
      let scale = f(max / 15);
      onGrid.fill(false);
      for (let is = -9; is <= 9; is++) {
        const id = f(f(15 + f(is * f(0.2))) / max);
        const thisScale = f(1 / id);
        for (let k = 0; k < 8; k++) onGridAux[k] = gridEntry(t, id, thisScale, 4 * k, Laux)[1];
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
        for (let k = 0; k < 8; k++) gridEntry(t, id, scale, 4 * k, L);
        const [sumqx, sumq2] = fit(L);
        if (sumq2 > 0) scale = f(sumqx / sumq2);
      }
      if (scale < 0) {
        scale = -scale;
        for (let k = 0; k < 4; k++) blockSigns[k] = ~blockSigns[k]! & 0xff;
      }
      for (let k = 0; k < 8; k++) {
        const u = L[4 * k]! | (L[4 * k + 1]! << 3) | (L[4 * k + 2]! << 6) | (L[4 * k + 3]! << 9);
        const entry = t.map[u]!;
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
    for (let ib = 0; ib < 8; ib += 2) {
      const l1 = Math.max(0, Math.min(15, nearestInt(f(0.5 * f(f(id * scales[ib]!) - 1)))));
      const l2 = Math.max(0, Math.min(15, nearestInt(f(0.5 * f(f(id * scales[ib + 1]!) - 1)))));
      out[y + 106 + ib / 2] = l1 | (l2 << 4);
    }
  }
}
