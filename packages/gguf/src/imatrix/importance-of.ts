import type { Imatrix } from "./imatrix";

/**
 * What llama-quantize hands to llama_model_quantize for an imatrix file (tools/quantize/quantize.cpp
 * load_imatrix): per weight, the mean square activation of each column. GGUF: each matrix's sums
 * divided by its count, 1 for every column of a matrix whose count is 0 (an expert no token was
 * routed to). Legacy: the sums divided by the entry's ncall (left as they are when it is not
 * positive). In f32, as llama.cpp divides.
 */
export function importanceOf(imatrix: Imatrix): Map<string, Float32Array> {
  const importance = new Map<string, Float32Array>();
  for (const [name, { sums, counts }] of imatrix.entries) {
    const values = new Float32Array(sums.length);
    if (imatrix.legacy) {
      const calls = counts[0] ?? 0;
      if (calls > 0) {
        const divisor = Math.fround(calls);
        for (let i = 0; i < sums.length; i++) values[i] = sums[i]! / divisor;
      } else values.set(sums);
    } else {
      const columns = sums.length / counts.length;
      for (let m = 0; m < counts.length; m++) {
        const count = Math.fround(counts[m]!);
        const start = m * columns;
        if (count > 0) for (let i = start; i < start + columns; i++) values[i] = sums[i]! / count;
        else values.fill(1, start, start + columns);
      }
    }
    importance.set(name, values);
  }
  return importance;
}
