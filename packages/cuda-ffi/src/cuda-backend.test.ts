/**
 * CudaBackend. Without a GPU (this file's first part, run everywhere): importing the package loads
 * nothing, and using it fails with CudaUnavailableError carrying the driver's message; the launch
 * plans answer through the library. With a GPU (the second part, skipped with the reason
 * otherwise): every op against the reference backend on the same seeded random inputs, by
 * NMSE = Σ(cuda − reference)² / Σ reference². The reference rounds activations as ggml's CPU matmul
 * does (q8_0 / q8_1 / q8_K / f16 / bf16 per weight type), as the CUDA backend does by default.
 * On a machine without a GPU these run on the CPU emulator of native/cuda when
 * MEMRA_CUDA_LIBRARY names libmemra_cuda_emulated.so (CI does).
 *
 * Bounds (measured on the emulator; the GPU's summation order differs, not its products):
 * - f32 row and elementwise ops, attention, routing weights: 1e-10 (f32 arithmetic against the
 *   reference's double: ~1e-14 expected).
 * - embedding, gatherRows: exact (same dequantization formulas, no FMA contraction).
 * - prefill attention over an f16 cache (the flash kernel): 1e-7 (Q and P rounded to f16 for the
 *   tensor cores, as llama.cpp's CPU matmuls round them against f16 K and V; measured 2.7e-8).
 * - matmul, every weight type and row count: 1e-12. Decode and f32 weights: the matrix-vector
 *   kernel's f32 products of the rounded activations (measured ≤ 1.2e-14). Prefill of quantized
 *   weights: the integer GEMMs (int8 tensor cores for q8_0/q4_0/q5_0, cuda-int8-gemm.test.ts; the
 *   f16 GEMM over integer codes for the others), exact q8 × weight-code products (≤ 1.9e-14). f16 / bf16 prefill:
 *   the f16 GEMM, exact for these magnitudes (f16 1.4e-13, bf16 2.6e-14).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type Backend, type BackendGraph, type DeviceBuffer, type KVStorage, KVStorageDisposedError, ReferenceBackend, resolveRopeScaling } from "@memra/core";
import { GGMLType, ggmlTypeName, quantize } from "@memra/gguf";
import { ALL_GGML_TYPES, BackendPair, firstDifference, expectKVRowsPortable, expectRotateKVMatches, nmse, normals, pagedLayout, tensorInfo, weightBytes } from "@memra/core/internal";
import { Candidates, argmax, topK } from "@memra/sampler";
import { mulberry32 } from "@memra/synthetic";
import { type Pointer, ptr } from "bun:ffi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";
import { CudaBackendDisposedError, CudaError, CudaUnavailableError } from "./errors";
import { cudaLibraryCandidates, openMemraCudaLibrary } from "./native-library";

const libraryBuilt = (() => {
  try {
    openMemraCudaLibrary();
    return true;
  } catch {
    return false;
  }
})();
const unavailable = cudaUnavailableReason();

describe("without a GPU", () => {
  it("importing the package loads nothing; cudaAvailable() and create() report the missing library", () => {
    const index = fileURLToPath(new URL("./index.ts", import.meta.url));
    const script = `const m = await import(${JSON.stringify(index)}); console.log(typeof m.CudaBackend, m.cudaAvailable());
      try { m.CudaBackend.create(); } catch (e) { console.log(e.name, e.kind, e.message); }`;
    const result = spawnSync(process.execPath.includes("bun") ? process.execPath : "bun", ["-e", script], {
      env: { ...process.env, MEMRA_CUDA_LIBRARY: "/nonexistent/libmemra_cuda.so" },
      encoding: "utf8",
    });
    expect(result.stderr).toBe("");
    const [first, second] = result.stdout.trim().split("\n");
    expect(first).toBe("function false");
    expect(second).toMatch(/^CudaUnavailableError library-missing CUDA is unavailable: \/nonexistent\/libmemra_cuda.so not found; MEMRA_CUDA_LIBRARY names a file/);
  });

  it("create() with a library path that does not exist throws CudaUnavailableError", () => {
    expect(() => CudaBackend.create({ libraryPath: "/nonexistent/libmemra_cuda.so" })).toThrow(CudaUnavailableError);
    expect(() => CudaBackend.create({ device: -1 })).toThrow(RangeError);
  });

  it.skipIf(!libraryBuilt)(`the built library loads and plans launches without a GPU${libraryBuilt ? "" : ` (skipped: ${cudaLibraryCandidates().join(", ")} not built)`}`, () => {
    const library = openMemraCudaLibrary();
    expect(library.version).toMatch(/^\d+\.\d+\.\d+$/);
    const plan = new BigInt64Array(7);
    library.call("memra_cuda_plan_matmul", GGMLType.Q8_0, 1, 4096, 4096, plan, 7);
    expect(Array.from(plan, Number)).toEqual([1, 1024, 1, 1, 128, 0, 1]); // matrix-vector, 4 output rows per block
    library.call("memra_cuda_plan_matmul", GGMLType.Q4_K, 512, 4096, 12288, plan, 7);
    expect(Array.from(plan, Number)).toEqual([2, 192, 8, 1, 128, 0, 512]); // tensor-core GEMM, 64 × 64 tiles
    let error: unknown;
    try {
      library.call("memra_cuda_plan_matmul", GGMLType.TQ1_0, 1, 256, 4, plan, 7);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CudaError).status).toBe(2);
    expect((error as CudaError).message).toMatch(/memra_cuda_plan_matmul: weight type 34 has no CUDA matmul kernel/);
  });

  it.skipIf(!libraryBuilt || unavailable === undefined)("create() on a machine without a driver or GPU: CudaUnavailableError with the driver's message", () => {
    let error: unknown;
    try {
      CudaBackend.create();
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CudaUnavailableError);
    expect((error as CudaUnavailableError).kind).toBe("no-device");
    expect((error as Error).message).toMatch(/CUDA is unavailable: memra_cuda_device_count: no usable CUDA device: .*(driver|device)/i);
    expect(unavailable).toBe((error as Error).message);
  });
});

// ---- with a GPU ----

/** Qwen3's 128K setting (YaRN, factor 4 over 32,768 tokens) and a linear scaling by 2 (the correction dims of head_dim 128, used at 64 too: any values are a scaling to compare with). */
const YARN = resolveRopeScaling({ ropeFreqBase: 1e6, contextLength: 32768 }, 128, { type: "yarn", factor: 4, originalContextLength: 32768 })!;
const LINEAR = resolveRopeScaling({ ropeFreqBase: 1e6, contextLength: 40960 }, 128, { type: "linear", factor: 2 })!;
const EXACT_ELEMENTWISE_BOUND = 1e-10;
const VECTOR_MATMUL_BOUND = 1e-12;
const GEMM_BOUND = 1e-12;
const FLASH_ATTENTION_BOUND = 1e-7;
/**
 * moeExperts over 40 or more rows (the grouped GEMMs): gate and up, SwiGLU, then the down
 * projection's input rounded (q8 codes, or f16/bf16). A last-bit difference in gate or up (the
 * GEMM adds in another order than the reference) can move a hidden value across a rounding
 * boundary, one code step: about one value in 30,000 here, each such row then off by 1e-11..1e-5
 * relative (measured on the emulator: NMSE ≤ 1.3e-8 over 400 rows). A wrong row (expert, tile or
 * slot) is off by order one: NMSE above 1e-4.
 */
const MOE_CHAIN_BOUND = 1e-7;

