/**
 * The search tables of ggml's iq2 and iq1 quantizers (ggml-quants.c, iq2xs_init_impl), built once
 * per grid on first use: for each pattern of 8 levels (0..2, 2 bits each) its grid index, or a list
 * of the grid entries nearest to it. quantize-iq2.ts and quantize-iq1.ts search them;
 * native/cpu/quantize-iq2.c builds the same tables.
 *
 * The grids are iq-grids.ts's: every value of an iq2 grid is one of 8, 25, 43 (levels 0, 1, 2) and
 * of the iq1 grid one of −1, 0, 1 (levels 0, 1, 2). ggml's kgrid_2bit_* / kgrid_1bit_2048 hold these
 * levels, 2 bits each, in the same entry order.
 *
 * A neighbour list holds every grid entry at one of the `nearest` smallest distinct squared
 * distances from the pattern (distance Σ (2l − 2l')²), in (distance, index) order: ggml sorts
 * (distance, index) pairs with qsort and takes them in that order, and the pairs are distinct, so
 * the order does not depend on the sort. ggml lists neighbours for every 16-bit index below 43692;
 * a quantizer only looks up patterns of levels 0..2, so these tables list only those (3^8 patterns).
 */
import { IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID } from "./iq-grids";

/** Grid sizes: iq2_xxs 256, iq2_xs 512, iq2_s 1024, iq1_s and iq1_m 2048. */
export type Iq2GridSize = 256 | 512 | 1024 | 2048;

export interface Iq2GridTables {
  readonly gridSize: Iq2GridSize;
  /** The levels (0..2) of entry k's 8 values: levels[8k .. 8k + 7]. */
  readonly levels: Uint8Array;
  /**
   * Indexed by a level pattern (value i's level in bits 2i, 2i + 1; every 16-bit pattern): the
   * grid index when the pattern is a grid entry, else −(offset + 1) of its neighbour list in
   * `neighbours` (patterns with a level 3 have none: −1, never looked up).
   */
  readonly map: Int32Array;
  /** Neighbour lists: a count, then that many grid indices. */
  readonly neighbours: Uint16Array;
}

/** How many distinct nearest distances each grid's neighbour lists cover (ggml's nwant). */
const NEAREST_DISTANCES: Record<Iq2GridSize, number> = { 256: 2, 512: 2, 1024: 1, 2048: 3 };

const cache = new Map<Iq2GridSize, Iq2GridTables>();

function gridLevels(gridSize: Iq2GridSize): Uint8Array {
  const levels = new Uint8Array(gridSize * 8);
  if (gridSize === 2048) {
    for (let i = 0; i < levels.length; i++) levels[i] = IQ1S_GRID[i]! + 1;
    return levels;
  }
  const grid = gridSize === 256 ? IQ2XXS_GRID : gridSize === 512 ? IQ2XS_GRID : IQ2S_GRID;
  for (let i = 0; i < levels.length; i++) {
    const value = grid[i]!;
    levels[i] = value === 8 ? 0 : value === 25 ? 1 : 2;
  }
  return levels;
}

/** The tables of one grid, built on first use. */
export function iq2GridTables(gridSize: Iq2GridSize): Iq2GridTables {
  const cached = cache.get(gridSize);
  if (cached) return cached;
  const levels = gridLevels(gridSize);
  const map = new Int32Array(1 << 16).fill(-1);
  for (let j = 0; j < gridSize; j++) {
    let u = 0;
    for (let i = 0; i < 8; i++) u |= levels[8 * j + i]! << (2 * i);
    map[u] = j;
  }
  const nearest = NEAREST_DISTANCES[gridSize];
  // distances are 4·Σ(l − l')², Σ(l − l')² ≤ 32
  const quarterDistance = new Uint8Array(gridSize);
  const present = new Uint8Array(33);
  const lists: number[] = [];
  const pattern = new Uint8Array(8);
  for (let u = 0; u < 1 << 16; u++) {
    let valid = true;
    for (let i = 0; i < 8; i++) {
      pattern[i] = (u >> (2 * i)) & 3;
      if (pattern[i] === 3) valid = false;
    }
    if (!valid || map[u]! >= 0) continue;
    present.fill(0);
    for (let j = 0; j < gridSize; j++) {
      let d = 0;
      for (let i = 0; i < 8; i++) {
        const diff = levels[8 * j + i]! - pattern[i]!;
        d += diff * diff;
      }
      quarterDistance[j] = d;
      present[d] = 1;
    }
    const at = lists.length;
    map[u] = -at - 1;
    lists.push(0);
    let taken = 0;
    for (let d = 0; d <= 32 && taken < nearest; d++) {
      if (!present[d]) continue;
      taken++;
      for (let j = 0; j < gridSize; j++) if (quarterDistance[j] === d) lists.push(j);
    }
    lists[at] = lists.length - at - 1;
  }
  const tables: Iq2GridTables = { gridSize, levels, map, neighbours: Uint16Array.from(lists) };
  cache.set(gridSize, tables);
  return tables;
}
