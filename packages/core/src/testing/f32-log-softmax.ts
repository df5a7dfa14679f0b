import type { Backend, DeviceBuffer } from "../backend";
import type { ReferenceBackend } from "../reference-backend";

/**
 * A Backend.logSoftmaxAt for the reference backend that sums in f32 as the CUDA kernel does (the
 * row's maximum, 1024 strided partial sums of exp(x - max), then a tree): for tests of the paths
 * that score on the backend, whose results must stay within 1e-5·max(1, |value|) of double precision.
 */
export function f32LogSoftmaxAt(inner: ReferenceBackend): NonNullable<Backend["logSoftmaxAt"]> {
  const f = Math.fround;
  return (out: Float32Array, logits: DeviceBuffer, rows: number, columns: number, targets: Int32Array) => {
    const values = inner.read(logits, 0, rows * columns);
    for (let r = 0; r < rows; r++) {
      const row = values.subarray(r * columns, (r + 1) * columns);
      let max = -Infinity;
      for (const value of row) max = Math.max(max, value);
      const partial = new Float32Array(1024);
      for (let i = 0; i < columns; i++) partial[i % 1024] = f(partial[i % 1024]! + f(Math.exp(f(row[i]! - max))));
      for (let width = 512; width >= 1; width >>= 1) for (let t = 0; t < width; t++) partial[t] = f(partial[t]! + partial[t + width]!);
      out[r] = f(f(row[targets[r]!]! - max) - f(Math.log(partial[0]!)));
    }
  };
}