describe.skipIf(unavailable !== undefined)(`CudaBackend ops against the reference backend${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let backend: CudaBackend;
  let pair: BackendPair;
  beforeAll(() => {
    // the fused decode ops (off by default) are what these tests check
    backend = CudaBackend.create({ fusedFeedForward: true, fusedNorm: true });
    pair = new BackendPair(backend, new ReferenceBackend());
  });
  afterAll(() => backend?.dispose());

  const matmulTypes = () => ALL_GGML_TYPES.filter((type) => backend.supportsOp("matmul", type));

  it("reports its device and supports the weight types it has kernels for", () => {
    const info = backend.deviceInfo();
    expect(info.computeCapability).toBeGreaterThanOrEqual(80);
    expect(info.name.length).toBeGreaterThan(0);
    // programmatic dependent launch: on sm_90 GPUs unless turned off; the emulator runs launches in order
    const emulated = info.name.includes("emulator");
    expect(info.programmaticLaunch).toBe(!emulated && info.computeCapability >= 90 && process.env.MEMRA_CUDA_PDL !== "0");
    expect(matmulTypes().map(ggmlTypeName)).toEqual(
      expect.arrayContaining([
        ...["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"],
        ...["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"],
      ]),
    );
    expect(backend.supportsOp("matmul", GGMLType.TQ1_0)).toBe(false);
    expect(backend.supportsOp("attention")).toBe(true);
  });

  it.each([
    [1, "decode, matrix-vector", VECTOR_MATMUL_BOUND],
    [5, "small batch, matrix-vector", VECTOR_MATMUL_BOUND],
    [70, "prefill, tensor-core GEMMs over two row tiles", GEMM_BOUND],
  ])("matmul, every supported weight type, %i row(s) (%s)", (rows, _what, bound) => {
    const [nIn, nOut] = [512, 37];
    const results: Record<string, number> = {};
    for (const type of matmulTypes()) {
      const data = weightBytes(type, normals(nIn * nOut, 1000 + type, 0.05), 2000 + type);
      const [w, wRef] = pair.weights(tensorInfo(`w.${ggmlTypeName(type)}`, type, [nIn, nOut], data), data);
      const [x, xRef] = pair.buffers(normals(rows * nIn, 3000 + rows));
      const out = pair.native.allocate(rows * nOut);
      const outRef = pair.reference.allocate(rows * nOut);
      pair.native.matmul(out, x, w, rows);
      pair.reference.matmul(outRef, xRef, wRef, rows);
      results[ggmlTypeName(type)] = nmse(pair.native.read(out), pair.reference.read(outRef));
    }
    if (process.env.MEMRA_PRINT_NMSE) console.log(rows, results);
    expect(Object.keys(results).length).toBeGreaterThanOrEqual(22); // every type of the CPU backend
    for (const [type, error] of Object.entries(results)) expect(error, `matmul ${type} NMSE`).toBeLessThanOrEqual(bound);
  });

  it("q8_0 decode reads rows of any block count (a warp takes 8 blocks a step)", () => {
    for (const nIn of [32, 96, 256, 1056]) {
      for (const rows of [1, 3, 8]) {
        const nOut = 13;
        const data = quantize(GGMLType.Q8_0, normals(nIn * nOut, 5000 + nIn, 0.05));
        const [w, wRef] = pair.weights(tensorInfo("w", GGMLType.Q8_0, [nIn, nOut], data), data);
        const [x, xRef] = pair.buffers(normals(rows * nIn, 5100 + rows));
        const out = pair.native.allocate(rows * nOut);
        const outRef = pair.reference.allocate(rows * nOut);
        pair.native.matmul(out, x, w, rows);
        pair.reference.matmul(outRef, xRef, wRef, rows);
        expect(nmse(...pair.read([out, outRef])), `${nIn} inputs, ${rows} rows`).toBeLessThanOrEqual(VECTOR_MATMUL_BOUND);
      }
    }
  });

  it("q4_0, q5_0, iq4_nl, q2_K to q6_K, iq4_xs and the iq1/iq2/iq3 types decode multiply the q8_0 / q8_K codes (__dp4a) for any block count and 1 to 8 rows", () => {
    // a warp step is 8 blocks of 32 or one 256-value super-block; rows 1..8 take the 1-, 2-, 4- and 8-row kernels
    const iquants = [GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M];
    for (const type of [GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.IQ4_NL, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_XS, ...iquants]) {
      const small = type === GGMLType.Q4_0 || type === GGMLType.Q5_0 || type === GGMLType.IQ4_NL;
      for (const nIn of small ? [32, 96, 1056] : [256, 768, 4352]) {
        for (const rows of [1, 2, 3, 4, 8]) {
          const nOut = 11;
          const data = weightBytes(type, normals(nIn * nOut, 6000 + nIn + type, 0.05), 6000 + nIn + type);
          const [w, wRef] = pair.weights(tensorInfo("w", type, [nIn, nOut], data), data);
          const [x, xRef] = pair.buffers(normals(rows * nIn, 6100 + rows));
          const out = pair.native.allocate(rows * nOut);
          const outRef = pair.reference.allocate(rows * nOut);
          pair.native.matmul(out, x, w, rows);
          pair.reference.matmul(outRef, xRef, wRef, rows);
          expect(nmse(...pair.read([out, outRef])), `${ggmlTypeName(type)}, ${nIn} inputs, ${rows} rows`).toBeLessThanOrEqual(VECTOR_MATMUL_BOUND);
        }
      }
    }
  });

  it("options: activationRounding false multiplies exact f32 activations; tensorCoreGemm false keeps prefill on the matrix-vector kernel", () => {
    const [nIn, nOut] = [512, 37];
    const exact = new ReferenceBackend({ ggmlActivationRounding: false });
    const cases = [
      // Unrounded: the matrix-vector kernel is exact f32 (1e-12); the f16 GEMM rounds activations to f16.
      { options: { activationRounding: false }, reference: exact, bounds: [1e-12, 1e-5] },
      // Rounded, GEMM off: 70 rows through the matrix-vector kernel, 8 at a time.
      { options: { tensorCoreGemm: false }, reference: new ReferenceBackend(), bounds: [1e-12, 1e-12] },
    ];
    for (const { options, reference, bounds } of cases) {
      const configured = CudaBackend.create(options);
      try {
        const configuredPair = new BackendPair(configured, reference);
        for (const type of [GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q5_1, GGMLType.BF16, GGMLType.IQ1_M]) {
          const data = weightBytes(type, normals(nIn * nOut, 500 + type, 0.05), 500 + type);
          const [w, wRef] = configuredPair.weights(tensorInfo("w", type, [nIn, nOut], data), data);
          for (const [i, rows] of [1, 70].entries()) {
            const [x, xRef] = configuredPair.buffers(normals(rows * nIn, 600 + rows));
            const out = configured.allocate(rows * nOut);
            const outRef = reference.allocate(rows * nOut);
            configured.matmul(out, x, w, rows);
            reference.matmul(outRef, xRef, wRef, rows);
            const error = nmse(configured.read(out), reference.read(outRef));
            expect(error, `${JSON.stringify(options)} ${ggmlTypeName(type)} ${rows} rows`).toBeLessThanOrEqual(bounds[i]!);
          }
        }
      } finally {
        configured.dispose();
      }
    }
  });

  it("matmuls of one input give each weight's matmul bit for bit, for groups of one and of mixed types", () => {
    const nIn = 256;
    const groups: GGMLType[][] = [
      [GGMLType.Q8_0, GGMLType.Q8_0, GGMLType.Q8_0], // q8_0 codes: one rounding, one matrix-vector launch
      [GGMLType.Q4_K, GGMLType.Q4_K, GGMLType.Q6_K], // q8_K values; q6_K in its own launch
      [GGMLType.Q4_1, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_0], // q8_1 with offset correction, q8_0 codes and values
      [GGMLType.F32, GGMLType.F16, GGMLType.BF16],
      // six roundings in one group (q8_0 codes, q8_0 values, q8_1, q8_K, f16, bf16)
      [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q4_K, GGMLType.F16, GGMLType.BF16],
    ];
    for (const [g, types] of groups.entries()) {
      const weights = types.map((type, i) => {
        const data = quantize(type, normals(nIn * (24 + 8 * i), 700 + 10 * g + i, 0.05));
        return backend.uploadWeight(tensorInfo(`w${i}`, type, [nIn, 24 + 8 * i], data), data);
      });
      for (const rows of [1, 5, 70]) {
        const x = backend.allocate(rows * nIn);
        backend.write(x, normals(rows * nIn, 800 + rows));
        const together = weights.map((w) => backend.allocate(rows * w.shape[1]!));
        backend.matmuls(together, x, weights, rows);
        for (const [i, w] of weights.entries()) {
          const alone = backend.allocate(rows * w.shape[1]!);
          backend.matmul(alone, x, w, rows);
          const [a, b] = [backend.read(together[i]!), backend.read(alone)];
          expect(firstDifference(a, b), `${types.map(ggmlTypeName).join("+")} weight ${i}, ${rows} rows`).toBe(-1);
        }
      }
    }
    const data = quantize(GGMLType.Q8_0, normals(512 * 8, 5));
    const wide = backend.uploadWeight(tensorInfo("wide", GGMLType.Q8_0, [512, 8], data), data);
    const narrow = backend.uploadWeight(tensorInfo("narrow", GGMLType.Q8_0, [256, 16], data), data);
    expect(() => backend.matmuls([backend.allocate(8), backend.allocate(16)], backend.allocate(512), [wide, narrow], 1)).toThrow(/"narrow" takes 256 inputs, "wide" 512/);
    const shared = backend.allocate(16);
    expect(() => backend.matmuls([shared, shared], backend.allocate(256), [narrow, narrow], 1)).toThrow(/outputs of weights 0 and 1 overlap/);
  });

  it("rmsNormMatmuls gives (add and) RMSNorm then matmuls bit for bit, the norm fused with q8 roundings", () => {
    const nIn = 256;
    const eps = 1e-6;
    const normData = new Uint8Array(normals(nIn, 41, 1).buffer);
    const normWeight = backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [nIn], normData), normData);
    const groups: GGMLType[][] = [
      [GGMLType.Q8_0, GGMLType.Q8_0, GGMLType.Q8_0], // q8_0 codes: norm and rounding in one kernel
      [GGMLType.Q4_K, GGMLType.Q4_K, GGMLType.Q6_K], // q8_K values
      [GGMLType.Q4_1, GGMLType.Q8_0, GGMLType.Q4_0], // q8_1 fused (first), q8_0 codes and values apart
      [GGMLType.F16, GGMLType.Q8_0], // f16 first: the norm on its own
      [GGMLType.F32, GGMLType.BF16],
    ];
    for (const [g, types] of groups.entries()) {
      const weights = types.map((type, i) => {
        const data = quantize(type, normals(nIn * (24 + 8 * i), 1700 + 10 * g + i, 0.05));
        return backend.uploadWeight(tensorInfo(`w${i}`, type, [nIn, 24 + 8 * i], data), data);
      });
      for (const rows of [1, 5, 70]) {
        for (const withDelta of [true, false]) {
          const what = `${types.map(ggmlTypeName).join("+")}, ${rows} rows, ${withDelta ? "add and norm" : "norm"}`;
          const hiddenValues = normals(rows * nIn, 1800 + rows, 3);
          const delta = backend.allocate(rows * nIn);
          backend.write(delta, normals(rows * nIn, 1900 + rows));
          const run = (fused: boolean) => {
            const hidden = backend.allocate(rows * nIn);
            backend.write(hidden, hiddenValues);
            const normed = backend.allocate(rows * nIn);
            const outs = weights.map((w) => backend.allocate(rows * w.shape[1]!));
            if (fused) backend.rmsNormMatmuls(normed, hidden, withDelta ? delta : undefined, normWeight, eps, outs, weights, rows);
            else {
              if (withDelta) backend.addRmsNorm(normed, hidden, delta, normWeight, rows, eps);
              else backend.rmsNorm(normed, hidden, normWeight, rows, eps);
              backend.matmuls(outs, normed, weights, rows);
            }
            return [hidden, normed, ...outs].map((buffer) => backend.read(buffer));
          };
          const [fused, apart] = [run(true), run(false)];
          expect(firstDifference(fused[0]!, hiddenValues) === -1, `${what}: hidden ${withDelta ? "changed" : "unchanged"}`).toBe(!withDelta);
          for (let i = 0; i < apart.length; i++) expect(firstDifference(fused[i]!, apart[i]!), `${what}: ${["hidden", "normed"][i] ?? `out ${i - 2}`}`).toBe(-1);
        }
      }
    }
    const x = backend.allocate(256);
    const q8 = quantize(GGMLType.Q8_0, normals(256 * 8, 5));
    const w = backend.uploadWeight(tensorInfo("w", GGMLType.Q8_0, [256, 8], q8), q8);
    expect(() => backend.rmsNormMatmuls(x, x, undefined, normWeight, eps, [backend.allocate(8)], [w], 1)).toThrow(/normed, hidden and delta must not overlap/);
    const shortNorm = backend.uploadWeight(tensorInfo("short", GGMLType.F32, [64], normData.subarray(0, 256)), normData.subarray(0, 256));
    expect(() => backend.rmsNormMatmuls(x, backend.allocate(256), undefined, shortNorm, eps, [backend.allocate(8)], [w], 1)).toThrow(/norm_weight/);
  });

  it("swigluMatmul gives swiglu then matmul bit for bit, and leaves gate and up as they were", () => {
    const [nIn, nOut] = [256, 40];
    for (const type of [GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q4_1, GGMLType.F16, GGMLType.BF16, GGMLType.F32]) {
      const data = quantize(type, normals(nIn * nOut, 900 + type, 0.05));
      const w = backend.uploadWeight(tensorInfo("down", type, [nIn, nOut], data), data);
      for (const rows of [1, 5, 70]) {
        const gateValues = normals(rows * nIn, 910 + rows, 2);
        const upValues = normals(rows * nIn, 920 + rows);
        const [gate, up] = [backend.allocate(rows * nIn), backend.allocate(rows * nIn)];
        backend.write(gate, gateValues);
        backend.write(up, upValues);
        const fused = backend.allocate(rows * nOut);
        backend.swigluMatmul(fused, gate, up, w, rows);
        const product = backend.allocate(rows * nIn);
        backend.swiglu(product, gate, up, rows * nIn);
        const apart = backend.allocate(rows * nOut);
        backend.matmul(apart, product, w, rows);
        for (const [actual, expected, what] of [
          [backend.read(fused), backend.read(apart), "out"],
          [backend.read(gate), gateValues, "gate"],
          [backend.read(up), upValues, "up"],
        ] as const) {
          expect(firstDifference(actual, expected), `${ggmlTypeName(type)} ${rows} rows: ${what}`).toBe(-1);
        }
      }
    }
  });

  it("addRmsNorm gives add then rmsNorm bit for bit, within the reference's bound", () => {
    for (const width of [64, 1024, 4096]) {
      const rows = 3;
      const data = new Uint8Array(normals(width, 31, 1).buffer);
      const [w, wRef] = pair.weights(tensorInfo("norm", GGMLType.F32, [width], data), data);
      const hiddenValues = normals(rows * width, 32, 3);
      const deltaValues = normals(rows * width, 33);
      const [hidden, hiddenRef] = pair.buffers(hiddenValues);
      const [delta, deltaRef] = pair.buffers(deltaValues);
      const out = backend.allocate(rows * width);
      const outRef = pair.reference.allocate(rows * width);
      backend.addRmsNorm(out, hidden, delta, w, rows, 1e-6);
      const [apartHidden, apartOut] = [backend.allocate(rows * width), backend.allocate(rows * width)];
      backend.write(apartHidden, hiddenValues);
      backend.add(apartHidden, apartHidden, delta, rows * width);
      backend.rmsNorm(apartOut, apartHidden, w, rows, 1e-6);
      for (const [fused, apart, what] of [
        [hidden, apartHidden, "hidden"],
        [out, apartOut, "normed"],
      ] as const) {
        const [a, b] = [backend.read(fused), backend.read(apart)];
        expect(firstDifference(a, b), `${what}, width ${width}`).toBe(-1);
      }
      pair.reference.add(hiddenRef, hiddenRef, deltaRef, rows * width);
      pair.reference.rmsNorm(outRef, hiddenRef, wRef, rows, 1e-6);
      expect(nmse(...pair.read([out, outRef])), `width ${width}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
    const b = backend.allocate(64);
    const norm = new Uint8Array(64 * 4);
    const w = backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [64], norm), norm);
    expect(() => backend.addRmsNorm(b, b, backend.allocate(64), w, 1, 1e-6)).toThrow(/out, hidden and delta must not overlap/);
  });

  it("qkNormRope gives the QK-norms and RoPEs one by one bit for bit, within the reference's bound, plain and with YaRN or linear scaling", () => {
    const rows = 3;
    const positions = Int32Array.from([0, 17, 4000]);
    for (const [heads, kvHeads, headDim, scaling] of [
      [4, 2, 16, undefined],
      [3, 1, 64, undefined],
      [2, 2, 128, undefined],
      [3, 1, 64, YARN],
      [2, 2, 128, YARN],
      [2, 2, 128, LINEAR],
    ] as const) {
      const weight = (seed: number) => {
        const data = new Uint8Array(normals(headDim, seed, 1).buffer);
        return pair.weights(tensorInfo("norm", GGMLType.F32, [headDim], data), data);
      };
      const [qNorm, qNormRef] = weight(1);
      const [kNorm, kNormRef] = weight(2);
      const qValues = normals(rows * heads * headDim, 3, 2);
      const kValues = normals(rows * kvHeads * headDim, 4, 2);
      const [q, qRef] = pair.buffers(qValues);
      const [k, kRef] = pair.buffers(kValues);
      expect(backend.qkNormRope(q, k, qNorm, kNorm, positions, heads, kvHeads, headDim, 1e-6, 1e6, scaling)).toBe(true);
      const [q1, k1] = [backend.allocate(qValues.length), backend.allocate(kValues.length)];
      backend.write(q1, qValues);
      backend.write(k1, kValues);
      backend.rmsNorm(q1, q1, qNorm, rows * heads, 1e-6);
      backend.rmsNorm(k1, k1, kNorm, rows * kvHeads, 1e-6);
      const rope = (target: Backend, x: DeviceBuffer, n: number) => (scaling ? target.ropeNeoxScaled!(x, positions, n, headDim, 1e6, scaling) : target.ropeNeox(x, positions, n, headDim, 1e6));
      rope(backend, q1, heads);
      rope(backend, k1, kvHeads);
      for (const [fused, apart, what] of [
        [q, q1, "q"],
        [k, k1, "k"],
      ] as const) {
        const [a, b] = [backend.read(fused), backend.read(apart)];
        expect(firstDifference(a, b), `${what}, head_dim ${headDim}, ${scaling ? "scaled" : "plain"}`).toBe(-1);
      }
      pair.reference.rmsNorm(qRef, qRef, qNormRef, rows * heads, 1e-6);
      pair.reference.rmsNorm(kRef, kRef, kNormRef, rows * kvHeads, 1e-6);
      rope(pair.reference, qRef, heads);
      rope(pair.reference, kRef, kvHeads);
      expect(nmse(...pair.read([q, qRef])), `q against the reference, head_dim ${headDim}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
      expect(nmse(...pair.read([k, kRef])), `k against the reference, head_dim ${headDim}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
    const wide = backend.allocate(256);
    const norm = new Uint8Array(256 * 4);
    const w = backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [256], norm), norm);
    expect(backend.qkNormRope(wide, backend.allocate(256), w, w, Int32Array.of(1), 1, 1, 256, 1e-6, 1e6)).toBe(false); // one warp per head: below 256
  });

  it("expertMatmul picks the expert's matrix of a 3-D weight", () => {
    const [nIn, nOut, experts] = [256, 24, 3];
    for (const rows of [4, 40]) {
      for (const type of [GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.F16, GGMLType.Q3_K, GGMLType.IQ4_NL, GGMLType.IQ2_XS, GGMLType.IQ1_M]) {
        const data = weightBytes(type, normals(nIn * nOut * experts, 40 + type, 0.05), 45 + type);
        const [w, wRef] = pair.weights(tensorInfo("experts", type, [nIn, nOut, experts], data), data);
        const [x, xRef] = pair.buffers(normals(rows * nIn, 41));
        for (let expert = 0; expert < experts; expert++) {
          const out = pair.native.allocate(rows * nOut);
          const outRef = pair.reference.allocate(rows * nOut);
          pair.native.expertMatmul(out, x, w, expert, rows);
          pair.reference.expertMatmul(outRef, xRef, wRef, expert, rows);
          expect(nmse(pair.native.read(out), pair.reference.read(outRef)), `${ggmlTypeName(type)} expert ${expert}`).toBeLessThanOrEqual(rows > 8 ? GEMM_BOUND : VECTOR_MATMUL_BOUND);
        }
      }
    }
  });

  it("embedding dequantizes table rows exactly like the reference", () => {
    const [width, vocabulary] = [256, 10];
    const tokens = Int32Array.from([3, 0, 9, 3]);
    for (const type of ALL_GGML_TYPES.filter((t) => backend.supportsOp("embedding", t))) {
      const data = weightBytes(type, normals(width * vocabulary, 60 + type, 0.1), 61);
      const [table, tableRef] = pair.weights(tensorInfo("token_embd.weight", type, [width, vocabulary], data), data);
      const out = pair.native.allocate(tokens.length * width);
      const outRef = pair.reference.allocate(tokens.length * width);
      pair.native.embedding(out, table, tokens);
      pair.reference.embedding(outRef, tableRef, tokens);
      expect(pair.native.read(out), `embedding ${ggmlTypeName(type)}`).toEqual(pair.reference.read(outRef));
    }
  });

  it("rmsNorm (in place, f32 and f16 weights), ropeNeox, swiglu, add", () => {
    const [rows, width] = [40, 1024];
    for (const type of [GGMLType.F32, GGMLType.F16]) {
      const data = quantize(type, normals(width, 70, 0.5));
      const [w, wRef] = pair.weights(tensorInfo("norm", type, [width], data), data);
      const [x, xRef] = pair.buffers(normals(rows * width, 71, 2));
      pair.native.rmsNorm(x, x, w, rows, 1e-6);
      pair.reference.rmsNorm(xRef, xRef, wRef, rows, 1e-6);
      expect(nmse(...pair.read([x, xRef])), `rmsNorm ${ggmlTypeName(type)}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
    for (const [heads, headDim, freqBase] of [
      [4, 64, 10000],
      [8, 128, 1000000],
    ] as const) {
      const positions = Int32Array.from([0, 1, 2, 7, 100, 4095, 30000]);
      const [x, xRef] = pair.buffers(normals(positions.length * heads * headDim, 80 + headDim));
      pair.native.ropeNeox(x, positions, heads, headDim, freqBase);
      pair.reference.ropeNeox(xRef, positions, heads, headDim, freqBase);
      expect(nmse(...pair.read([x, xRef])), `rope headDim ${headDim}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
    // RoPE scaling: YaRN (Qwen3's 128K setting, and a ramp over most pairs) and linear.
    for (const [heads, headDim, freqBase, options] of [
      [4, 64, 10000, { type: "yarn", factor: 4, originalContextLength: 256 }],
      [8, 128, 1000000, { type: "yarn", factor: 4, originalContextLength: 32768 }],
      [4, 64, 10000, { type: "linear", factor: 2 }],
    ] as const) {
      const scaling = resolveRopeScaling({ ropeFreqBase: freqBase, contextLength: 40960 }, headDim, options)!;
      const positions = Int32Array.from([0, 1, 2, 7, 100, 4095, 30000, 131071]);
      const [x, xRef] = pair.buffers(normals(positions.length * heads * headDim, 90 + headDim));
      pair.native.ropeNeoxScaled!(x, positions, heads, headDim, freqBase, scaling);
      pair.reference.ropeNeoxScaled!(xRef, positions, heads, headDim, freqBase, scaling);
      expect(nmse(...pair.read([x, xRef])), `${options.type} rope headDim ${headDim}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
    for (const length of [100, 200_000]) {
      const [gate, gateRef] = pair.buffers(normals(length, 100, 3));
      const [up, upRef] = pair.buffers(normals(length, 101));
      pair.native.swiglu(gate, gate, up, length);
      pair.reference.swiglu(gateRef, gateRef, upRef, length);
      expect(nmse(...pair.read([gate, gateRef])), `swiglu ${length}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
      pair.native.add(up, up, gate, length);
      pair.reference.add(upRef, upRef, gateRef, length);
      expect(nmse(...pair.read([up, upRef])), `add ${length}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
  });

  it.each([64, 128])("paged attention, several sequences through block tables, f32/f16/q8_0 KV, head_dim %i", (headDim) => {
    const [heads, kvHeads, blockTokens, blocks] = [4, 2, 4, 40];
    const kvWidth = kvHeads * headDim;
    const random = mulberry32(93);
    for (const type of ["f32", "f16", "q8_0"] as const) {
      const keys = pair.native.allocateKV(type, blocks * blockTokens, kvWidth);
      const values = pair.native.allocateKV(type, blocks * blockTokens, kvWidth);
      const keysRef = pair.reference.allocateKV(type, blocks * blockTokens, kvWidth);
      const valuesRef = pair.reference.allocateKV(type, blocks * blockTokens, kvWidth);
      const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
      const [k, kRef] = pair.buffers(normals(slots.length * kvWidth, 90));
      const [v, vRef] = pair.buffers(normals(slots.length * kvWidth, 91));
      pair.native.writeKV(keys, slots, k);
      pair.native.writeKV(values, slots, v);
      pair.reference.writeKV(keysRef, slots, kRef);
      pair.reference.writeKV(valuesRef, slots, vRef);
      const shapes = [
        [1, 0],
        [1, 29],
        [7, 5],
        [30, 0],
        [70, 50], // two query tiles and four KV tiles of the flash kernel
      ] as const;
      const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => Math.floor(random() * blocks));
      const [q, qRef] = pair.buffers(normals(rows * heads * headDim, 92));
      const out = pair.native.allocate(rows * heads * headDim);
      const outRef = pair.reference.allocate(rows * heads * headDim);
      const shape = { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      pair.native.attention(out, q, { keys, values, blockTokens, blockTables, sequences }, shape);
      pair.reference.attention(outRef, qRef, { keys: keysRef, values: valuesRef, blockTokens, blockTables, sequences }, shape);
      // f16 KV and ≥ 16 rows: the flash kernel, Q and P rounded to f16 (measured 2.7e-8 at head_dim 64).
      const bound = type === "f16" ? FLASH_ATTENTION_BOUND : EXACT_ELEMENTWISE_BOUND;
      expect(nmse(pair.native.read(out), pair.reference.read(outRef)), `paged attention ${type}`).toBeLessThanOrEqual(bound);
      // copy-on-write of a block, then the copied slots read back the same through attention
      pair.native.copyKV(keys, 0, 4, 4);
      pair.reference.copyKV(keysRef, 0, 4, 4);
      pair.native.copyKV(values, 0, 4, 4);
      pair.reference.copyKV(valuesRef, 0, 4, 4);
      const single = Int32Array.from([0, 1, 3, 0]);
      const [q1, q1Ref] = pair.buffers(normals(heads * headDim, 96));
      const o1 = pair.native.allocate(heads * headDim);
      const o1Ref = pair.reference.allocate(heads * headDim);
      pair.native.attention(o1, q1, { keys, values, blockTokens, blockTables: Int32Array.from([0]), sequences: single }, { ...shape, rows: 1 });
      pair.reference.attention(o1Ref, q1Ref, { keys: keysRef, values: valuesRef, blockTokens, blockTables: Int32Array.from([0]), sequences: single }, { ...shape, rows: 1 });
      expect(nmse(pair.native.read(o1), pair.reference.read(o1Ref)), `attention after copyKV ${type}`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    }
  });

  it("paged attention splits long decodes across blocks (32 splits) and takes wide prefills in one (q8_0 and f32 KV)", () => {
    const [heads, kvHeads, headDim, blockTokens, blocks] = [8, 2, 128, 16, 64];
    const kvWidth = kvHeads * headDim;
    const random = mulberry32(1093);
    for (const type of ["q8_0", "f32"] as const) {
      const keys = pair.native.allocateKV(type, blocks * blockTokens, kvWidth);
      const values = pair.native.allocateKV(type, blocks * blockTokens, kvWidth);
      const keysRef = pair.reference.allocateKV(type, blocks * blockTokens, kvWidth);
      const valuesRef = pair.reference.allocateKV(type, blocks * blockTokens, kvWidth);
      const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
      const [k, kRef] = pair.buffers(normals(slots.length * kvWidth, 190, 2));
      const [v, vRef] = pair.buffers(normals(slots.length * kvWidth, 191));
      backend.writeKVPair(keys, values, slots, k, v);
      pair.reference.writeKV(keysRef, slots, kRef);
      pair.reference.writeKV(valuesRef, slots, vRef);
      // decode of three sequences (3 rows × 8 heads: 32 splits of 4 warps × 4 keys, 512 positions a
      // round, so the 1000-token one takes two) and a 300-row prefill (2400 pairs: one split)
      for (const shapes of [
        [
          [1, 999],
          [1, 5],
          [1, 700],
        ],
        [[300, 200]],
      ] as const) {
        const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => Math.floor(random() * blocks));
        const [q, qRef] = pair.buffers(normals(rows * heads * headDim, 192 + rows, 2));
        const out = pair.native.allocate(rows * heads * headDim);
        const outRef = pair.reference.allocate(rows * heads * headDim);
        const shape = { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
        pair.native.attention(out, q, { keys, values, blockTokens, blockTables, sequences }, shape);
        pair.reference.attention(outRef, qRef, { keys: keysRef, values: valuesRef, blockTokens, blockTables, sequences }, shape);
        expect(nmse(pair.native.read(out), pair.reference.read(outRef)), `${type}, ${rows} rows`).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
      }
    }
  }, 180_000); // ~25 s on the emulator

  it("gives a disposed KV storage's memory back to the caching allocator (not held until the backend's dispose) and refuses its use after", () => {
    const rows = 4096;
    const width = 256;
    const bytes = rows * width * 2;
    const first = backend.allocateKV("f16", rows, width);
    const cached = backend.memoryInfo().cachedBytes;
    first.dispose!();
    first.dispose!(); // safe twice
    expect(backend.memoryInfo().cachedBytes - cached).toBeGreaterThanOrEqual(bytes);
    const x = backend.allocate(width);
    expect(() => backend.writeKV(first, Int32Array.of(0), x)).toThrow(KVStorageDisposedError);
    expect(() => backend.readKVRows(first, 0, 1)).toThrow(KVStorageDisposedError);
    // the next cache of that size takes the block from the cache: zeroed, as a fresh one
    const second = backend.allocateKV("f16", rows, width);
    expect(backend.memoryInfo().cachedBytes).toBeLessThanOrEqual(cached);
    expect(backend.readKVRows(second, rows - 1, 1).every((byte) => byte === 0)).toBe(true);
    second.dispose!();
  });

  it("attentionMatmul gives attention then matmul bit for bit, the O projection's q8_0 codes rounded by the attention kernel", () => {
    const [heads, kvHeads, blockTokens, blocks] = [8, 2, 16, 24];
    const random = mulberry32(2203);
    for (const headDim of [64, 128]) {
      const [width, kvWidth] = [heads * headDim, kvHeads * headDim];
      const keys = backend.allocateKV("f16", blocks * blockTokens, kvWidth);
      const values = backend.allocateKV("f16", blocks * blockTokens, kvWidth);
      const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
      const [k, v] = [backend.allocate(slots.length * kvWidth), backend.allocate(slots.length * kvWidth)];
      backend.write(k, normals(slots.length * kvWidth, 210 + headDim, 2));
      backend.write(v, normals(slots.length * kvWidth, 211 + headDim));
      backend.writeKVPair(keys, values, slots, k, v);
      const weights = [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.F16, GGMLType.Q4_K, GGMLType.IQ4_NL].map((type) => {
        const data = weightBytes(type, normals(width * 96, 220 + type, 0.05), 225 + type);
        return [type, backend.uploadWeight(tensorInfo(`o${type}`, type, [width, 96], data), data)] as const;
      });
      // decode of 1 and of 3 sequences, batches of 40 and 256 single-row sequences (int8 GEMM for
      // q8_0 and q4_0; 256 × 8 heads: one split, each block rounding its own head), and a 20-row
      // prefill (the flash kernel: the matmul rounds)
      const batch = (size: number) => Array.from({ length: size }, (_, i) => [1, 3 + (i % 50)] as const);
      for (const shapes of [[[1, 30]], [[1, 7], [1, 100], [1, 63]], batch(40), batch(256), [[20, 9]]] as const) {
        const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => Math.floor(random() * blocks));
        const kv = { keys, values, blockTokens, blockTables, sequences };
        const shape = { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
        const q = backend.allocate(rows * width);
        const [out, outApart] = [backend.allocate(rows * width), backend.allocate(rows * width)];
        for (const [type, weight] of weights) {
          // a new q each time, the fused call first: workspace the allocator hands out again then
          // holds another input's codes, never this one's
          backend.write(q, normals(rows * width, 230 + rows + type, 2));
          const [projected, projectedApart] = [backend.allocate(rows * 96), backend.allocate(rows * 96)];
          backend.attentionMatmul(projected, out, q, kv, shape, weight);
          backend.attention(outApart, q, kv, shape);
          backend.matmul(projectedApart, outApart, weight, rows);
          const what = `head_dim ${headDim}, ${rows} rows, ${ggmlTypeName(type)}`;
          expect(firstDifference(backend.read(out), backend.read(outApart)), `${what}: attention`).toBe(-1);
          expect(firstDifference(backend.read(projected), backend.read(projectedApart)), `${what}: projection`).toBe(-1);
        }
      }
      // one kernel fewer where the attention rounds: 1-row decode with a q8_0 O weight, not with f16
      const kv = { keys, values, blockTokens, blockTables: Int32Array.from([3, 5, 7]), sequences: Int32Array.from([0, 1, 40, 0]) };
      const shape = { rows: 1, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      const [q, out, projected] = [backend.allocate(width), backend.allocate(width), backend.allocate(96)];
      const nodes = (record: () => void) => {
        const graph = backend.captureGraph!(record) as BackendGraph & { nodes: number };
        graph.dispose();
        return graph.nodes;
      };
      for (const [type, weight] of weights.filter(([type]) => type === GGMLType.Q8_0 || type === GGMLType.F16)) {
        const fused = nodes(() => backend.attentionMatmul(projected, out, q, kv, shape, weight));
        const apart = nodes(() => {
          backend.attention(out, q, kv, shape);
          backend.matmul(projected, out, weight, 1);
        });
        expect(fused, ggmlTypeName(type)).toBe(type === GGMLType.Q8_0 ? apart - 1 : apart);
      }
    }
  }, 180_000);

  it("rmsNormSwigluMatmul gives rmsNormMatmuls then swigluMatmul bit for bit, one launch fewer", () => {
    const upload = (name: string, type: GGMLType, nIn: number, nOut: number, seed: number) => {
      const data = weightBytes(type, normals(nIn * nOut, seed, 0.05), seed + 1);
      return backend.uploadWeight(tensorInfo(name, type, [nIn, nOut], data), data);
    };
    const f32 = (n: number, seed: number) => {
      const data = new Uint8Array(normals(n, seed, 1).buffer);
      return backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [n], data), data);
    };
    const buffer = (n: number, seed: number) => {
      const b = backend.allocate(n);
      backend.write(b, normals(n, seed, 2));
      return b;
    };
    // Qwen3-0.6B's FFN widths (1,024 → 3,072 → 1,024) and a small one; 1, 2, 3 and 8 rows (each
    // of the kernel's row counts); with and without the pending residual; q8_0 and q4_0 down
    for (const [nIn, ffn] of [
      [256, 512],
      [1024, 3072],
    ] as const) {
      const [gateWeight, upWeight] = [upload("gate", GGMLType.Q8_0, nIn, ffn, 400 + nIn), upload("up", GGMLType.Q8_0, nIn, ffn, 410 + nIn)];
      const norm = f32(nIn, 420 + nIn);
      for (const downType of [GGMLType.Q8_0, GGMLType.Q4_0]) {
        const downWeight = upload("down", downType, ffn, nIn, 430 + downType);
        for (const rows of [1, 2, 3, 8]) {
          for (const residual of [true, false]) {
            const what = `${nIn} → ${ffn}, ${rows} rows, ${ggmlTypeName(downType)} down${residual ? ", with the residual" : ""}`;
            const seed = 440 + rows + ffn;
            const [hidden1, hidden2] = [buffer(rows * nIn, seed), buffer(rows * nIn, seed)];
            const [delta1, delta2] = [buffer(rows * nIn, seed + 1), buffer(rows * nIn, seed + 1)];
            const [normed1, normed2, projected1, projected2] = [0, 1, 2, 3].map(() => backend.allocate(rows * nIn));
            const [gate1, up1, gate2, up2] = [0, 1, 2, 3].map(() => backend.allocate(rows * ffn));
            const together = backend.rmsNormSwigluMatmul(normed1!, hidden1, residual ? delta1 : undefined, norm, 1e-6, gate1!, up1!, gateWeight, upWeight, projected1!, downWeight, rows);
            expect(together, what).toBe(true);
            backend.rmsNormMatmuls(normed2!, hidden2, residual ? delta2 : undefined, norm, 1e-6, [gate2!, up2!], [gateWeight, upWeight], rows);
            backend.swigluMatmul(projected2!, gate2!, up2!, downWeight, rows);
            for (const [name, a, b] of [
              ["normed", normed1, normed2],
              ["hidden", hidden1, hidden2],
              ["gate", gate1, gate2],
              ["up", up1, up2],
              ["projected", projected1, projected2],
            ] as const) {
              expect(firstDifference(backend.read(a!), backend.read(b!)), `${what}: ${name}`).toBe(-1);
            }
          }
        }
      }
    }
    // declined (false, nothing done): 9 rows (the GEMM), a q4_K gate, a q4_K down (q8_K codes), the option off
    const [nIn, ffn] = [256, 512];
    const [q8Gate, q8Up, q8Down] = [upload("gate", GGMLType.Q8_0, nIn, ffn, 1), upload("up", GGMLType.Q8_0, nIn, ffn, 2), upload("down", GGMLType.Q8_0, ffn, nIn, 3)];
    const norm = f32(nIn, 4);
    const [hidden, normed, projected, gate, up] = [nIn, nIn, nIn, ffn, ffn].map((n) => backend.allocate(9 * n));
    const call = (b: CudaBackend, rows: number, gateWeight = q8Gate, downWeight = q8Down) =>
      b.rmsNormSwigluMatmul(normed!, hidden!, undefined, norm, 1e-6, gate!, up!, gateWeight, q8Up, projected!, downWeight, rows);
    expect(call(backend, 9)).toBe(false);
    expect(call(backend, 1, upload("gate", GGMLType.Q4_K, nIn, ffn, 5))).toBe(false);
    expect(call(backend, 1, q8Gate, upload("down", GGMLType.Q4_K, ffn, nIn, 6))).toBe(false);
    expect(() => call(backend, 1, q8Gate, upload("down", GGMLType.Q8_0, 256, nIn, 7))).toThrow(/gate, up and down weights of 512, 512 and 256 features/);
    // off by default (the H200 ran a 0.6B decode step faster with SwiGLU and the norms apart)
    if (process.env.MEMRA_CUDA_FUSED_FFN === undefined && process.env.MEMRA_CUDA_FUSED_NORM === undefined) {
      const defaults = CudaBackend.create();
      try {
        expect([defaults.fusedFeedForward, defaults.fusedNorm]).toEqual([false, false]);
        expect(defaults.rmsNormSwigluMatmul(normed!, hidden!, undefined, norm, 1e-6, gate!, up!, q8Gate, q8Up, projected!, q8Down, 1)).toBe(false);
      } finally {
        defaults.dispose();
      }
    }
    const off = CudaBackend.create({ fusedFeedForward: false });
    try {
      expect(off.fusedFeedForward).toBe(false);
      expect(off.rmsNormSwigluMatmul(normed!, hidden!, undefined, norm, 1e-6, gate!, up!, q8Gate, q8Up, projected!, q8Down, 1)).toBe(false);
    } finally {
      off.dispose();
    }
    const nodes = (record: () => void) => {
      const graph = backend.captureGraph!(record) as BackendGraph & { nodes: number };
      graph.dispose();
      return graph.nodes;
    };
    const together = nodes(() => call(backend, 1));
    const apart = nodes(() => {
      backend.rmsNormMatmuls(normed!, hidden!, undefined, norm, 1e-6, [gate!, up!], [q8Gate, q8Up], 1);
      backend.swigluMatmul(projected!, gate!, up!, q8Down, 1);
    });
    expect(together).toBe(apart - 1);
  }, 240_000);

  it("profileKernels lists each eager launch with its GPU time, in order, none of a graph replay", () => {
    const data = quantize(GGMLType.Q8_0, normals(256 * 64, 31, 0.1));
    const w = backend.uploadWeight(tensorInfo("w", GGMLType.Q8_0, [256, 64], data), data);
    const normData = new Uint8Array(normals(64, 32, 1).buffer);
    const norm = backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [64], normData), normData);
    const x = backend.allocate(256);
    backend.write(x, normals(256, 33));
    const [out, normed] = [backend.allocate(64), backend.allocate(64)];
    const graph = backend.captureGraph!(() => backend.matmul(out, x, w, 1));
    const launches = backend.profileKernels(
      () => {
        backend.matmul(out, x, w, 1); // q8_0 decode: the activations' rounding, then the matrix-vector kernel
        graph.replay(); // not a launch of the context's: not listed
        backend.rmsNorm(normed, out, norm, 1, 1e-6);
      },
      { holdMicroseconds: 1000 },
    );
    expect(launches.map((launch) => launch.kernel)).toEqual(["round_activations_kernel", "matrix_vector_q8_0_kernel", "rms_norm_kernel"]);
    for (const { kernel, microseconds } of launches) expect(microseconds >= 0 && Number.isFinite(microseconds), `${kernel}: ${microseconds} µs`).toBe(true);
    // more launches than the capacity; a profile inside a profile; then profiling is off again
    expect(() => backend.profileKernels(() => backend.matmul(out, x, w, 1), { capacity: 1, holdMicroseconds: 0 })).toThrow(/more kernels launched than the profile's capacity of 1/);
    expect(() => backend.profileKernels(() => backend.profileKernels(() => {}))).toThrow(/already profiling/);
    expect(backend.profileKernels(() => {}, { holdMicroseconds: 0 })).toEqual([]);
    graph.dispose();
  });

  it("qkNormRopeAttentionMatmul gives qkNormRopeWriteKV then attentionMatmul bit for bit (out, projection and cache), one launch fewer, plain and with YaRN scaling", () => {
    const blockTokens = 16;
    const random = mulberry32(3301);
    const bytesOf = (storage: KVStorage) => {
      const kv = storage as KVStorage & { pointer: number; bytes: number };
      const out = new Uint8Array(kv.bytes);
      backend.library.call("memra_cuda_download", backend.contextHandle(), ptr(out), kv.pointer as Pointer, kv.bytes);
      return new Float32Array(out.buffer); // compared bit for bit
    };
    // decode of one sequence with an empty cache (this step's token alone), at 30 and at 700 (many
    // splits and groups), of 3 sequences, and of 40 (fewer splits); GQA groups of 4, 2 and 1
    const batch = (size: number) => Array.from({ length: size }, (_, i) => [1, 3 + (i % 50)] as const);
    const layouts = [[[1, 0]], [[1, 30]], [[1, 700]], [[1, 7], [1, 100], [1, 63]], batch(40)] as const;
    for (const [heads, kvHeads, headDim, scaling] of [
      [8, 2, 128, undefined],
      [6, 3, 64, undefined],
      [2, 2, 128, undefined],
      [6, 3, 64, YARN],
    ] as const) {
      const [width, kvWidth] = [heads * headDim, kvHeads * headDim];
      const norm = (seed: number) => {
        const data = new Uint8Array(normals(headDim, seed, 1).buffer);
        return backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [headDim], data), data);
      };
      const [qNorm, kNorm] = [norm(headDim + 1), norm(headDim + 2)];
      const weights = [GGMLType.Q8_0, GGMLType.F16].map((type) => {
        const data = weightBytes(type, normals(width * 96, 330 + type, 0.05), 335 + type);
        return [type, backend.uploadWeight(tensorInfo(`o${type}`, type, [width, 96], data), data)] as const;
      });
      // The scaled configuration: the kernel's RoPE differs only in its angles, so one cache type and
      // two layouts (one sequence deep in the cache, three at once) are enough; this file runs twice in CI.
      for (const type of scaling ? (["f16"] as const) : (["f32", "f16", "q8_0"] as const)) {
        for (const shapes of scaling ? [layouts[1], layouts[3]] : layouts) {
          // distinct blocks for every sequence: a block two sequences share would see this step's
          // K/V written before the attention in one path and not in the other
          let nextBlock = 0;
          const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => nextBlock++);
          const storageSlots = nextBlock * blockTokens;
          const caches = [0, 1, 2, 3].map(() => backend.allocateKV(type, storageSlots, kvWidth));
          const [k0, v0] = [backend.allocate(storageSlots * kvWidth), backend.allocate(storageSlots * kvWidth)];
          backend.write(k0, normals(storageSlots * kvWidth, 340 + rows, 2));
          backend.write(v0, normals(storageSlots * kvWidth, 341 + rows));
          const everySlot = Int32Array.from({ length: storageSlots }, (_, i) => i);
          backend.writeKVPair(caches[0]!, caches[1]!, everySlot, k0, v0);
          backend.writeKVPair(caches[2]!, caches[3]!, everySlot, k0, v0);
          const positions = Int32Array.from({ length: rows }, (_, r) => sequences[r * 4 + 2]!);
          const slots = Int32Array.from({ length: rows }, (_, r) => {
            const [position, offset] = [sequences[r * 4 + 2]!, sequences[r * 4 + 3]!];
            return blockTables[offset + Math.floor(position / blockTokens)]! * blockTokens + (position % blockTokens);
          });
          const shape = { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
          const fusedKV = { keys: caches[0]!, values: caches[1]!, blockTokens, blockTables, sequences };
          const apartKV = { keys: caches[2]!, values: caches[3]!, blockTokens, blockTables, sequences };
          for (const [weightType, weight] of weights) {
            const seed = 350 + rows + weightType + Math.floor(random() * 1000);
            const [q1, k1, q2, k2] = [width, kvWidth, width, kvWidth].map((n, i) => {
              const buffer = backend.allocate(rows * n);
              backend.write(buffer, normals(rows * n, seed + (i % 2), 2));
              return buffer;
            });
            const v = backend.allocate(rows * kvWidth);
            backend.write(v, normals(rows * kvWidth, seed + 2));
            const [out, outApart, projected, projectedApart] = [width, width, 96, 96].map((n) => backend.allocate(rows * n));
            const fused = backend.qkNormRopeAttentionMatmul(projected!, out!, q1!, k1!, v, qNorm, kNorm, positions, 1e-6, 1e6, slots, fusedKV, shape, weight, undefined, scaling);
            const what = `${type} cache, ${heads}/${kvHeads} heads of ${headDim}, ${rows} sequences at ${positions.slice(0, 3).join(", ")}, ${ggmlTypeName(weightType)} O`;
            expect(fused, what).toBe(true);
            expect(backend.qkNormRopeWriteKV(q2!, k2!, v, qNorm, kNorm, positions, heads, kvHeads, headDim, 1e-6, 1e6, apartKV.keys, apartKV.values, slots, scaling)).toBe(true);
            backend.attentionMatmul(projectedApart!, outApart!, q2!, apartKV, shape, weight);
            expect(firstDifference(backend.read(out!), backend.read(outApart!)), `${what}: attention`).toBe(-1);
            expect(firstDifference(backend.read(projected!), backend.read(projectedApart!)), `${what}: projection`).toBe(-1);
            expect(firstDifference(bytesOf(caches[0]!), bytesOf(caches[2]!)), `${what}: keys`).toBe(-1);
            expect(firstDifference(bytesOf(caches[1]!), bytesOf(caches[3]!)), `${what}: values`).toBe(-1);
          }
        }
      }
    }
    // declined (nothing done): a sequence of 2 query rows, head_dim 16, the option off
    const f16 = (n: number) => {
      const data = new Uint8Array(normals(n, n, 1).buffer);
      return backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [n], data), data);
    };
    const o = (inputs: number) => {
      const data = weightBytes(GGMLType.F16, normals(inputs * 32, inputs, 0.05), inputs);
      return backend.uploadWeight(tensorInfo("o", GGMLType.F16, [inputs, 32], data), data);
    };
    const keys = backend.allocateKV("f16", 64, 128);
    const values = backend.allocateKV("f16", 64, 128);
    const two = { keys, values, blockTokens: 16, blockTables: Int32Array.of(0), sequences: Int32Array.of(0, 2, 3, 0) };
    const [q, k, v, out, projected] = [256, 256, 256, 256, 64].map((n) => backend.allocate(n));
    const [w128, o128] = [f16(128), o(128)];
    expect(backend.qkNormRopeAttentionMatmul(projected!, out!, q!, k!, v!, w128, w128, Int32Array.of(3, 4), 1e-6, 1e6, Int32Array.of(3, 4), two, { rows: 2, heads: 1, kvHeads: 1, headDim: 128, scale: 0.1 }, o128)).toBe(false);
    const one = { ...two, sequences: Int32Array.of(0, 1, 3, 0) };
    expect(backend.qkNormRopeAttentionMatmul(projected!, out!, q!, k!, v!, f16(16), f16(16), Int32Array.of(3), 1e-6, 1e6, Int32Array.of(3), one, { rows: 1, heads: 8, kvHeads: 8, headDim: 16, scale: 0.1 }, o(128))).toBe(false);
    const off = CudaBackend.create({ fusedAttention: false });
    try {
      expect(off.fusedAttention).toBe(false);
      const offKeys = off.allocateKV("f16", 64, 128);
      const data = new Uint8Array(normals(128, 5, 1).buffer);
      const w = off.uploadWeight(tensorInfo("norm", GGMLType.F32, [128], data), data);
      const oData = weightBytes(GGMLType.F16, normals(128 * 32, 6, 0.05), 6);
      const ow = off.uploadWeight(tensorInfo("o", GGMLType.F16, [128, 32], oData), oData);
      const [oq, ok, ov, oo, op] = [128, 128, 128, 128, 32].map((n) => off.allocate(n));
      const view = { keys: offKeys, values: off.allocateKV("f16", 64, 128), blockTokens: 16, blockTables: Int32Array.of(0), sequences: Int32Array.of(0, 1, 3, 0) };
      expect(off.qkNormRopeAttentionMatmul(op!, oo!, oq!, ok!, ov!, w, w, Int32Array.of(3), 1e-6, 1e6, Int32Array.of(3), view, { rows: 1, heads: 1, kvHeads: 1, headDim: 128, scale: 0.1 }, ow)).toBe(false);
    } finally {
      off.dispose();
    }
    // errors: a slot outside the storage, out over q; and in a graph, one node fewer than the two ops
    const shape = { rows: 1, heads: 1, kvHeads: 1, headDim: 128, scale: 0.1 };
    expect(() => backend.qkNormRopeAttentionMatmul(projected!, out!, q!, k!, v!, w128, w128, Int32Array.of(3), 1e-6, 1e6, Int32Array.of(64), one, shape, o128)).toThrow(/slot 64 \(row 0\) outside/);
    expect(() => backend.qkNormRopeAttentionMatmul(projected!, q!, q!, k!, v!, w128, w128, Int32Array.of(3), 1e-6, 1e6, Int32Array.of(3), one, shape, o128)).toThrow(/out overlaps q, k or v/);
    const nodes = (record: () => void) => {
      const graph = backend.captureGraph!(record) as BackendGraph & { nodes: number };
      graph.dispose();
      return graph.nodes;
    };
    const together = nodes(() => backend.qkNormRopeAttentionMatmul(projected!, out!, q!, k!, v!, w128, w128, Int32Array.of(3), 1e-6, 1e6, Int32Array.of(3), one, shape, o128));
    const apart = nodes(() => {
      backend.qkNormRopeWriteKV(q!, k!, v!, w128, w128, Int32Array.of(3), 1, 1, 128, 1e-6, 1e6, keys, values, Int32Array.of(3));
      backend.attentionMatmul(projected!, out!, q!, one, shape, o128);
    });
    expect(together).toBe(apart - 1);
  }, 240_000);

  it("writeKVPair stores K and V as two writeKVs do, for f32, f16 and q8_0 storage", () => {
    const [width, slots] = [64, Int32Array.from([5, 0, 9])];
    const k = backend.allocate(slots.length * width);
    const v = backend.allocate(slots.length * width);
    backend.write(k, normals(slots.length * width, 71, 3));
    backend.write(v, normals(slots.length * width, 72, 3));
    const bytesOf = (storage: KVStorage) => {
      const kv = storage as KVStorage & { pointer: number; bytes: number };
      const out = new Uint8Array(kv.bytes);
      backend.library.call("memra_cuda_download", backend.contextHandle(), ptr(out), kv.pointer as Pointer, kv.bytes);
      return new Float32Array(out.buffer); // compared bit for bit
    };
    for (const type of ["f32", "f16", "q8_0"] as const) {
      const [keys, values, keysApart, valuesApart] = [0, 1, 2, 3].map(() => backend.allocateKV(type, 16, width));
      backend.writeKVPair(keys!, values!, slots, k, v);
      backend.writeKV(keysApart!, slots, k);
      backend.writeKV(valuesApart!, slots, v);
      expect(firstDifference(bytesOf(keys!), bytesOf(keysApart!)), `${type} keys`).toBe(-1);
      expect(firstDifference(bytesOf(values!), bytesOf(valuesApart!)), `${type} values`).toBe(-1);
      expect(firstDifference(bytesOf(keys!), bytesOf(values!)), `${type}: K and V differ`).not.toBe(-1);
    }
    const storage = backend.allocateKV("f16", 16, width);
    expect(() => backend.writeKVPair(storage, storage, slots, k, v)).toThrow(/keys and values are one storage/);
    expect(() => backend.writeKVPair(storage, backend.allocateKV("f16", 16, width), Int32Array.of(16), k, v)).toThrow(/slot 16 \(row 0\) outside the storage's 16 slots/);
  });

  it("qkNormRopeWriteKV gives qkNormRope then writeKVPair bit for bit, for f32, f16 and q8_0 storage, plain and with YaRN scaling", () => {
    const positions = Int32Array.from([0, 17, 4000]);
    const slots = Int32Array.from([5, 0, 9]);
    const bytesOf = (storage: KVStorage) => {
      const kv = storage as KVStorage & { pointer: number; bytes: number };
      const out = new Uint8Array(kv.bytes);
      backend.library.call("memra_cuda_download", backend.contextHandle(), ptr(out), kv.pointer as Pointer, kv.bytes);
      return new Float32Array(out.buffer); // compared bit for bit
    };
    for (const [heads, kvHeads, headDim, scaling] of [
      [4, 2, 16, undefined],
      [3, 1, 64, undefined],
      [2, 2, 128, undefined],
      [3, 1, 64, YARN],
    ] as const) {
      const norm = (seed: number) => {
        const data = new Uint8Array(normals(headDim, seed, 1).buffer);
        return backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [headDim], data), data);
      };
      const [qNorm, kNorm] = [norm(11), norm(12)];
      const qValues = normals(3 * heads * headDim, 13, 2);
      const kValues = normals(3 * kvHeads * headDim, 14, 2);
      const v = backend.allocate(3 * kvHeads * headDim);
      backend.write(v, normals(3 * kvHeads * headDim, 15, 2));
      for (const type of ["f32", "f16", "q8_0"] as const) {
        const what = `${type}, ${heads}/${kvHeads} heads of ${headDim}`;
        const [q1, k1, q2, k2] = [qValues, kValues, qValues, kValues].map((values) => {
          const buffer = backend.allocate(values.length);
          backend.write(buffer, values);
          return buffer;
        });
        const [keys, values, keysApart, valuesApart] = [0, 1, 2, 3].map(() => backend.allocateKV(type, 16, kvHeads * headDim));
        const fused = backend.qkNormRopeWriteKV(q1!, k1!, v, qNorm, kNorm, positions, heads, kvHeads, headDim, 1e-6, 1e6, keys!, values!, slots, scaling);
        expect(fused, what).toBe(!(type === "q8_0" && headDim % 32 !== 0)); // a q8_0 head must be whole blocks
        if (!fused) continue;
        backend.qkNormRope(q2!, k2!, qNorm, kNorm, positions, heads, kvHeads, headDim, 1e-6, 1e6, scaling);
        backend.writeKVPair(keysApart!, valuesApart!, slots, k2!, v);
        expect(firstDifference(backend.read(q1!), backend.read(q2!)), `${what}: q`).toBe(-1);
        expect(firstDifference(backend.read(k1!), backend.read(k2!)), `${what}: k`).toBe(-1);
        expect(firstDifference(bytesOf(keys!), bytesOf(keysApart!)), `${what}: keys`).toBe(-1);
        expect(firstDifference(bytesOf(values!), bytesOf(valuesApart!)), `${what}: values`).toBe(-1);
      }
    }
    const [keys, values] = [backend.allocateKV("f16", 16, 64), backend.allocateKV("f16", 16, 64)];
    const data = new Uint8Array(normals(64, 1, 1).buffer);
    const w = backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [64], data), data);
    const [q, k, v] = [backend.allocate(64), backend.allocate(64), backend.allocate(64)];
    expect(() => backend.qkNormRopeWriteKV(q, k, v, w, w, Int32Array.of(1), 1, 1, 64, 1e-6, 1e6, keys, values, Int32Array.of(16))).toThrow(/slot 16 \(row 0\) outside/);
    expect(() => backend.qkNormRopeWriteKV(q, k, v, w, w, Int32Array.of(1), 1, 1, 64, 1e-6, 1e6, keys, keys, Int32Array.of(1))).toThrow(/one storage/);
  });

  it.each(["f32", "f16", "q8_0"] as const)("readKVRows / writeKVRows: %s rows in the reference's layout, moved between backends", (type) => {
    expectKVRowsPortable(pair.native, pair.reference, type, EXACT_ELEMENTWISE_BOUND);
  });

  it.each([
    ["f32", EXACT_ELEMENTWISE_BOUND],
    ["f16", 1e-7],
    ["q8_0", 1e-4],
  ] as const)("rotateKV (the context shift's K shift): %s rows as the reference rotates them", (type, bound) => {
    expectRotateKVMatches(pair.native, pair.reference, type, bound);
  });

  it("moeRoute, gatherRows, scatterAddRows", () => {
    const [rows, experts, k] = [9, 16, 4];
    const [logits, logitsRef] = pair.buffers(normals(rows * experts, 110, 2));
    const routed = pair.native.moeRoute(logits, rows, experts, k);
    const routedRef = pair.reference.moeRoute(logitsRef, rows, experts, k);
    expect(routed.ids).toEqual(routedRef.ids);
    expect(nmse(routed.weights, routedRef.weights)).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
    const width = 33;
    const [x, xRef] = pair.buffers(normals(6 * width, 120));
    const ids = Int32Array.from([4, 0, 4, 2]);
    const gathered = pair.native.allocate(ids.length * width);
    const gatheredRef = pair.reference.allocate(ids.length * width);
    pair.native.gatherRows(gathered, x, ids, width);
    pair.reference.gatherRows(gatheredRef, xRef, ids, width);
    expect(pair.native.read(gathered)).toEqual(pair.reference.read(gatheredRef));
    const scales = Float32Array.from([0.5, -1, 0.25, 2]);
    pair.native.scatterAddRows(x, gathered, ids, scales, width);
    pair.reference.scatterAddRows(xRef, gatheredRef, ids, scales, width);
    expect(nmse(...pair.read([x, xRef]))).toBeLessThanOrEqual(EXACT_ELEMENTWISE_BOUND);
  });

  it("argmaxRows picks each row's token as the sampler's argmax (ties, NaN, infinities), and readInto reads into an array at an offset", () => {
    const columns = 151_936;
    const rows = 7;
    const values = normals(rows * columns, 130, 3);
    const row = (r: number) => values.subarray(r * columns, (r + 1) * columns);
    row(1).fill(-1); // ties everywhere: the first
    row(1)[5000] = 2;
    row(1)[100_000] = 2;
    row(2)[0] = Number.NaN; // a NaN first: 0 whatever follows
    row(3).fill(Number.NEGATIVE_INFINITY);
    row(3)[77_777] = Number.NaN;
    row(4).fill(Number.NaN); // NaN from index 1 on, -0 at index 0: 0
    row(4)[0] = -0;
    row(5)[columns - 1] = Number.POSITIVE_INFINITY;
    row(5)[3] = Number.NaN;
    row(6).fill(0);
    row(6)[1] = -0; // -0 == 0: still index 0
    row(6)[columns - 2] = 1e-30;
    const logits = backend.allocate(values.length);
    backend.write(logits, values);
    const picked = new Int32Array(rows + 1).fill(-5);
    backend.argmaxRows(picked, logits, rows, columns);
    const expected = Array.from({ length: rows }, (_, r) => argmax(row(r), columns));
    expect(expected.slice(1)).toEqual([5000, 0, 0, 0, columns - 1, columns - 2]);
    expect(Array.from(picked)).toEqual([...expected, -5]);
    // a random row against the sampler
    expect(argmax(row(0), columns)).toBe(picked[0]);

    const target = new Float32Array(100).fill(7);
    backend.readInto(logits, columns + 4990, 20, target, 50);
    expect(firstDifference(target.subarray(50, 70), row(1).subarray(4990, 5010))).toBe(-1);
    expect(target[49]).toBe(7);
    expect(target[70]).toBe(7);
    expect(() => backend.readInto(logits, 0, 20, target, 90)).toThrow(RangeError);
    expect(() => backend.argmaxRows(new Int32Array(2), logits, 3, columns)).toThrow(RangeError);
    expect(() => backend.argmaxRows(picked, logits, 8, columns)).toThrow(/memra_cuda_argmax_rows: logits/);
    expect(() => backend.argmaxRows(picked, logits, 1, 0)).toThrow(/0 columns/);
  });

  it("argmaxRows over rows split into chunks: the best of every chunk, ties across chunk boundaries to the lower index", () => {
    // Chunks of 4096 values (MEMRA_CUDA_ARGMAX_CHUNK), 16 per thread: rows of one value, of less
    // than a chunk, of exactly one, of one value more, and of several with a short last one.
    for (const columns of [1, 5, 4095, 4096, 4097, 3 * 4096 + 7]) {
      const rows = 9;
      const values = normals(rows * columns, 17 + columns, 1);
      const row = (r: number) => values.subarray(r * columns, (r + 1) * columns);
      const last = columns - 1;
      row(1)[last] = 9; // in the last chunk's last value
      row(2).fill(3); // all equal: index 0
      if (columns > 4096) {
        row(3)[4095] = 9; // a tie on both sides of the first boundary
        row(3)[4096] = 9;
        row(4)[4096] = 9; // a tie with a later chunk's lower-numbered thread
        row(4)[last] = 9;
      }
      if (columns > 2 * 4096) {
        row(5)[255] = Number.NaN; // NaNs in the best chunk's other values
        row(5)[4096 + 256] = 9;
        row(5)[4096 + 512] = Number.NaN;
      }
      row(6).fill(Number.NaN); // all NaN: 0
      row(7).fill(Number.NEGATIVE_INFINITY);
      row(7)[last] = -3e38; // finite in f32
      row(8)[0] = Number.NaN; // a NaN first: 0, even with +Infinity later
      row(8)[last] = Number.POSITIVE_INFINITY;
      const logits = backend.allocate(values.length);
      backend.write(logits, values);
      const picked = new Int32Array(rows);
      backend.argmaxRows(picked, logits, rows, columns);
      const expected = Array.from({ length: rows }, (_, r) => argmax(row(r), columns));
      expect(Array.from(picked), `columns ${columns}`).toEqual(expected);
      expect(expected[1]).toBe(last);
      if (columns > 4096) expect(expected.slice(3, 5)).toEqual([4095, 4096]);
      if (columns > 2 * 4096) expect(expected[5]).toBe(4096 + 256);
      expect([expected[6], expected[7], expected[8]]).toEqual([0, last === 0 ? 0 : last, 0]);
    }
  });

  it("topKRows gives each row's k best candidates as the sampler's top-k (ties by index, -0 as +0, NaN below -Infinity, exact bits)", () => {
    /** The sampler's top-k of `row`: ids and logits, best first. */
    const samplerTopK = (row: Float32Array, k: number) => {
      const candidates = Candidates.fromLogits(row);
      topK(candidates, k);
      expect(candidates.length).toBe(k);
      return { ids: candidates.ids.slice(0, k), logits: candidates.logits.slice(0, k) };
    };
    /** ids and values of rows [0, rows) of `values` on the device against the sampler's, values bit for bit. */
    const expectSamplerTopK = (values: Float32Array, rows: number, columns: number, k: number) => {
      const logits = backend.allocate(values.length);
      backend.write(logits, values);
      const ids = new Int32Array(rows * k + 1).fill(-5);
      const got = new Float32Array(rows * k + 1).fill(7);
      backend.topKRows(ids, got, logits, rows, columns, k);
      expect([ids[rows * k], got[rows * k]]).toEqual([-5, 7]); // nothing written past rows * k
      for (let r = 0; r < rows; r++) {
        const expected = samplerTopK(values.subarray(r * columns, (r + 1) * columns), k);
        const where = `${rows} x ${columns}, k ${k}, row ${r}`;
        const rowIds = ids.subarray(r * k, (r + 1) * k);
        expect(rowIds.findIndex((id, j) => id !== expected.ids[j]), where).toBe(-1);
        expect(firstDifference(got.subarray(r * k, (r + 1) * k), expected.logits), where).toBe(-1); // bits: -0 is not +0
      }
    };
    // A vocabulary of 151,936: a normal row; coarse values (many exact ties, -0 and +0 mixed,
    // across chunks of 4096); -Infinity everywhere but a few (the best k run into -Infinity ties).
    const columns = 151_936;
    const random = mulberry32(77);
    const vocabulary = normals(3 * columns, 78, 3);
    const row = (r: number) => vocabulary.subarray(r * columns, (r + 1) * columns);
    for (let i = 0; i < columns; i++) {
      const coarse = Math.round((random() - 0.5) * 8) / 2; // -2 .. 2 by 0.5: ~17,000 each (-2 and 2 half that)
      row(1)[i] = coarse === 0 ? (random() < 0.5 ? -0 : 0) : coarse;
    }
    row(2).fill(Number.NEGATIVE_INFINITY);
    for (const [i, v] of [[150_000, 1], [3, -0], [9000, 0], [4095, -1e30], [4096, -0], [columns - 1, Number.POSITIVE_INFINITY], [70_000, -3e38]] as const) row(2)[i] = v;
    for (const k of [1, 40, 1024]) expectSamplerTopK(vocabulary, 3, columns, k);
    // The ties are really there, and -0 keeps its sign.
    const coarseTop = samplerTopK(row(1), 1024);
    expect(coarseTop.logits.every((v) => v === 2)).toBe(true);
    const lowestTop = samplerTopK(row(2), 40);
    expect(Array.from(lowestTop.ids.slice(0, 7))).toEqual([columns - 1, 150_000, 3, 4096, 9000, 4095, 70_000]);
    expect([Object.is(lowestTop.logits[2], -0), Object.is(lowestTop.logits[4], 0), lowestTop.logits[7]]).toEqual([true, true, Number.NEGATIVE_INFINITY]);

    // 4097 columns: two chunks, the second of one value (its list padded), merged; that value the best.
    const twoChunks = normals(2 * 4097, 79, 1);
    twoChunks[4096] = 10;
    twoChunks[4097 + 4096] = -10;
    for (const k of [1, 40, 300, 1024]) expectSamplerTopK(twoChunks, 2, 4097, k);

    // Small rows (one sort of up to 16 keys), 70 rows, k up to columns; ties and -0 among them.
    for (let width = 1; width <= 9; width++) {
      const small = new Float32Array(70 * width);
      for (let i = 0; i < small.length; i++) small[i] = random() < 0.25 ? (random() < 0.5 ? -0 : 0) : Math.round((random() - 0.5) * 6);
      for (let k = 1; k <= width; k++) expectSamplerTopK(small, 70, width, k);
    }

    // More rows than the grid's 65,535: blocks stride over rows. Row r: [r % 7, -(r % 5), r % 7].
    const manyRows = 65_537;
    const many = new Float32Array(manyRows * 3);
    for (let r = 0; r < manyRows; r++) many.set([r % 7, -(r % 5), r % 7], r * 3);
    const manyLogits = backend.allocate(many.length);
    backend.write(manyLogits, many);
    const manyIds = new Int32Array(manyRows * 2);
    const manyValues = new Float32Array(manyRows * 2);
    backend.topKRows(manyIds, manyValues, manyLogits, manyRows, 3, 2);
    const manyExpected = (r: number) => (r % 7 === 0 && r % 5 === 0 ? [0, 1, 0, -0] : r % 7 === 0 ? [0, 2, 0, 0] : [0, 2, r % 7, r % 7]);
    const manyWrong = Array.from({ length: manyRows }, (_, r) => r).find((r) => {
      const [a, b, x, y] = manyExpected(r);
      return manyIds[2 * r] !== a || manyIds[2 * r + 1] !== b || !Object.is(manyValues[2 * r], x) || !Object.is(manyValues[2 * r + 1], y);
    });
    expect(manyWrong).toBeUndefined();

    // NaN (the sampler's heap takes rows without NaN): below -Infinity, NaNs by ascending index,
    // their bits (payload and sign) kept.
    const nanWidth = 5000;
    const nanRow = new Float32Array(nanWidth).fill(Number.NaN);
    const nanBits = new Uint32Array(nanRow.buffer);
    nanBits[500] = 0xffc00001; // a negative NaN with a payload: among the NaNs by its index all the same
    nanBits[10] = 0x7f800abc;
    nanRow[2000] = Number.NEGATIVE_INFINITY;
    nanRow[4500] = -0;
    nanRow[7] = 0;
    nanRow[4200] = Number.NEGATIVE_INFINITY;
    const nanLogits = backend.allocate(nanWidth);
    backend.write(nanLogits, nanRow);
    const nanIds = new Int32Array(8);
    const nanValues = new Float32Array(8);
    backend.topKRows(nanIds, nanValues, nanLogits, 1, nanWidth, 8);
    expect(Array.from(nanIds)).toEqual([7, 4500, 2000, 4200, 0, 1, 2, 3]);
    expect(Array.from(new Uint32Array(nanValues.buffer))).toEqual([0, 0x80000000, 0xff800000, 0xff800000, nanBits[0], nanBits[1], nanBits[2], nanBits[3]]);
    const lastNaNs = new Int32Array(nanWidth);
    const lastNaNValues = new Float32Array(nanWidth);
    backend.topKRows(lastNaNs, lastNaNValues, nanLogits, 1, nanWidth, 1024);
    expect(Array.from(lastNaNs.subarray(4, 1024))).toEqual(Array.from({ length: 1020 }, (_, j) => j + (j >= 7 ? 1 : 0)));
    // after the 4 numbers, NaN index i at position 4 + i, less one past index 7 (a number)
    expect([new Uint32Array(lastNaNValues.buffer)[4 + 10 - 1], new Uint32Array(lastNaNValues.buffer)[4 + 500 - 1]]).toEqual([0x7f800abc, 0xffc00001]);

    // Errors: arrays too short, k outside 1..min(columns, 1024), logits too short.
    const logits = backend.allocate(2 * 2000);
    const ids = new Int32Array(2 * 1024);
    const values = new Float32Array(2 * 1024);
    expect(() => backend.topKRows(new Int32Array(79), values, logits, 2, 2000, 40)).toThrow(RangeError);
    expect(() => backend.topKRows(ids, new Float32Array(79), logits, 2, 2000, 40)).toThrow(RangeError);
    expect(() => backend.topKRows(ids, values, logits, 2, 2000, 0)).toThrow(/memra_cuda_top_k_rows: k 0: .*1\.\.1024/);
    expect(() => backend.topKRows(ids, values, logits, 2, 8, 9)).toThrow(/k 9: .*1\.\.8/);
    expect(() => backend.topKRows(ids, values, logits, 1, 2000, 1025)).toThrow(/k 1025: .*1\.\.1024/);
    expect(() => backend.topKRows(ids, values, logits, 2, 0, 1)).toThrow(/0 columns/);
    expect(() => backend.topKRows(ids, values, logits, 3, 2000, 40)).toThrow(/memra_cuda_top_k_rows: logits/);
    backend.topKRows(ids, values, logits, 0, 2000, 40); // no rows: nothing to do
    backend.topKRows(new Int32Array(0), new Float32Array(0), logits, 0, 2000, 40); // nor with empty arrays
    expect(() => backend.topKRows(new Int32Array(0), new Float32Array(0), logits, 0, 2000, 0)).toThrow(/k 0/); // k is still checked
  });

  it("logSoftmaxAt gives each row's log-probability of its target within 1e-5 · max(1, |value|) of double precision", () => {
    const bound = 1e-5;
    const check = (columns: number, rows: number, fill: (r: number, row: Float32Array) => void) => {
      const values = normals(rows * columns, 900 + columns + rows, 4);
      for (let r = 0; r < rows; r++) fill(r, values.subarray(r * columns, (r + 1) * columns));
      const targets = Int32Array.from({ length: rows }, (_, r) => (r * 7919 + 13) % columns);
      const logits = backend.allocate(values.length);
      backend.write(logits, values);
      const out = new Float32Array(rows + 1).fill(7);
      backend.logSoftmaxAt(out, logits, rows, columns, targets);
      for (let r = 0; r < rows; r++) {
        const row = values.subarray(r * columns, (r + 1) * columns);
        let max = -Infinity;
        for (const value of row) max = Math.max(max, value);
        let sum = 0;
        for (const value of row) sum += Math.exp(value - max);
        const expected = row[targets[r]!]! - (max + Math.log(sum));
        if (expected === Number.NEGATIVE_INFINITY) expect(out[r]).toBe(expected); // a masked target
        else expect(Math.abs(out[r]! - expected), `${columns} columns, row ${r}`).toBeLessThanOrEqual(bound * Math.max(1, Math.abs(expected)));
      }
      expect(out[rows]).toBe(7);
      return logits;
    };
    const logits = check(151_936, 4, (r, row) => {
      if (r === 1) for (let i = 0; i < row.length; i += 3) row[i] = Number.NEGATIVE_INFINITY; // masked tokens (the target too: 7932)
      if (r === 2) row[77] = 300; // one dominant logit: the sum is about 1, the target's log-probability about −300 (f32 ulp 3e-5)
      // Whole chunks of 4,096 masked (MEMRA_CUDA_ARGMAX_CHUNK): the first three, and the target's (23,770, chunk 5).
      if (r === 3) {
        row.fill(Number.NEGATIVE_INFINITY, 0, 3 * 4096);
        row.fill(Number.NEGATIVE_INFINITY, 5 * 4096, 6 * 4096);
      }
    });
    check(4096 + 1, 3, (r, row) => {
      if (r === 1) row.fill(Number.NEGATIVE_INFINITY, 0, 4096); // only the last chunk's one value: log-probability 0 there
      if (r === 2) row[4096] = 60; // the largest value in the short last chunk
    });
    check(5, 70, () => {});
    check(1, 2, () => {});
    expect(() => backend.logSoftmaxAt(new Float32Array(3), logits, 3, 151_936, Int32Array.of(0, 151_936, 1))).toThrow(/target 151936 of row 1 is outside 0\.\.151935/);
    expect(() => backend.logSoftmaxAt(new Float32Array(2), logits, 3, 151_936, Int32Array.of(0, 1, 2))).toThrow(RangeError);
    expect(() => backend.logSoftmaxAt(new Float32Array(5), logits, 5, 151_936, Int32Array.of(0, 1, 2, 3, 4))).toThrow(/memra_cuda_log_softmax_at: logits/);
    backend.logSoftmaxAt(new Float32Array(0), logits, 0, 151_936, new Int32Array(0)); // no rows: nothing to do
  });

  it("moeExperts routes and runs the chosen experts on the device, as routing, gather, expert matmuls and scatter do on the reference", () => {
    // Rows 1 and 5 (3 and 15 pairs): a matrix-vector product per (row, expert) pair. Rows 40 and 400
    // (120 and 1200 pairs, at least twice the 8 experts): the pairs sorted by expert on the device and
    // each projection one grouped GEMM (int8 for q8_0/q4_0, integer codes for q4_K/q6_K, f16 for
    // f16/bf16). The per-pair products of quantized experts multiply the activations' q8 codes. "skewed": 400 rows all routed to experts 2 and 5 (and one more each), so those two
    // take several row tiles and some experts none.
    const [experts, k] = [8, 3];
    const results: Record<string, number> = {};
    for (const [gateType, downType, embedding, ffn] of [
      [GGMLType.Q8_0, GGMLType.Q8_0, 64, 32],
      [GGMLType.Q4_0, GGMLType.Q8_0, 64, 32],
      [GGMLType.F16, GGMLType.BF16, 64, 32],
      [GGMLType.Q4_K, GGMLType.Q6_K, 256, 256],
      [GGMLType.Q5_K, GGMLType.Q5_0, 256, 256], // per pair: the remaining codes kernels (q5_K, q5_0 on q8_K and q8_0 codes)
      [GGMLType.Q3_K, GGMLType.IQ4_XS, 256, 256], // the types of Q2_K / Q3_K / IQ4_XS files: f32 per pair, codes GEMMs
      [GGMLType.IQ4_NL, GGMLType.Q2_K, 256, 256],
      [GGMLType.IQ2_XXS, GGMLType.IQ1_M, 256, 256], // the i-quants of IQ1 / IQ2 / IQ3 files: __dp4a per pair, codes GEMMs
    ] as const) {
      const upload = (name: string, type: GGMLType, shape: number[], seed: number) => {
        const data = weightBytes(type, normals(shape[0]! * shape[1]! * shape[2]!, seed, 0.1), seed + 100);
        return pair.weights(tensorInfo(name, type, shape, data), data);
      };
      const [gate, gateRef] = upload("gate", gateType, [embedding, ffn, experts], 51);
      const [up, upRef] = upload("up", gateType, [embedding, ffn, experts], 52);
      const [down, downRef] = upload("down", downType, [ffn, embedding, experts], 53);
      for (const [rows, skewed] of [[1, false], [5, false], [40, false], [400, false], [400, true]] as const) {
        const [x, xRef] = pair.buffers(normals(rows * embedding, 54 + rows));
        const routerLogits = normals(rows * experts, 56 + rows, 2);
        if (skewed) for (let r = 0; r < rows; r++) for (const e of [2, 5]) routerLogits[r * experts + e]! += 20;
        const [logits, logitsRef] = pair.buffers(routerLogits);
        const out = backend.allocate(rows * embedding);
        expect(backend.moeExperts(out, x, logits, { gate, up, down }, rows, experts, k)).toBe(true);
        // the reference: the gather/scatter path of the model's routed experts
        const r = pair.reference;
        const outRef = r.allocate(rows * embedding);
        r.write(outRef, new Float32Array(rows * embedding));
        const { ids, weights } = r.moeRoute(logitsRef, rows, experts, k);
        const [gathered, g, u, d] = [r.allocate(rows * embedding), r.allocate(rows * ffn), r.allocate(rows * ffn), r.allocate(rows * embedding)];
        for (let expert = 0; expert < experts; expert++) {
          const chosen = [...ids.keys()].filter((i) => ids[i] === expert);
          if (chosen.length === 0) continue;
          const rowIds = Int32Array.from(chosen, (i) => Math.floor(i / k));
          r.gatherRows(gathered, xRef, rowIds, embedding);
          r.expertMatmul(g, gathered, gateRef, expert, chosen.length);
          r.expertMatmul(u, gathered, upRef, expert, chosen.length);
          r.swiglu(g, g, u, chosen.length * ffn);
          r.expertMatmul(d, g, downRef, expert, chosen.length);
          r.scatterAddRows(outRef, d, rowIds, Float32Array.from(chosen, (i) => weights[i]!), embedding);
        }
        if (skewed) expect([...ids.keys()].filter((i) => ids[i] === 2).length).toBe(rows);
        results[`${ggmlTypeName(gateType)}/${ggmlTypeName(downType)} ${rows}${skewed ? " skewed" : ""}`] = nmse(backend.read(out), r.read(outRef));
      }
    }
    if (process.env.MEMRA_PRINT_NMSE) console.log("moeExperts", results);
    for (const [what, error] of Object.entries(results)) expect(error, what).toBeLessThanOrEqual(/ (1|5)$/.test(what) ? VECTOR_MATMUL_BOUND : MOE_CHAIN_BOUND);
    const data = quantize(GGMLType.Q4_1, normals(64 * 32 * experts, 60));
    const q41 = backend.uploadWeight(tensorInfo("q4_1", GGMLType.Q4_1, [64, 32, experts], data), data);
    const b = backend.allocate(64);
    expect(backend.moeExperts(b, b, b, { gate: q41, up: q41, down: q41 }, 1, experts, k)).toBe(false); // q8_1 activations: the gather path
  });

  it("moeExperts over many rows runs its grouped kernels in a fixed number of launches, which a graph records", () => {
    // 40 rows × 3 of 8 experts: route, sort by expert, gather, q8_0 rounding, gate and up GEMMs,
    // rounding of silu(gate) · up, down GEMM, combine: 9 kernels whatever the routing (5 rows: 6,
    // the per-pair path's route, rounding, gate and up in one launch, rounding of silu(gate) · up,
    // down, combine).
    const [embedding, ffn, experts, k] = [64, 32, 8, 3];
    const upload = (name: string, shape: number[], seed: number) => {
      const data = quantize(GGMLType.Q8_0, normals(shape[0]! * shape[1]! * shape[2]!, seed, 0.1));
      return backend.uploadWeight(tensorInfo(name, GGMLType.Q8_0, shape, data), data);
    };
    const weights = { gate: upload("gate", [embedding, ffn, experts], 61), up: upload("up", [embedding, ffn, experts], 62), down: upload("down", [ffn, embedding, experts], 63) };
    const nodes = (rows: number, seed: number) => {
      const x = backend.allocate(rows * embedding);
      backend.write(x, normals(rows * embedding, seed));
      const logits = backend.allocate(rows * experts);
      backend.write(logits, normals(rows * experts, seed + 1, 2));
      const out = backend.allocate(rows * embedding);
      const eager = backend.allocate(rows * embedding);
      expect(backend.moeExperts(eager, x, logits, weights, rows, experts, k)).toBe(true);
      const graph = backend.captureGraph!(() => backend.moeExperts(out, x, logits, weights, rows, experts, k)) as BackendGraph & { nodes: number };
      graph.replay();
      // replayed and eager results alike, bit for bit
      expect(firstDifference(backend.read(out), backend.read(eager))).toBe(-1);
      graph.dispose();
      return graph.nodes;
    };
    expect(nodes(40, 70)).toBe(9);
    expect(nodes(40, 80)).toBe(9);
    expect(nodes(5, 90)).toBe(6);
  });

  it("errors: sizes, indices and unsupported types are CudaErrors with the library's message, not crashes", () => {
    const data = quantize(GGMLType.Q8_0, normals(64 * 8, 130));
    const w = backend.uploadWeight(tensorInfo("w", GGMLType.Q8_0, [64, 8], data), data);
    expect(() => backend.matmul(backend.allocate(8), backend.allocate(128), w, 2)).toThrow(/memra_cuda_matmul: out holds 8 elements, 16 needed/);
    expect(() => backend.add(backend.allocate(8), backend.allocate(9), backend.allocate(9), 9)).toThrow(/memra_cuda_add: out holds 8 elements, 9 needed/);
    const table = backend.uploadWeight(tensorInfo("token_embd.weight", GGMLType.Q8_0, [64, 8], data), data);
    expect(() => backend.embedding(backend.allocate(64), table, Int32Array.from([8]))).toThrow(/token id 8 at position 0 is outside the table \(0..7\)/);
    const storage = backend.allocateKV("f16", 8, 64);
    expect(() => backend.writeKV(storage, Int32Array.from([8]), backend.allocate(64))).toThrow(/slot 8 \(row 0\) outside the storage's 8 slots/);
    const view = { keys: storage, values: storage, blockTokens: 4, blockTables: Int32Array.from([2]), sequences: Int32Array.from([0, 1, 0, 0]) };
    expect(() => backend.attention(backend.allocate(64), backend.allocate(64), view, { rows: 1, heads: 1, kvHeads: 1, headDim: 64, scale: 1 })).toThrow(
      /sequence 0 block 0 is 2, outside the storage's 2 blocks/,
    );
    const bad = new Uint8Array(54 * 4);
    expect(() => backend.uploadWeight(tensorInfo("w", GGMLType.TQ1_0, [256, 4], bad), bad)).toThrow(/tq1_0/);
    backend.synchronize(); // nothing faulted on the device
  });

  it("dispose is safe twice; use after dispose throws", () => {
    const other = CudaBackend.create();
    const buffer = other.allocate(4);
    other.dispose();
    other.dispose();
    expect(() => other.add(buffer, buffer, buffer, 4)).toThrow(CudaBackendDisposedError);
  });
});
