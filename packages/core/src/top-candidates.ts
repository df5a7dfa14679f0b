import { Candidates, topK } from "@memra/sampler";
import { TOP_K_ROWS_MAX } from "./backend";

/** Checks the arguments of Backend.topKRows (RangeError naming what is wrong). */
export function checkTopKRows(ids: Int32Array, values: Float32Array, rows: number, columns: number, k: number): void {
  if (!Number.isInteger(columns) || columns < 1) throw new RangeError(`top-k of rows of ${columns} values`);
  if (!Number.isInteger(k) || k < 1 || k > Math.min(columns, TOP_K_ROWS_MAX)) {
    throw new RangeError(`top-k of rows of ${columns} values takes k from 1 to ${Math.min(columns, TOP_K_ROWS_MAX)}, got ${k}`);
  }
  if (!Number.isInteger(rows) || rows < 0) throw new RangeError(`top-k of ${rows} rows`);
  if (ids.length < rows * k || values.length < rows * k) throw new RangeError(`top-${k} of ${rows} rows into arrays of ${ids.length} ids and ${values.length} values`);
}

/**
 * Backend.topKRows on the host, by the sampler's own top-k (which defines the order): for the
 * reference backend, and for a model whose output backend has no topKRows.
 */
export class HostTopK {
  private candidates: Candidates | undefined;

  /** Backend.topKRows over rows of `logits` starting at element `offset`. */
  rows(ids: Int32Array, values: Float32Array, logits: Float32Array, offset: number, rows: number, columns: number, k: number): void {
    checkTopKRows(ids, values, rows, columns, k);
    if (offset < 0 || offset + rows * columns > logits.length) throw new RangeError(`top-k of ${rows} rows of ${columns} at ${offset} outside logits of ${logits.length}`);
    if (!this.candidates || this.candidates.capacity < columns) this.candidates = new Candidates(columns);
    const candidates = this.candidates;
    for (let r = 0; r < rows; r++) {
      candidates.load(logits.subarray(offset + r * columns, offset + (r + 1) * columns));
      topK(candidates, k);
      ids.set(candidates.ids.subarray(0, k), r * k);
      values.set(candidates.logits.subarray(0, k), r * k);
    }
  }
}

