/**
 * The residual norm in a projection's kernel (Backend ResidualNorm, CudaBackendOptions.fusedNorm):
 * a decode step's O or down projection adds its output to the residual stream and applies the
 * next RMSNorm with its q8_0 rounding in the last block of its matrix-vector kernel, and the next
 * op's norm then launches nothing. Everything here is bit for bit against the ops apart (the
 * projection, then addRmsNorm, then the next op with its own norm): the tail reproduces the norm
 * kernel's sums for its block sizes (32, 128 and 256 threads: widths 64, 256/1,024 and 4,096).
 * Runs on a GPU, or on the CPU emulator when MEMRA_CUDA_LIBRARY names libmemra_cuda_emulated.so.
 */
import { type BackendGraph, type DeviceBuffer, type ResidualNorm, type WeightHandle } from "@memra/core";
import { firstDifference, normals, pagedLayout, tensorInfo, weightBytes } from "@memra/core/internal";
import { GGMLType } from "@memra/gguf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";
import { CudaError } from "./errors";

const unavailable = cudaUnavailableReason();
const EPS = 1e-6;

describe.skipIf(unavailable !== undefined)(`a residual norm in the projection's kernel${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let backend: CudaBackend;
  beforeAll(() => {
    // the fused decode ops (off by default) are what these tests check
    backend = CudaBackend.create({ fusedFeedForward: true, fusedNorm: true });
  });
  afterAll(() => backend?.dispose());

  const weight = (type: GGMLType, nIn: number, nOut: number, seed: number, on: CudaBackend = backend) => {
    const data = weightBytes(type, normals(nIn * nOut, seed, 0.05), seed + 1);
    return on.uploadWeight(tensorInfo(`w${seed}`, type, [nIn, nOut], data), data);
  };
  const norm = (n: number, seed: number, on: CudaBackend = backend) => {
    const data = new Uint8Array(normals(n, seed, 1).buffer);
    return on.uploadWeight(tensorInfo(`norm${seed}`, GGMLType.F32, [n], data), data);
  };
  const filled = (n: number, seed: number, on: CudaBackend = backend) => {
    const b = on.allocate(n);
    on.write(b, normals(n, seed, 2));
    return b;
  };
  const nodes = (record: () => void) => {
    const graph = backend.captureGraph!(record) as BackendGraph & { nodes: number };
    graph.dispose();
    return graph.nodes;
  };
  const same = (what: string, pairs: readonly (readonly [string, DeviceBuffer, DeviceBuffer])[]) => {
    for (const [name, a, b] of pairs) expect(firstDifference(backend.read(a), backend.read(b)), `${what}: ${name}`).toBe(-1);
  };

  /** One side of a comparison: its residual stream and the buffers the ops write. */
  interface Side {
    hidden: DeviceBuffer;
    normed: DeviceBuffer;
    projected: DeviceBuffer;
    gate: DeviceBuffer;
    up: DeviceBuffer;
    outs: DeviceBuffer[];
  }
  const side = (rows: number, width: number, ffn: number, seed: number, on: CudaBackend = backend): Side => ({
    hidden: filled(rows * width, seed, on),
    normed: on.allocate(rows * width),
    projected: on.allocate(rows * width),
    gate: on.allocate(rows * ffn),
    up: on.allocate(rows * ffn),
    outs: [on.allocate(rows * 96), on.allocate(rows * 96)],
  });
  const residualOf = (s: Side, w: WeightHandle): ResidualNorm => ({ hidden: s.hidden, normed: s.normed, weight: w, eps: EPS });

  it("after the down projection (rmsNormSwigluMatmul): hidden and normed as addRmsNorm makes them, and each next norm's results without its launch", () => {
    // widths whose norm kernel has blocks of 32 (64), 128 (256, 1,024: Qwen3-0.6B) and 256 threads
    // (4,096: Qwen3-8B; two of the tail's threads each); 1 and 2 rows; the next op's matmuls read
    // q8_0 codes (the kept ones) and f16-rounded values (rounded from normed)
    for (const [width, ffn] of [
      [64, 128],
      [256, 512],
      [1024, 3072],
      [4096, 3072],
    ] as const) {
      const [gateWeight, upWeight, downWeight] = [weight(GGMLType.Q8_0, width, ffn, 10 + width), weight(GGMLType.Q8_0, width, ffn, 20 + width), weight(GGMLType.Q8_0, ffn, width, 30 + width)];
      const [ffnNorm, nextNorm] = [norm(width, 40 + width), norm(width, 50 + width)];
      const nextWeights = [weight(GGMLType.Q8_0, width, 96, 60 + width), weight(GGMLType.F16, width, 96, 70 + width)];
      const ffnOf = (s: Side, rows: number, delta: DeviceBuffer | undefined, normWeight: WeightHandle, residual?: ResidualNorm) =>
        backend.rmsNormSwigluMatmul(s.normed, s.hidden, delta, normWeight, EPS, s.gate, s.up, gateWeight, upWeight, s.projected, downWeight, rows, residual);
      const consumers = {
        rmsNormMatmuls: (s: Side, rows: number) => backend.rmsNormMatmuls(s.normed, s.hidden, undefined, nextNorm, EPS, s.outs, nextWeights, rows),
        rmsNorm: (s: Side, rows: number) => backend.rmsNorm(s.normed, s.hidden, nextNorm, rows, EPS),
        rmsNormSwigluMatmul: (s: Side, rows: number) => expect(ffnOf(s, rows, undefined, nextNorm)).toBe(true),
        // the final norm and the LM head: the matmul reads the codes the norm left
        "rmsNorm, matmul": (s: Side, rows: number) => {
          backend.rmsNorm(s.normed, s.hidden, nextNorm, rows, EPS);
          backend.matmul(s.outs[0]!, s.normed, nextWeights[0]!, rows);
        },
      };
      for (const rows of [1, 2]) {
        for (const [name, consume] of Object.entries(consumers)) {
          const what = `width ${width}, ${rows} rows, then ${name}`;
          const seed = 100 + width + rows;
          // fused: the projection's own results (reading them drops the kept codes); chained: the
          // projection and the next op with nothing between (which takes them); apart: addRmsNorm
          const [fused, chained, apart] = [side(rows, width, ffn, seed), side(rows, width, ffn, seed), side(rows, width, ffn, seed)];
          expect(ffnOf(apart, rows, undefined, ffnNorm)).toBe(true);
          backend.addRmsNorm(apart.normed, apart.hidden, apart.projected, nextNorm, rows, EPS);
          expect(ffnOf(fused, rows, undefined, ffnNorm, residualOf(fused, nextNorm)), what).toBe("normed");
          same(what, [
            ["projected", fused.projected, apart.projected],
            ["hidden", fused.hidden, apart.hidden],
            ["normed", fused.normed, apart.normed],
          ]);
          expect(ffnOf(chained, rows, undefined, ffnNorm, residualOf(chained, nextNorm)), what).toBe("normed");
          consume(chained, rows);
          consume(apart, rows);
          same(what, [
            ["hidden after", chained.hidden, apart.hidden],
            ["normed after", chained.normed, apart.normed],
            ["gate", chained.gate, apart.gate],
            ["projected after", chained.projected, apart.projected],
            // (written by rmsNormMatmuls, the first by the matmul after rmsNorm)
            ...(name === "rmsNormMatmuls" ? chained.outs.map((out, i) => [`out ${i}`, out, apart.outs[i]!] as const) : []),
            ...(name === "rmsNorm, matmul" ? [["out 0", chained.outs[0]!, apart.outs[0]!] as const] : []),
          ]);
          // the tail adds no launch, and the next op's norm launches nothing: one node fewer than
          // the add and norm in the next op's launch (rmsNorm: no launch at all; then a q8_0
          // matmul: no rounding launch either)
          const s = side(rows, width, ffn, 7);
          const producer = nodes(() => ffnOf(s, rows, undefined, ffnNorm));
          expect(nodes(() => ffnOf(s, rows, undefined, ffnNorm, residualOf(s, nextNorm))), what).toBe(producer);
          const withTail = nodes(() => {
            ffnOf(s, rows, undefined, ffnNorm, residualOf(s, nextNorm));
            consume(s, rows);
          });
          const withoutTail = nodes(() => {
            ffnOf(s, rows, undefined, ffnNorm);
            if (name === "rmsNormMatmuls") backend.rmsNormMatmuls(s.normed, s.hidden, s.projected, nextNorm, EPS, s.outs, nextWeights, rows);
            else if (name === "rmsNormSwigluMatmul") expect(ffnOf(s, rows, s.projected, nextNorm)).toBe(true);
            else backend.addRmsNorm(s.normed, s.hidden, s.projected, nextNorm, rows, EPS);
            if (name === "rmsNorm, matmul") backend.matmul(s.outs[0]!, s.normed, nextWeights[0]!, rows);
          });
          const saved = { rmsNormMatmuls: 1, rmsNorm: 1, rmsNormSwigluMatmul: 1, "rmsNorm, matmul": 2 }[name]!;
          expect(withTail, what).toBe(withoutTail - saved);
          if (name === "rmsNorm") expect(withTail, what).toBe(producer);
        }
      }
    }
  }, 600_000);

  it("the kept norm is used only by the very next op, and only for the same rows, buffers and weight", () => {
    const [width, ffn, rows] = [256, 512, 2];
    const [gateWeight, upWeight, downWeight] = [weight(GGMLType.Q8_0, width, ffn, 1), weight(GGMLType.Q8_0, width, ffn, 2), weight(GGMLType.Q8_0, ffn, width, 3)];
    const [ffnNorm, nextNorm, otherNorm] = [norm(width, 4), norm(width, 5), norm(width, 6)];
    const nextWeights = [weight(GGMLType.Q8_0, width, 96, 7), weight(GGMLType.Q8_0, width, 96, 8)];
    const other = filled(rows * width, 9);
    const cases: Record<string, { between?: (s: Side) => void; normWeight?: WeightHandle; producerRows?: number; rows?: number }> = {
      "nothing between (the kept codes taken)": {},
      // an op in between changes hidden: the next norm must see the change
      "an add to hidden in between": { between: (s) => backend.add(s.hidden, s.hidden, other, rows * width) },
      "a copy into hidden in between": { between: (s) => backend.copy(s.hidden, 0, other, 0, width) },
      "another norm weight": { normWeight: otherNorm },
      "fewer rows": { rows: 1 },
      "more rows": { producerRows: 1 },
    };
    for (const [what, { between, normWeight = nextNorm, producerRows = rows, rows: consumerRows = rows }] of Object.entries(cases)) {
      const [fused, apart] = [side(rows, width, ffn, 11), side(rows, width, ffn, 11)];
      const ffnOf = (s: Side, residual?: ResidualNorm) =>
        backend.rmsNormSwigluMatmul(s.normed, s.hidden, undefined, ffnNorm, EPS, s.gate, s.up, gateWeight, upWeight, s.projected, downWeight, producerRows, residual);
      // the fused side's ops one right after the other (another op between them would drop the codes)
      expect(ffnOf(fused, residualOf(fused, nextNorm))).toBe("normed");
      between?.(fused);
      backend.rmsNormMatmuls(fused.normed, fused.hidden, undefined, normWeight, EPS, fused.outs, nextWeights, consumerRows);
      expect(ffnOf(apart)).toBe(true);
      backend.addRmsNorm(apart.normed, apart.hidden, apart.projected, nextNorm, producerRows, EPS);
      between?.(apart);
      backend.rmsNormMatmuls(apart.normed, apart.hidden, undefined, normWeight, EPS, apart.outs, nextWeights, consumerRows);
      const written = (b: DeviceBuffer) => backend.read(b).subarray(0, consumerRows * 96);
      same(what, [
        ["hidden", fused.hidden, apart.hidden],
        ["normed", fused.normed, apart.normed],
      ]);
      for (const i of [0, 1]) expect(firstDifference(written(fused.outs[i]!), written(apart.outs[i]!)), `${what}: out ${i}`).toBe(-1);
    }
    // a norm that found its result made leaves the codes to a matmul of normed itself, next
    const matmulCases: Record<string, { x?: (s: Side) => DeviceBuffer; between?: (s: Side) => void }> = {
      "a matmul of normed next": {},
      "a matmul of another buffer": { x: () => other },
      "an add to normed in between": { between: (s) => backend.add(s.normed, s.normed, other, rows * width) },
    };
    for (const [what, { x = (s: Side) => s.normed, between }] of Object.entries(matmulCases)) {
      const [fused, apart] = [side(rows, width, ffn, 12), side(rows, width, ffn, 12)];
      const ffnOf = (s: Side, residual?: ResidualNorm) =>
        backend.rmsNormSwigluMatmul(s.normed, s.hidden, undefined, ffnNorm, EPS, s.gate, s.up, gateWeight, upWeight, s.projected, downWeight, rows, residual);
      expect(ffnOf(fused, residualOf(fused, nextNorm))).toBe("normed");
      backend.rmsNorm(fused.normed, fused.hidden, nextNorm, rows, EPS);
      between?.(fused);
      backend.matmul(fused.outs[0]!, x(fused), nextWeights[0]!, rows);
      expect(ffnOf(apart)).toBe(true);
      backend.addRmsNorm(apart.normed, apart.hidden, apart.projected, nextNorm, rows, EPS);
      between?.(apart);
      backend.matmul(apart.outs[0]!, x(apart), nextWeights[0]!, rows);
      same(what, [
        ["normed", fused.normed, apart.normed],
        ["out", fused.outs[0]!, apart.outs[0]!],
      ]);
    }
  }, 240_000);

  it("after the O projection (attentionMatmul, qkNormRopeAttentionMatmul): the same hidden, normed and next results", () => {
    const [heads, kvHeads, headDim, blockTokens, blocks] = [4, 2, 64, 16, 12];
    const [width, kvWidth] = [heads * headDim, kvHeads * headDim];
    const hiddenWidth = 1024;
    const keys = backend.allocateKV("f16", blocks * blockTokens, kvWidth);
    const values = backend.allocateKV("f16", blocks * blockTokens, kvWidth);
    const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
    backend.writeKVPair(keys, values, slots, filled(slots.length * kvWidth, 1), filled(slots.length * kvWidth, 2));
    const oWeight = weight(GGMLType.Q8_0, width, hiddenWidth, 3);
    const [ffnNorm, qNorm, kNorm] = [norm(hiddenWidth, 4), norm(headDim, 5), norm(headDim, 6)];
    const nextWeights = [weight(GGMLType.Q8_0, hiddenWidth, 96, 7), weight(GGMLType.Q4_K, hiddenWidth, 96, 8)];
    // one sequence at position 30 (one split: the matmul rounds), one at 150 (splits: the attention rounds); two sequences
    for (const shapes of [[[1, 30]], [[1, 150]], [[1, 40], [1, 90]]] as const) {
      let next = 0;
      const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => next++ % blocks); // distinct blocks: 12 of 16 tokens hold 170 positions
      const kv = { keys, values, blockTokens, blockTables, sequences };
      const shape = { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      const q = filled(rows * width, 20 + rows);
      const [k, v] = [filled(rows * kvWidth, 21), filled(rows * kvWidth, 22)];
      const positions = Int32Array.from({ length: rows }, (_, r) => shapes[r]![1]);
      // each step's own slot, where its table puts its position (the attention reads the others')
      const stepSlots = Int32Array.from({ length: rows }, (_, r) => {
        const [position, table] = [sequences[r * 4 + 2]!, sequences[r * 4 + 3]!];
        return blockTables[table + Math.floor(position / blockTokens)]! * blockTokens + (position % blockTokens);
      });
      const ops = {
        attentionMatmul: (s: Side, out: DeviceBuffer, residual?: ResidualNorm) => backend.attentionMatmul(s.projected, out, q, kv, shape, oWeight, residual),
        qkNormRopeAttentionMatmul: (s: Side, out: DeviceBuffer, residual?: ResidualNorm) =>
          backend.qkNormRopeAttentionMatmul(s.projected, out, q, k, v, qNorm, kNorm, positions, EPS, 10000, stepSlots, kv, shape, oWeight, residual),
      };
      for (const [name, op] of Object.entries(ops)) {
        const what = `${name}, sequences at ${shapes.map(([, position]) => position).join(" and ")}`;
        const [fused, apart] = [side(rows, hiddenWidth, 8, 30 + rows), side(rows, hiddenWidth, 8, 30 + rows)];
        const [out, outApart] = [backend.allocate(rows * width), backend.allocate(rows * width)];
        expect(op(fused, out, residualOf(fused, ffnNorm)), what).toBe("normed");
        backend.rmsNormMatmuls(fused.normed, fused.hidden, undefined, ffnNorm, EPS, fused.outs, nextWeights, rows); // takes the kept codes
        expect(op(apart, outApart)).not.toBe("normed");
        backend.addRmsNorm(apart.normed, apart.hidden, apart.projected, ffnNorm, rows, EPS);
        backend.rmsNormMatmuls(apart.normed, apart.hidden, undefined, ffnNorm, EPS, apart.outs, nextWeights, rows);
        same(what, [
          ["attention", out, outApart],
          ["projected", fused.projected, apart.projected],
          ["hidden", fused.hidden, apart.hidden],
          ["normed", fused.normed, apart.normed],
          ["q8_0 out", fused.outs[0]!, apart.outs[0]!],
          ["q4_K out", fused.outs[1]!, apart.outs[1]!],
        ]);
      }
    }
  }, 240_000);

  it("declines where the tail does not apply (nothing added), and bad residual buffers are errors, with nothing done", () => {
    const [width, ffn] = [256, 512];
    // 3 rows (one block would norm them all), a q4_0 down projection, the option off: done without the norm
    const off = CudaBackend.create({ fusedNorm: false, fusedFeedForward: true });
    try {
      expect(off.fusedNorm).toBe(false);
      expect(backend.fusedNorm).toBe(true);
      for (const [what, on, rows, downType] of [
        ["3 rows", backend, 3, GGMLType.Q8_0],
        ["q4_0 down", backend, 1, GGMLType.Q4_0],
        ["fusedNorm off", off, 1, GGMLType.Q8_0],
      ] as const) {
        const s = side(rows, width, ffn, 8, on);
        const before = on.read(s.hidden);
        const [gate, up, down, next] = [weight(GGMLType.Q8_0, width, ffn, 1, on), weight(GGMLType.Q8_0, width, ffn, 2, on), weight(downType, ffn, width, 3, on), norm(width, 5, on)];
        const residual = { hidden: s.hidden, normed: s.normed, weight: next, eps: EPS };
        expect(on.rmsNormSwigluMatmul(s.normed, s.hidden, undefined, next, EPS, s.gate, s.up, gate, up, s.projected, down, rows, residual), what).toBe(true);
        expect(firstDifference(on.read(s.hidden), before), `${what}: hidden left as it was`).toBe(-1);
      }
    } finally {
      off.dispose();
    }
    // a norm weight of another width; hidden overlapping the projection (the library's check)
    const [gate, up, down, next] = [weight(GGMLType.Q8_0, width, ffn, 1), weight(GGMLType.Q8_0, width, ffn, 2), weight(GGMLType.Q8_0, ffn, width, 3), norm(width, 5)];
    const s = side(1, width, ffn, 9);
    const call = (residual: ResidualNorm) => backend.rmsNormSwigluMatmul(s.normed, s.hidden, undefined, next, EPS, s.gate, s.up, gate, up, s.projected, down, 1, residual);
    expect(() => call({ hidden: s.hidden, normed: s.normed, weight: norm(128, 6), eps: EPS })).toThrow(/residual norm's weight has 128 values for a projection of 256 features/);
    const [hidden, normed] = [backend.read(s.hidden), backend.read(s.normed)];
    expect(() => call({ hidden: s.projected, normed: s.normed, weight: next, eps: EPS })).toThrow(CudaError);
    expect(() => call({ hidden: s.hidden, normed: s.hidden, weight: next, eps: EPS })).toThrow(/must not overlap/);
    expect(firstDifference(backend.read(s.hidden), hidden), "nothing done: hidden").toBe(-1);
    expect(firstDifference(backend.read(s.normed), normed), "nothing done: normed").toBe(-1);
  });
});
