/**
 * Weights repacked on upload (CudaBackendOptions.repackWeights, memra_cuda_repack): a q8_0 or q4_0
 * matrix whose rows are a multiple of 256 values, or a q6_K one of 2,048, is rewritten in place so that
 * each 8 blocks' scales come first and their codes after, 8- and 16-byte aligned. Every kernel that
 * reads such a weight (the decode matrix-vector kernels, the GEMMs, the embedding, the expert
 * kernels) must give bit for bit what it gives on the file's layout: each side here is a backend
 * with the repack and one without, on the same bytes. Runs on a GPU, or on the CPU emulator when MEMRA_CUDA_LIBRARY
 * names libmemra_cuda_emulated.so.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type DeviceBuffer, type WeightHandle } from "@memra/core";
import { firstDifference, normals, tensorInfo, weightBytes } from "@memra/core/internal";
import { GGMLType } from "@memra/gguf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend, type CudaBackendOptions } from "./cuda-backend";
import { CudaError } from "./errors";

const unavailable = cudaUnavailableReason();

/** The type id the library's calls get for a weight (200, 201, 202: repacked q8_0, q6_K, q4_0). */
const kernelType = (w: WeightHandle) => (w as unknown as { kernelType: number }).kernelType;

describe.skipIf(unavailable !== undefined)(`q8_0, q4_0 and q6_K weights in the aligned layouts${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  /** A backend with the repack (packed) and one without (plain), on the same options otherwise. */
  interface Pair {
    packed: CudaBackend;
    plain: CudaBackend;
  }
  const pairs: CudaBackend[] = [];
  const pairOf = (options: CudaBackendOptions = {}): Pair => {
    const pair = { packed: CudaBackend.create({ ...options, repackWeights: true }), plain: CudaBackend.create({ ...options, repackWeights: false }) };
    pairs.push(pair.packed, pair.plain);
    return pair;
  };
  let pair: Pair;
  beforeAll(() => {
    pair = pairOf();
  });
  afterAll(() => {
    for (const backend of pairs) backend.dispose();
  });

  const upload = (on: CudaBackend, type: GGMLType, shape: number[], seed: number) => {
    const data = weightBytes(type, normals(shape.reduce((a, b) => a * b, 1), seed, 0.05), seed + 1);
    return on.uploadWeight(tensorInfo(`w${seed}`, type, shape, data), data);
  };
  const weights = (p: Pair, shape: number[], seed: number, type: GGMLType = GGMLType.Q8_0) => [upload(p.packed, type, shape, seed), upload(p.plain, type, shape, seed)] as const;
  const buffers = (p: Pair, values: Float32Array) =>
    [p.packed, p.plain].map((b) => {
      const buffer = b.allocate(values.length);
      b.write(buffer, values);
      return buffer;
    }) as [DeviceBuffer, DeviceBuffer];
  const same = (p: Pair, what: string, a: DeviceBuffer, b: DeviceBuffer) => {
    const [x, y] = [p.packed.read(a), p.plain.read(b)];
    expect(x.some((v) => v !== 0), `${what}: not all zeros`).toBe(true);
    expect(firstDifference(x, y), what).toBe(-1);
  };
  /** Table rows `tokens` of a [width, rows] table of `type`, on both sides. */
  const sameEmbedding = (type: GGMLType, width: number, tableRows: number, tokens: Int32Array, seed: number) => {
    const [table, tablePlain] = weights(pair, [width, tableRows], seed, type);
    const [rows, rowsPlain] = [pair.packed.allocate(tokens.length * width), pair.plain.allocate(tokens.length * width)];
    pair.packed.embedding(rows, table, tokens);
    pair.plain.embedding(rowsPlain, tablePlain, tokens);
    same(pair, `${type}: embedding`, rows, rowsPlain);
  };
  /** Experts of these gate/up and down types ([width, ffn, experts] and [ffn, width, experts]); for
   * each row count, moeExperts on both sides (and first expertMatmul of expert 2 of the gate, with `matmul`). */
  const sameExperts = (types: readonly [GGMLType, GGMLType, GGMLType], width: number, ffn: number, counts: readonly number[], seed: number, matmul: boolean) => {
    const [experts, k] = [4, 2];
    const [gate, gatePlain] = weights(pair, [width, ffn, experts], seed, types[0]);
    const [up, upPlain] = weights(pair, [width, ffn, experts], seed + 1, types[1]);
    const [down, downPlain] = weights(pair, [ffn, width, experts], seed + 2, types[2]);
    for (const count of counts) {
      const [x, xPlain] = buffers(pair, normals(count * width, count, 1));
      if (matmul) {
        const [out, outPlain] = [pair.packed.allocate(count * ffn), pair.plain.allocate(count * ffn)];
        pair.packed.expertMatmul(out, x, gate, 2, count);
        pair.plain.expertMatmul(outPlain, xPlain, gatePlain, 2, count);
        same(pair, `expertMatmul, ${count} rows`, out, outPlain);
      }
      const [logits, logitsPlain] = buffers(pair, normals(count * experts, seed + count, 2));
      const [moe, moePlain] = [pair.packed.allocate(count * width), pair.plain.allocate(count * width)];
      expect(pair.packed.moeExperts(moe, x, logits, { gate, up, down }, count, experts, k)).toBe(true);
      expect(pair.plain.moeExperts(moePlain, xPlain, logitsPlain, { gate: gatePlain, up: upPlain, down: downPlain }, count, experts, k)).toBe(true);
      same(pair, `moeExperts, ${count} rows`, moe, moePlain);
    }
  };

  it("repacks the q8_0 and q4_0 matrices whose rows are a multiple of 256 values and the q6_K ones of 2,048, and nothing else", () => {
    expect(kernelType(upload(pair.packed, GGMLType.Q8_0, [512, 96], 1))).toBe(200);
    expect(kernelType(upload(pair.packed, GGMLType.Q8_0, [256, 8, 3], 2))).toBe(200); // experts
    expect(kernelType(upload(pair.packed, GGMLType.Q8_0, [288, 96], 3))).toBe(GGMLType.Q8_0); // 9 blocks a row
    expect(kernelType(upload(pair.packed, GGMLType.Q8_0, [512], 4))).toBe(GGMLType.Q8_0); // a vector
    expect(kernelType(upload(pair.packed, GGMLType.Q4_0, [512, 96], 5))).toBe(202);
    expect(kernelType(upload(pair.packed, GGMLType.Q4_K, [512, 96], 5))).toBe(GGMLType.Q4_K); // aligned as it is
    expect(kernelType(upload(pair.plain, GGMLType.Q8_0, [512, 96], 6))).toBe(GGMLType.Q8_0);
    expect(kernelType(upload(pair.packed, GGMLType.Q6_K, [2048, 8], 7))).toBe(201);
    expect(kernelType(upload(pair.packed, GGMLType.Q6_K, [1024, 8], 8))).toBe(GGMLType.Q6_K); // 4 blocks a row
    expect(kernelType(upload(pair.plain, GGMLType.Q6_K, [2048, 8], 9))).toBe(GGMLType.Q6_K);
  });

  it("matmul on q8_0 codes: the decode kernels of 1, 2, 3-4 and 5-8 rows (one warp a feature and split), the int8 GEMM of 9 rows and more; q4_0 too", () => {
    // 256 inputs: one 8-block group a row; 1,024: four (a 4-step iteration of the q8_0 kernel);
    // 2,560: ten (a last iteration of 2 of its 4 steps). 40 features: a split over warps (few
    // features); 1,056: not. q4_0: the __dp4a codes kernel and the same int8 GEMM.
    for (const [type, nIn, nOut] of [
      [GGMLType.Q8_0, 256, 40],
      [GGMLType.Q8_0, 1024, 1056],
      [GGMLType.Q8_0, 2560, 40],
      [GGMLType.Q4_0, 256, 40],
      [GGMLType.Q4_0, 1024, 1056],
    ] as const) {
      const [packed, plain] = weights(pair, [nIn, nOut], nIn + nOut, type);
      for (const rows of [1, 2, 3, 7, 16, 130]) {
        const [x, xPlain] = buffers(pair, normals(rows * nIn, rows + nIn, 1));
        const [out, outPlain] = [pair.packed.allocate(rows * nOut), pair.plain.allocate(rows * nOut)];
        pair.packed.matmul(out, x, packed, rows);
        pair.plain.matmul(outPlain, xPlain, plain, rows);
        same(pair, `${type}: ${rows} × ${nIn} → ${nOut}`, out, outPlain);
      }
    }
  });

  it("q6_K: the __dp4a decode kernel (1, 2, 3-4 and 5-8 rows, one warp a feature and split), the integer GEMM, f32 activations, embedding rows and experts", () => {
    // 2,048 inputs: one 8-block group a row; 4,096: two. 24 features: split over warps; 520: not.
    const f32 = pairOf({ activationRounding: false });
    for (const [p, label, shapes, rowCounts] of [
      [pair, "q8_K codes", [[2048, 24], [4096, 520]], [1, 2, 3, 7, 16]],
      [f32, "f32 activations", [[2048, 24]], [1, 16]],
    ] as const) {
      for (const [nIn, nOut] of shapes) {
        const [packed, plain] = weights(p, [nIn, nOut], nIn + nOut, GGMLType.Q6_K);
        expect(kernelType(packed)).toBe(201);
        for (const rows of rowCounts) {
          const [x, xPlain] = buffers(p, normals(rows * nIn, rows + nIn, 1));
          const [out, outPlain] = [p.packed.allocate(rows * nOut), p.plain.allocate(rows * nOut)];
          p.packed.matmul(out, x, packed, rows);
          p.plain.matmul(outPlain, xPlain, plain, rows);
          same(p, `${label}: ${rows} × ${nIn} → ${nOut}`, out, outPlain);
        }
      }
    }
    sameEmbedding(GGMLType.Q6_K, 2048, 12, Int32Array.of(11, 0, 5), 12);
    // experts: q6_K gate and up of 2,048 inputs, a q8_0 down projection of 256; per pair and grouped
    sameExperts([GGMLType.Q6_K, GGMLType.Q6_K, GGMLType.Q8_0], 2048, 256, [1, 40], 13, false);
  });

  it("matmul on f32 activations: the f32 matrix-vector kernel and the f16 GEMM", () => {
    const p = pairOf({ activationRounding: false });
    for (const type of [GGMLType.Q8_0, GGMLType.Q4_0]) {
      const [packed, plain] = weights(p, [512, 72], 7, type);
      for (const rows of [1, 5, 40]) {
        const [x, xPlain] = buffers(p, normals(rows * 512, rows, 1));
        const [out, outPlain] = [p.packed.allocate(rows * 72), p.plain.allocate(rows * 72)];
        p.packed.matmul(out, x, packed, rows);
        p.plain.matmul(outPlain, xPlain, plain, rows);
        same(p, `${type}: ${rows} rows`, out, outPlain);
      }
    }
  });

  it("matmul on codes without the int8 GEMM (MEMRA_CUDA_INT8_GEMM=0: the integer GEMM, in a child process, as the variable is read when a context is created)", () => {
    const url = (file: string) => JSON.stringify(fileURLToPath(new URL(file, import.meta.url)));
    const script = `
      const { CudaBackend } = await import(${url("./cuda-backend.ts")});
      const { firstDifference, normals, tensorInfo, weightBytes } = await import(${url("../../core/src/internal.ts")});
      const results = [];
      const backends = [CudaBackend.create({ repackWeights: true }), CudaBackend.create({ repackWeights: false })];
      for (const type of [8, 2]) {
      const data = weightBytes(type, normals(512 * 72, 7, 0.05), 8);
      const ws = backends.map((b) => b.uploadWeight(tensorInfo("w", type, [512, 72], data), data));
      for (const rows of [16, 40]) {
        const outs = backends.map((b, i) => {
          const x = b.allocate(rows * 512);
          b.write(x, normals(rows * 512, rows, 1));
          const out = b.allocate(rows * 72);
          b.matmul(out, x, ws[i], rows);
          return b.read(out);
        });
        results.push({ rows, kernelType: ws[0].kernelType, nonzero: outs[0].some((v) => v !== 0), difference: firstDifference(outs[0], outs[1]) });
      }
      }
      for (const b of backends) b.dispose();
      console.log(JSON.stringify(results));`;
    const result = spawnSync(process.execPath.includes("bun") ? process.execPath : "bun", ["-e", script], {
      env: { ...process.env, MEMRA_CUDA_INT8_GEMM: "0" },
      encoding: "utf8",
    });
    expect(result.status, result.stderr).toBe(0);
    const results = JSON.parse(result.stdout.trim().split("\n").at(-1)!) as { rows: number; kernelType: number; nonzero: boolean; difference: number }[];
    expect(results.map((r) => r.kernelType)).toEqual([200, 200, 202, 202]);
    for (const r of results) expect(r, `${r.kernelType}: ${r.rows} rows`).toEqual({ rows: r.rows, kernelType: r.kernelType, nonzero: true, difference: -1 });
  });

  it("embedding rows, expertMatmul and moeExperts (per pair and grouped GEMMs) of repacked weights", () => {
    for (const type of [GGMLType.Q8_0, GGMLType.Q4_0]) sameEmbedding(type, 256, 40, Int32Array.of(0, 39, 7, 7, 20), 8);
    // a q8_0 gate (expertMatmul too) and down, a q4_0 up: both types' expert kernels
    sameExperts([GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q8_0], 256, 512, [1, 3, 40], 9, true);
  });

  it("gives a weight's memory back to the allocator when its upload fails (inside a graph capture)", () => {
    const data = weightBytes(GGMLType.Q8_0, normals(512 * 64, 3, 0.05), 4);
    const before = pair.packed.memoryInfo().cachedBytes;
    expect(() => pair.packed.captureGraph!(() => void pair.packed.uploadWeight(tensorInfo("late", GGMLType.Q8_0, [512, 64], data), data))).toThrow(/cannot upload/);
    expect(pair.packed.memoryInfo().cachedBytes - before).toBeGreaterThanOrEqual(data.byteLength);
  });

  it("refuses rows that are not a multiple of 256 values, data too small for its shape, and repacked data that is not 16-byte aligned", () => {
    const backend = pair.packed as unknown as { library: CudaBackend["library"]; context(): unknown };
    const buffer = pair.packed.allocate(4 * 68);
    const repack = (bytes: number, rows: number, n: number) =>
      backend.library.call("memra_cuda_repack", backend.context() as never, GGMLType.Q8_0, (buffer as unknown as { pointer: number }).pointer as never, bytes, rows, n);
    expect(() => repack(4 * 272, 1, 288)).toThrow(CudaError);
    expect(() => repack(4 * 272, 1, 288)).toThrow(/memra_cuda_repack: rows of 288 values of type 8 have no repacked layout/);
    expect(() => repack(272, 2, 256)).toThrow(/data has 272 bytes, its shape needs 544/);
    expect(() => repack(4 * 272, 1, 256)).not.toThrow();
    // a kernel given q8_0_x8 data that is not 16-byte aligned (its 8- and 16-byte loads would fault)
    const out = pair.packed.allocate(256) as unknown as { pointer: number };
    const at = (buffer as unknown as { pointer: number }).pointer;
    for (const [offset, fails] of [
      [2, true],
      [16, false],
    ] as const) {
      const dequantize = () => backend.library.call("memra_cuda_dequantize", backend.context() as never, out.pointer as never, 256, 200, (at + offset) as never, 272, 256);
      if (fails) expect(dequantize).toThrow(/memra_cuda_dequantize: data \(q8_0_x8\) must be 16-byte aligned/);
      else expect(dequantize).not.toThrow();
    }
  });
});
