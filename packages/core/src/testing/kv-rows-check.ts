/**
 * The KV rows check of the backend op tests (cpu-ffi, cuda-ffi): what a saved KV state relies on
 * (Backend.readKVRows / writeKVRows). The same keys and values are written on both backends with
 * writeKV; each backend's rows are read back; the reference's rows are then written into fresh
 * storage of the other backend with writeKVRows, and attention over them is run on both. A backend
 * whose rows are not in the contract's layout gives other bytes, or other attention outputs.
 */
import { expect } from "vitest";
import type { Backend, KVType } from "../backend";
import { nmse, normals, pagedLayout } from "./backend-pair";

export interface KVRowsCheck {
  /** The rows each backend stored for the same input (slots [first, first + rows)). */
  readonly nativeRows: Uint8Array;
  readonly referenceRows: Uint8Array;
  /** The reference's rows written into the other backend with writeKVRows, then read back. */
  readonly roundTrip: Uint8Array;
  /** Attention over the moved rows on the other backend, and over the reference's own. */
  readonly nativeAttention: Float32Array;
  readonly referenceAttention: Float32Array;
}

export function kvRowsCheck(native: Backend, reference: Backend, type: KVType): KVRowsCheck {
  const [heads, kvHeads, headDim, blockTokens, blocks] = [4, 2, 64, 4, 8];
  const width = kvHeads * headDim;
  const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
  const storage = (backend: Backend) => ({ keys: backend.allocateKV(type, slots.length, width), values: backend.allocateKV(type, slots.length, width) });
  const write = (backend: Backend, target: { keys: ReturnType<Backend["allocateKV"]>; values: ReturnType<Backend["allocateKV"]> }) => {
    const k = backend.allocate(slots.length * width);
    const v = backend.allocate(slots.length * width);
    backend.write(k, normals(slots.length * width, 310));
    backend.write(v, normals(slots.length * width, 311));
    backend.writeKV(target.keys, slots, k);
    backend.writeKV(target.values, slots, v);
  };
  const nativeStorage = storage(native);
  const referenceStorage = storage(reference);
  write(native, nativeStorage);
  write(reference, referenceStorage);
  const [first, rows] = [5, 19];
  const nativeRows = native.readKVRows(nativeStorage.keys, first, rows);
  const referenceRows = reference.readKVRows(referenceStorage.keys, first, rows);

  // Every slot of the reference moved into fresh native storage, keys and values.
  const moved = storage(native);
  native.writeKVRows(moved.keys, 0, reference.readKVRows(referenceStorage.keys, 0, slots.length));
  native.writeKVRows(moved.values, 0, reference.readKVRows(referenceStorage.values, 0, slots.length));
  const roundTrip = native.readKVRows(moved.keys, first, rows);

  let block = 0;
  const { rows: queryRows, sequences, blockTables } = pagedLayout([[1, 20], [3, 9]], blockTokens, () => block++ % blocks);
  const attention = (backend: Backend, kv: { keys: ReturnType<Backend["allocateKV"]>; values: ReturnType<Backend["allocateKV"]> }) => {
    const q = backend.allocate(queryRows * heads * headDim);
    backend.write(q, normals(queryRows * heads * headDim, 312));
    const out = backend.allocate(queryRows * heads * headDim);
    backend.attention(out, q, { ...kv, blockTokens, blockTables, sequences }, { rows: queryRows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) });
    return backend.read(out);
  };
  return { nativeRows, referenceRows, roundTrip, nativeAttention: attention(native, moved), referenceAttention: attention(reference, referenceStorage) };
}

/**
 * The op test of readKVRows / writeKVRows: the native backend stores the reference's bytes, rows
 * moved between them read back the same, attention over moved rows agrees within `bound` (NMSE),
 * and a range outside the storage or bytes that are not whole rows are refused.
 */
export function expectKVRowsPortable(native: Backend, reference: Backend, type: KVType, bound: number): void {
  const check = kvRowsCheck(native, reference, type);
  expect(check.nativeRows).toEqual(check.referenceRows);
  expect(check.roundTrip).toEqual(check.referenceRows);
  expect(nmse(check.nativeAttention, check.referenceAttention)).toBeLessThanOrEqual(bound);
  expect(() => native.readKVRows(native.allocateKV(type, 4, 64), 2, 3)).toThrow(/slots \[2, 5\) outside a KV storage of 4/);
  expect(() => native.writeKVRows(native.allocateKV(type, 4, 64), 0, new Uint8Array(7))).toThrow(/7 bytes are not whole rows/);
}
