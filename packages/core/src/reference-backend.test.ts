import { GGMLType } from "@memra/gguf";
import { describe, expect, it } from "vitest";
import { ReferenceBackend } from "./reference-backend";
import { normals, tensorInfo } from "./testing/backend-pair";

/** out[r, o] = Σ_i x[r, i] · W[matrix, o, i] one dot product at a time, in double precision and index order. */
function plainMatmul(x: Float32Array, w: Float32Array, matrix: number, inFeatures: number, outFeatures: number, rows: number): Float32Array {
  const out = new Float32Array(rows * outFeatures);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outFeatures; o++) {
      let sum = 0;
      for (let i = 0; i < inFeatures; i++) sum += x[r * inFeatures + i]! * w[(matrix * outFeatures + o) * inFeatures + i]!;
      out[r * outFeatures + o] = sum;
    }
  }
  return out;
}

describe("ReferenceBackend", () => {
  it("matmul and expertMatmul tile rows and outputs by 4 and give every dot product's plain sum bit for bit", () => {
    const backend = new ReferenceBackend();
    const inFeatures = 37;
    for (const outFeatures of [1, 3, 4, 7, 9]) {
      const experts = 2;
      const values = normals(inFeatures * outFeatures * experts, outFeatures);
      const data = new Uint8Array(values.buffer.slice(0));
      const matrix = backend.uploadWeight(tensorInfo("w", GGMLType.F32, [inFeatures, outFeatures], data.subarray(0, inFeatures * outFeatures * 4)), data.subarray(0, inFeatures * outFeatures * 4));
      const stacked = backend.uploadWeight(tensorInfo("experts", GGMLType.F32, [inFeatures, outFeatures, experts], data), data);
      for (const rows of [1, 3, 4, 5, 8, 9]) {
        const input = normals(rows * inFeatures, 100 + rows);
        const x = backend.allocate(rows * inFeatures);
        backend.write(x, input);
        const out = backend.allocate(rows * outFeatures);
        backend.matmul(out, x, matrix, rows);
        expect(backend.read(out), `${rows} rows, ${outFeatures} outputs`).toEqual(plainMatmul(input, values, 0, inFeatures, outFeatures, rows));
        backend.expertMatmul(out, x, stacked, 1, rows);
        expect(backend.read(out), `expert 1, ${rows} rows, ${outFeatures} outputs`).toEqual(plainMatmul(input, values, 1, inFeatures, outFeatures, rows));
      }
    }
  });
});
