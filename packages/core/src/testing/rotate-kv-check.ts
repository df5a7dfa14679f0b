/**
 * The rotateKV check of the backend op tests (cpu-ffi, cuda-ffi): the context shift's in-place K
 * shift. The same keys are written on both backends; some slots (not contiguous) are rotated by a
 * delta on each, plainly and with YaRN scaling; every row is read back (readKVRows) and compared
 * with the reference's, as f32. The slots not named must keep their bytes.
 */
import { GGMLType, dequantize } from "@memra/gguf";
import { expect } from "vitest";
import type { Backend, KVType } from "../backend";
import { resolveRopeScaling } from "../models/rope-scaling";
import { nmse, normals } from "./backend-pair";

const GGML: Record<KVType, GGMLType> = { f32: GGMLType.F32, f16: GGMLType.F16, q8_0: GGMLType.Q8_0 };

function rowsAsF32(bytes: Uint8Array, type: KVType, values: number): Float32Array {
  return type === "f32" ? new Float32Array(bytes.slice().buffer) : dequantize(GGML[type], bytes, values);
}

/** Rotates slots of keys on both backends and compares every row read back (NMSE within `bound`). */
export function expectRotateKVMatches(native: Backend, reference: Backend, type: KVType, bound: number): void {
  const [heads, headDim, rows] = [2, 64, 40];
  const width = heads * headDim;
  const slots = Int32Array.from({ length: rows }, (_, i) => i);
  const rotated = Int32Array.of(3, 9, 17, 30, 31, 0);
  const scalings = [undefined, resolveRopeScaling({ ropeFreqBase: 10000, contextLength: 256, ropeScalingType: "yarn", ropeScalingFactor: 4, ropeScalingOriginalContextLength: 256 }, headDim)];
  for (const [index, scaling] of scalings.entries()) {
    const stored = [native, reference].map((backend) => {
      const keys = backend.allocateKV(type, rows, width);
      const x = backend.allocate(rows * width);
      backend.write(x, normals(rows * width, 400 + index));
      backend.writeKV(keys, slots, x);
      const before = backend.readKVRows(keys, 0, rows);
      backend.rotateKV!(keys, rotated, -21, heads, headDim, 10000, scaling);
      return { before, after: backend.readKVRows(keys, 0, rows) };
    });
    const [mine, theirs] = stored as [{ before: Uint8Array; after: Uint8Array }, { before: Uint8Array; after: Uint8Array }];
    const what = `${type} ${scaling ? "YaRN" : "plain"}`;
    expect(nmse(rowsAsF32(mine.after, type, rows * width), rowsAsF32(theirs.after, type, rows * width)), what).toBeLessThanOrEqual(bound);
    // The rotation happened, and only at the slots named.
    const rowBytes = mine.after.byteLength / rows;
    for (let slot = 0; slot < rows; slot++) {
      const row = (bytes: Uint8Array) => bytes.subarray(slot * rowBytes, (slot + 1) * rowBytes);
      if (rotated.includes(slot)) expect(nmse(rowsAsF32(row(mine.after), type, width), rowsAsF32(row(mine.before), type, width)), `${what} slot ${slot} rotated`).toBeGreaterThan(1e-3);
      else expect(Buffer.from(row(mine.after)).equals(row(mine.before)), `${what} slot ${slot} untouched`).toBe(true);
    }
  }
}
