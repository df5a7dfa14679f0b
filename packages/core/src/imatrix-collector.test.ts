/**
 * ImatrixCollector's rules, op by op (collect_imatrix of llama.cpp's tools/imatrix/imatrix.cpp): which
 * matmuls count, with what counts, and that the wrapper hides every fused op that takes a weight.
 */
import { GGMLType } from "@memra/gguf";
import { describe, expect, it } from "vitest";
import type { Backend, WeightHandle } from "./backend";
import { IMATRIX_MIN_DENSE_ROWS, ImatrixCollector } from "./imatrix-collector";
import { ReferenceBackend } from "./reference-backend";
import { normals, tensorInfo } from "./testing/backend-pair";

const COLUMNS = 4;

function setup(processOutput = false) {
  const collector = new ImatrixCollector({ processOutput });
  const backend = collector.wrap(new ReferenceBackend());
  const upload = (name: string, shape: number[]): WeightHandle => {
    const values = normals(shape.reduce((p, v) => p * v, 1), shape.length + name.length);
    return backend.uploadWeight(tensorInfo(name, GGMLType.F32, shape, new Uint8Array(values.buffer)), new Uint8Array(values.buffer));
  };
  const input = (rows: number, seed = rows) => {
    const values = normals(rows * COLUMNS, seed);
    const buffer = backend.allocate(rows * COLUMNS);
    backend.write(buffer, values);
    return { values, buffer };
  };
  return { collector, backend, upload, input, out: backend.allocate(64 * 8) };
}

/** Σ_r x[r, c]², added in f32 row after row, as llama.cpp does. */
function squares(x: Float32Array, rows: number): Float32Array {
  const sums = new Float32Array(COLUMNS);
  for (let r = 0; r < rows; r++) for (let c = 0; c < COLUMNS; c++) sums[c] = sums[c]! + Math.fround(x[r * COLUMNS + c]! * x[r * COLUMNS + c]!);
  return sums;
}

const entriesOf = (collector: ImatrixCollector) => collector.toImatrix({ chunkSize: 16 }).entries;

describe("ImatrixCollector", () => {
  it(`collects a dense matmul of a block weight from ${IMATRIX_MIN_DENSE_ROWS} rows up, one count per weight`, () => {
    const { collector, backend, upload, input, out } = setup();
    const weight = upload("blk.0.attn_q.weight", [COLUMNS, 3]);
    backend.matmul(out, input(15).buffer, weight, 15);
    expect(collector.weightNames).toEqual([]); // llama.cpp: src1->ne[1] < 16 is skipped
    const x = input(16);
    backend.matmul(out, x.buffer, weight, 16);
    const second = input(20, 7);
    backend.matmul(out, second.buffer, weight, 20);
    const entry = entriesOf(collector).get("blk.0.attn_q.weight")!;
    expect(entry.counts).toEqual([36]);
    // one running f32 sum per column over both calls' rows
    const rows = new Float32Array([...x.values.subarray(0, 16 * COLUMNS), ...second.values.subarray(0, 20 * COLUMNS)]);
    expect(entry.sums).toEqual(squares(rows, 36));
  });

  it("counts output.weight only with processOutput, over the whole step the LM head runs in pieces; never a tied head (token_embd)", () => {
    for (const processOutput of [false, true]) {
      const { collector, backend, upload, input, out } = setup(processOutput);
      const output = upload("output.weight", [COLUMNS, 5]);
      const tied = upload("token_embd.weight", [COLUMNS, 5]);
      // a step of 40 rows whose head runs as 32 + 8: the 8 count, as in llama.cpp's one matmul of 40
      collector.beginStep(40);
      const x = input(40);
      backend.matmul(out, x.buffer, output, 32);
      backend.matmul(out, input(8, 3).buffer, output, 8);
      backend.matmul(out, x.buffer, tied, 32);
      expect(collector.weightNames).toEqual(processOutput ? ["output.weight"] : []);
      if (processOutput) expect(entriesOf(collector).get("output.weight")!.counts).toEqual([40]);
    }
  });

  it("collects matmuls' weights each from the one input (Q/K/V)", () => {
    const { collector, backend, upload, input } = setup();
    const q = upload("blk.1.attn_q.weight", [COLUMNS, 3]);
    const k = upload("blk.1.attn_k.weight", [COLUMNS, 2]);
    const x = input(16);
    backend.matmuls!([backend.allocate(48), backend.allocate(32)], x.buffer, [q, k], 16);
    const entries = entriesOf(collector);
    expect(entries.get("blk.1.attn_q.weight")).toEqual({ sums: squares(x.values, 16), counts: [16] });
    expect(entries.get("blk.1.attn_k.weight")).toEqual({ sums: squares(x.values, 16), counts: [16] });
  });

  it("collects routed experts whatever the rows: per expert sums and counts, the others 0", () => {
    const { collector, backend, upload, input, out } = setup();
    const experts = upload("blk.0.ffn_up_exps.weight", [COLUMNS, 3, 3]);
    const x = input(1);
    backend.expertMatmul(out, x.buffer, experts, 1, 1);
    const entry = entriesOf(collector).get("blk.0.ffn_up_exps.weight")!;
    expect(entry.counts).toEqual([0, 1, 0]);
    expect([...entry.sums]).toEqual([0, 0, 0, 0, ...squares(x.values, 1), 0, 0, 0, 0]);
    expect(collector.toImatrix({ chunkSize: 1 }).chunkCount).toBe(1);
  });

  it("reports the chunks as llama-imatrix's m_last_chunk: the largest count over the chunk size", () => {
    const { collector, backend, upload, input, out } = setup();
    backend.matmul(out, input(40).buffer, upload("blk.0.ffn_down.weight", [COLUMNS, 2]), 40);
    expect(collector.toImatrix({ chunkSize: 16, datasets: ["a.txt"] })).toMatchObject({ chunkCount: 2, chunkSize: 16, datasets: ["a.txt"], legacy: false });
  });

  it("fails on non-finite activations, as llama-imatrix does", () => {
    const { backend, upload, out } = setup();
    const x = backend.allocate(16 * COLUMNS);
    backend.write(x, new Float32Array(16 * COLUMNS).fill(Number.POSITIVE_INFINITY));
    expect(() => backend.matmul(out, x, upload("blk.0.attn_q.weight", [COLUMNS, 2]), 16)).toThrow("imatrix: non-finite values detected in blk.0.attn_q.weight");
  });

  it("hides the fused ops that take a weight and graph recording, passes the others through", () => {
    const fused = ["rmsNormMatmuls", "attentionMatmul", "qkNormRopeAttentionMatmul", "swigluMatmul", "rmsNormSwigluMatmul", "moeExperts", "captureGraph"] as const;
    const passed = ["addRmsNorm", "qkNormRope", "qkNormRopeWriteKV", "writeKVPair", "ropeNeoxScaled", "readInto", "argmaxRows", "topKRows", "logSoftmaxAt", "rotateKV"] as const;
    const inner = new ReferenceBackend() as unknown as Record<string, unknown>;
    const called: string[] = [];
    for (const name of [...fused, ...passed]) inner[name] = () => called.push(name);
    const wrapped = new ImatrixCollector().wrap(inner as unknown as Backend) as unknown as Record<string, unknown>;
    for (const name of fused) expect(wrapped[name], name).toBeUndefined();
    for (const name of passed) {
      (wrapped[name] as () => void)();
      expect(called.at(-1)).toBe(name);
    }
    // and where the inner backend lacks an optional op, so does the wrapper
    expect(new ImatrixCollector().wrap(new ReferenceBackend()).addRmsNorm).toBeUndefined();
  });
});
