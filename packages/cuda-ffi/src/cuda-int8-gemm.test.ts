/**
 * The int8 prefill GEMM (gemm_int8_kernel in native/cuda/kernels/matmul.cuh): q8_0, q4_0 and q5_0
 * weights times the activations' q8_0 codes on int8 tensor cores, from MEMRA_CUDA_GEMM_MIN_ROWS (9)
 * rows, with activation rounding on (the default). Skipped without a GPU unless MEMRA_CUDA_LIBRARY
 * names the emulated library (CI runs it on the CPU emulator of native/cuda).
 *
 * Shapes are not multiples of the 128 × 128 tile nor of its 64-input k-tile: 9, 37 and 130 rows
 * (one and two row tiles), 8 and 200 outputs (one partial tile, a full and a partial one), 32, 96
 * and 4096 inputs (a k-tile of one block; one and a half k-tiles; 64 k-tiles).
 *
 * Bounds. The reference multiplies the rounded activations (exact f32 values d_x · q) with the
 * dequantized weights (exact d_w · c) and sums in double: it is the exact sum of the block terms
 * d_w · d_x · isum. The kernel rounds each term twice (the scale product, then times isum) and
 * sums n_in / 32 of them in f32, so each output is within about (n_in / 32 + 2) · 2^-24 of the sum of
 * the terms' magnitudes; with random signs the error is ~1e-7 of the outputs' scale. Bounds:
 * NMSE ≤ 1e-12 (cuda-backend.test.ts's GEMM bound) and max |error| ≤ 1e-5 · max |reference|;
 * measured on the emulator: exact at 32 inputs (one block: one rounding of a product), NMSE ≤ 5e-15
 * and ≤ 1.2e-7 at 96, NMSE ≤ 4.4e-14 and ≤ 4.3e-7 at 4096. Against the previous kernel
 * (gemm_codes_kernel, MEMRA_CUDA_INT8_GEMM=0, run in a child process because the variable is read
 * when a context is created): the same exact integer products, scaled per 16-value chunk instead
 * of per 32-value block, so the two differ in rounding only: the same bounds (measured NMSE
 * ≤ 1.3e-13, max ≤ 8.7e-7 of the largest output, at 4096 inputs).
 *
 * Also here, as it needs the same child process: q8_0 decode (matrix_vector_q8_0_kernel) with 4
 * steps of 8 blocks in flight per warp gives bit for bit what 2 steps (MEMRA_CUDA_MMV_STEPS=2) give,
 * at block counts that leave every kind of tail.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ReferenceBackend } from "@memra/core";
import { BackendPair, firstDifference, nmse, normals, tensorInfo } from "@memra/core/internal";
import { GGMLType, ggmlTypeName, quantize } from "@memra/gguf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";

const unavailable = cudaUnavailableReason();

const NMSE_BOUND = 1e-12;
const MAX_ERROR_BOUND = 1e-5; // relative to max |expected|

type Case = { type: GGMLType; rows: number; nIn: number; nOut: number };

const TYPES = [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q5_0];
const CASES: Case[] = [
  ...TYPES.flatMap((type) =>
    [9, 37, 130].flatMap((rows) => [8, 200].flatMap((nOut) => [32, 96].map((nIn) => ({ type, rows, nIn, nOut })))),
  ),
  ...TYPES.map((type) => ({ type, rows: 130, nIn: 4096, nOut: 200 })),
];

/** The seeded weights and activations of a case (the child process builds the same). */
function inputs({ type, rows, nIn, nOut }: Case): { data: Uint8Array; x: Float32Array } {
  const seed = type * 1000 + rows * 7 + nIn + nOut;
  return { data: quantize(type, normals(nIn * nOut, seed, 0.05)), x: normals(rows * nIn, seed + 1) };
}

function compare(actual: Float32Array, expected: Float32Array) {
  let maxError = 0;
  let maxExpected = 0;
  let worst = -1;
  for (let i = 0; i < expected.length; i++) {
    const error = Math.abs(actual[i]! - expected[i]!);
    if (!(error <= maxError)) {
      maxError = error;
      worst = i;
    }
    maxExpected = Math.max(maxExpected, Math.abs(expected[i]!));
  }
  return { nmse: nmse(actual, expected), relative: maxError / maxExpected, worst };
}

function describeCase({ type, rows, nIn, nOut }: Case): string {
  return `${ggmlTypeName(type)} ${rows}×${nIn}→${nOut}`;
}

/** Each case's output with `environment` set (read when a context is created), from a child process. */
function outputsWith(environment: Record<string, string>, cases: Case[]): Float32Array[] {
  return childRun(environment, cases).outputs;
}

/** outputsWith's child process, and its stderr (runChild). */
function childRun(environment: Record<string, string>, cases: Case[]): { outputs: Float32Array[]; stderr: string } {
  return runChild(
    environment,
    `for (const { type, rows, nIn, nOut } of ${JSON.stringify(cases)}) {
      const seed = type * 1000 + rows * 7 + nIn + nOut;
      const data = quantize(type, normals(nIn * nOut, seed, 0.05));
      const w = backend.uploadWeight(tensorInfo("w", type, [nIn, nOut], data), data);
      const x = backend.allocate(rows * nIn);
      backend.write(x, normals(rows * nIn, seed + 1));
      const out = backend.allocate(rows * nOut);
      backend.matmul(out, x, w, rows);
      emit(backend.read(out));
    }`,
  );
}

/**
 * `body` in a child process with `environment` set (read when a context is created): it has
 * `backend` (a CudaBackend), `normals`, `tensorInfo`, `quantize` and `GGMLType`, and `emit(values)`
 * gives back a Float32Array (one per call, in order). On the emulator with
 * MEMRA_CUDA_EMULATOR_PROFILE=1 in `environment`, the child prints the emulator's kernel profile on
 * its stderr before it exits (Bun runs no library destructors: the child calls
 * memra_cuda_emulator_profile_report itself).
 */
function runChild(environment: Record<string, string>, body: string): { outputs: Float32Array[]; stderr: string } {
  const url = (file: string) => JSON.stringify(fileURLToPath(new URL(file, import.meta.url)));
  const script = `
    const { CudaBackend } = await import(${url("./cuda-backend.ts")});
    const { normals, tensorInfo } = await import(${url("../../core/src/internal.ts")});
    const { quantize, GGMLType } = await import(${url("../../gguf/src/index.ts")});
    const backend = CudaBackend.create();
    const emit = (values) => console.log(Buffer.from(values.buffer, values.byteOffset, values.byteLength).toString("base64"));
    ${body}
    backend.dispose();
    if (process.env.MEMRA_CUDA_EMULATOR_PROFILE === "1" && process.env.MEMRA_CUDA_LIBRARY) {
      const { dlopen } = await import("bun:ffi");
      dlopen(process.env.MEMRA_CUDA_LIBRARY, { memra_cuda_emulator_profile_report: { args: [], returns: "void" } }).symbols.memra_cuda_emulator_profile_report();
    }`;
  const result = spawnSync(process.execPath.includes("bun") ? process.execPath : "bun", ["-e", script], {
    env: { ...process.env, ...environment },
    encoding: "utf8",
    maxBuffer: 1 << 28,
  });
  if (result.status !== 0) throw new Error(`the child process failed (${result.status}): ${result.stderr}`);
  const outputs = result.stdout
    .trim()
    .split("\n")
    .map((line) => {
      const bytes = Buffer.from(line, "base64");
      return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4).slice();
    });
  return { outputs, stderr: result.stderr };
}

describe.skipIf(unavailable !== undefined)(`int8 GEMM against the reference backend and the previous kernel${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let backend: CudaBackend;
  let pair: BackendPair;
  const outputs = new Map<Case, Float32Array>();
  beforeAll(() => {
    backend = CudaBackend.create();
    pair = new BackendPair(backend, new ReferenceBackend());
  });
  afterAll(() => backend?.dispose());

  it("q8_0, q4_0 and q5_0 at shapes that are not tile multiples: within the bounds of the reference", () => {
    const results: Record<string, ReturnType<typeof compare>> = {};
    for (const testCase of CASES) {
      const { type, rows, nIn, nOut } = testCase;
      const { data, x: values } = inputs(testCase);
      const [w, wRef] = pair.weights(tensorInfo("w", type, [nIn, nOut], data), data);
      const [x, xRef] = pair.buffers(values);
      const out = pair.native.allocate(rows * nOut);
      const outRef = pair.reference.allocate(rows * nOut);
      pair.native.matmul(out, x, w, rows);
      pair.reference.matmul(outRef, xRef, wRef, rows);
      const actual = pair.native.read(out);
      outputs.set(testCase, actual);
      results[describeCase(testCase)] = compare(actual, pair.reference.read(outRef));
    }
    if (process.env.MEMRA_PRINT_NMSE) console.log("int8 GEMM against the reference", results);
    for (const [what, { nmse: error, relative, worst }] of Object.entries(results)) {
      expect(error, `${what}: NMSE (worst element ${worst})`).toBeLessThanOrEqual(NMSE_BOUND);
      expect(relative, `${what}: max |error| / max |reference| (worst element ${worst})`).toBeLessThanOrEqual(MAX_ERROR_BOUND);
    }
  });

  it("agrees with the previous kernel (MEMRA_CUDA_INT8_GEMM=0, gemm_codes_kernel) within the same bounds", () => {
    expect(outputs.size, "the first test has run").toBe(CASES.length);
    const previous = outputsWith({ MEMRA_CUDA_INT8_GEMM: "0" }, CASES);
    expect(previous.length).toBe(CASES.length);
    const results: Record<string, ReturnType<typeof compare>> = {};
    for (const [i, testCase] of CASES.entries()) results[describeCase(testCase)] = compare(outputs.get(testCase)!, previous[i]!);
    if (process.env.MEMRA_PRINT_NMSE) console.log("int8 GEMM against gemm_codes_kernel", results);
    let identical = 0;
    for (const [what, { nmse: error, relative, worst }] of Object.entries(results)) {
      expect(error, `${what}: NMSE (worst element ${worst})`).toBeLessThanOrEqual(NMSE_BOUND);
      expect(relative, `${what}: max |difference| / max |previous| (worst element ${worst})`).toBeLessThanOrEqual(MAX_ERROR_BOUND);
      if (relative === 0) identical++;
    }
    // Different kernels: rounding differs somewhere (were they all identical, the switch would not switch).
    expect(identical, "cases where the two kernels agree bit for bit").toBeLessThan(CASES.length);
  });
});

describe.skipIf(unavailable !== undefined)(`q8_0 decode, 4 steps in flight against 2${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  it("MEMRA_CUDA_MMV_STEPS=2 and the default 4 sum the same blocks in the same order (one warp a feature)", () => {
    const cases: Case[] = [1, 3, 8].flatMap((rows) => [32, 96, 544, 1056, 2080].map((nIn) => ({ type: GGMLType.Q8_0, rows, nIn, nOut: 13 })));
    const fourSteps = outputsWith({ MEMRA_CUDA_MMV_SPLIT: "1" }, cases);
    const twoSteps = outputsWith({ MEMRA_CUDA_MMV_STEPS: "2", MEMRA_CUDA_MMV_SPLIT: "1" }, cases);
    cases.forEach((testCase, i) => expect(firstDifference(fourSteps[i]!, twoSteps[i]!), describeCase(testCase)).toBe(-1));
  });
});

/**
 * Decode with a feature's weights split over 2 or 4 warps (memra_cuda_plan_mmv_split: where a launch
 * has too few features to keep the memory busy, e.g. Qwen3-0.6B's O and down projections): warp p
 * of a feature sums iterations p, p + split, ... of its weights, and the warps' totals are added in
 * warp order. Forced with MEMRA_CUDA_MMV_SPLIT (read when a context is created: child processes).
 * The three decode kernels: q8_0 (matrix_vector_q8_0_kernel, an iteration of 1,024 inputs), q4_K
 * and q4_0 (matrix_vector_codes_kernel) and f16 (matrix_vector_kernel): 32 lanes × 4 groups of 8
 * inputs (1,024) for 1 or 2 rows, × 2 (512) for more. Inputs give 1 to 10 iterations (the smallest:
 * one; a last iteration of a few blocks; 3,072: the 0.6B down projection; 5,120 and more: uneven
 * shares of 4 warps); 13 features leave a split block's last features past the matrix; 1, 2, 3 and
 * 8 rows are each of the kernels' row counts.
 *
 * Bounds: against one warp a feature (MEMRA_CUDA_MMV_SPLIT=1, checked against the reference by
 * cuda-backend.test.ts), the same terms summed in another f32 order: the int8 GEMM's bounds above;
 * q8_0 against the reference with them too. With one iteration the other warps add zeros to the
 * first one's total: bit for bit.
 */
describe.skipIf(unavailable !== undefined)(`decode split over warps${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  const inputCounts: Array<[GGMLType, number[]]> = [
    [GGMLType.Q8_0, [32, 1056, 3072, 5152]],
    [GGMLType.Q4_K, [256, 1280, 3072, 5120]],
    [GGMLType.Q4_0, [32, 1056, 3072]],
    [GGMLType.F16, [32, 1056, 3072, 5152]],
  ];
  const cases: Case[] = inputCounts.flatMap(([type, counts]) => [1, 2, 3, 8].flatMap((rows) => counts.map((nIn) => ({ type, rows, nIn, nOut: 13 }))));
  /** Inputs a warp's first iteration covers. */
  const iteration = ({ type, rows }: Case) => (type === GGMLType.Q8_0 || rows <= 2 ? 1024 : 512);
  let single: Float32Array[];
  beforeAll(() => {
    single = outputsWith({ MEMRA_CUDA_MMV_SPLIT: "1" }, cases);
  });

  it.each(["2", "4"])("MEMRA_CUDA_MMV_SPLIT=%s: within the bounds of one warp a feature (q8_0: and of the reference), bit for bit where it has one iteration", (split) => {
    const reference = new ReferenceBackend();
    const actual = outputsWith({ MEMRA_CUDA_MMV_SPLIT: split }, cases);
    const results: Record<string, ReturnType<typeof compare>> = {};
    let identical = 0;
    cases.forEach((testCase, i) => {
      const { type, rows, nIn, nOut } = testCase;
      results[`${describeCase(testCase)} against one warp`] = compare(actual[i]!, single[i]!);
      if (type === GGMLType.Q8_0) {
        const { data, x: values } = inputs(testCase);
        const w = reference.uploadWeight(tensorInfo("w", type, [nIn, nOut], data), data);
        const x = reference.allocate(rows * nIn);
        reference.write(x, values);
        const out = reference.allocate(rows * nOut);
        reference.matmul(out, x, w, rows);
        results[`${describeCase(testCase)} against the reference`] = compare(actual[i]!, reference.read(out));
      }
      const difference = firstDifference(actual[i]!, single[i]!);
      if (nIn <= iteration(testCase)) expect(difference, `${describeCase(testCase)}: one iteration, against one warp a feature`).toBe(-1);
      else if (difference === -1) identical++;
    });
    if (process.env.MEMRA_PRINT_NMSE) console.log(`decode split ${split}`, results);
    for (const [what, { nmse: error, relative, worst }] of Object.entries(results)) {
      expect(error, `${what}: NMSE (worst element ${worst})`).toBeLessThanOrEqual(NMSE_BOUND);
      expect(relative, `${what}: max |error| / max |expected| (worst element ${worst})`).toBeLessThanOrEqual(MAX_ERROR_BOUND);
    }
    // several iterations: other sums than one warp's, so somewhere other roundings
    const several = cases.filter((c) => c.nIn > iteration(c)).length;
    expect(identical, "cases of several iterations where the split agrees bit for bit with one warp").toBeLessThan(several / 2);
  });

  it("the default splits where the plan says so: the 0.6B down projection's shape as MEMRA_CUDA_MMV_SPLIT=4, the Q/K/V shape as 1", () => {
    const down: Case = { type: GGMLType.Q8_0, rows: 1, nIn: 3072, nOut: 1024 };
    const qkv: Case = { type: GGMLType.Q8_0, rows: 1, nIn: 1024, nOut: 40 };
    const [defaultDown, defaultQkv] = outputsWith({}, [down, qkv]);
    const [fourDown] = outputsWith({ MEMRA_CUDA_MMV_SPLIT: "4" }, [down]);
    const [oneDown, oneQkv] = outputsWith({ MEMRA_CUDA_MMV_SPLIT: "1" }, [down, qkv]);
    expect(firstDifference(defaultDown!, fourDown!)).toBe(-1);
    expect(firstDifference(defaultDown!, oneDown!)).not.toBe(-1);
    expect(firstDifference(defaultQkv!, oneQkv!)).toBe(-1);
  });
});

/**
 * The pipelined int8 GEMM (gemm_int8_pipe_kernel, MEMRA_CUDA_INT8_PIPELINE=1: q8_0 weights in the
 * repacked q8_0_x8 layout, whose rows are multiples of 256 inputs): the operands brought by cp.async
 * 4 k-tiles of 128 inputs ahead and read by ldmatrix, over the same plan and split-K parts as
 * gemm_int8_kernel, each output's block terms in the same order with the same roundings, so the
 * same bits; launches of at most 64 rows on 64-row tiles (gemm_int8_pipe_kernel<64>: the same
 * grid, the same bits). Shapes: 9 and 64 rows (64-row tiles), 130 and 300 (two and three 128-row
 * tiles, the last partial), 8 and 200 outputs, 256
 * and 768 inputs (these few output tiles are split over k into parts of 64-input k-tiles, so parts
 * that end in half a 128-input k-tile) and 4,096 (32 k-tiles). On the emulator (whose cp.async
 * lands only at the wait that completes it, so a read before its wait sees stale shared memory) the
 * child's kernel profile shows that the pipelined kernel ran.
 */
describe.skipIf(unavailable !== undefined)(`pipelined int8 GEMM${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  it("MEMRA_CUDA_INT8_PIPELINE=1 gives gemm_int8_kernel's results bit for bit", () => {
    const cases: Case[] = [
      ...[9, 64, 130, 300].flatMap((rows) => [8, 200].flatMap((nOut) => [256, 768].map((nIn) => ({ type: GGMLType.Q8_0, rows, nIn, nOut })))),
      { type: GGMLType.Q8_0, rows: 130, nIn: 4096, nOut: 200 },
    ];
    const emulated = process.env.MEMRA_CUDA_LIBRARY?.includes("emulated") === true;
    const profile: Record<string, string> = emulated ? { MEMRA_CUDA_EMULATOR_PROFILE: "1" } : {};
    const before = childRun({ MEMRA_CUDA_INT8_PIPELINE: "0", ...profile }, cases);
    const piped = childRun({ MEMRA_CUDA_INT8_PIPELINE: "1", ...profile }, cases);
    if (emulated) {
      expect(before.stderr).toContain("gemm_int8_kernel<MEMRA_CUDA_TYPE_Q8_0_X8>");
      expect(before.stderr).not.toContain("gemm_int8_pipe_kernel");
      expect(piped.stderr).toContain("gemm_int8_pipe_kernel<64>"); // 9 and 64 rows
      expect(piped.stderr).toContain("gemm_int8_pipe_kernel<128>");
      expect(piped.stderr).not.toContain("gemm_int8_kernel<");
    }
    expect(piped.outputs.length).toBe(cases.length);
    cases.forEach((testCase, i) => {
      const { rows, nOut } = testCase;
      expect(piped.outputs[i]!.length, describeCase(testCase)).toBe(rows * nOut);
      expect(firstDifference(piped.outputs[i]!, before.outputs[i]!), describeCase(testCase)).toBe(-1);
    });
  });

  // MoE experts over many rows (memra_cuda_moe_grouped): with the pipeline the int8 tile table has
  // 64-row tiles and gemm_int8_pipe_kernel<64> runs the q8_0_x8 experts (an expert's rows at pp512
  // of 30B-A3B are 32 on average: a 128-row tile was three quarters empty). 8 experts of 256 → 512
  // → 256, 3 a row, over 40 and 400 rows and 400 routed mostly to experts 2 and 5 (several tiles
  // each, some experts none). A row's sums do not depend on the tiles; the split-K parts do
  // (two blocks an SM): within the bounds of the default kernel's.
  it("MoE experts on 64-row tiles of the pipelined kernel: within the bounds of gemm_int8_kernel's 128-row ones", () => {
    const body = `
      const [experts, k, embedding, ffn] = [8, 3, 256, 512];
      const upload = (name, shape, seed) => {
        const data = quantize(GGMLType.Q8_0, normals(shape[0] * shape[1] * shape[2], seed, 0.1));
        return backend.uploadWeight(tensorInfo(name, GGMLType.Q8_0, shape, data), data);
      };
      const weights = { gate: upload("gate", [embedding, ffn, experts], 61), up: upload("up", [embedding, ffn, experts], 62), down: upload("down", [ffn, embedding, experts], 63) };
      for (const [rows, skewed] of [[40, false], [400, false], [400, true]]) {
        const x = backend.allocate(rows * embedding);
        backend.write(x, normals(rows * embedding, 64 + rows));
        const routerLogits = normals(rows * experts, 66 + rows, 2);
        if (skewed) for (let r = 0; r < rows; r++) for (const e of [2, 5]) routerLogits[r * experts + e] += 20;
        const logits = backend.allocate(rows * experts);
        backend.write(logits, routerLogits);
        const out = backend.allocate(rows * embedding);
        if (!backend.moeExperts(out, x, logits, weights, rows, experts, k)) throw new Error("moeExperts declined");
        emit(backend.read(out));
      }`;
    const run = (environment: Record<string, string>) => runChild(environment, body);
    const emulated = process.env.MEMRA_CUDA_LIBRARY?.includes("emulated") === true;
    const profile: Record<string, string> = emulated ? { MEMRA_CUDA_EMULATOR_PROFILE: "1" } : {};
    const before = run({ MEMRA_CUDA_INT8_PIPELINE: "0", ...profile });
    const piped = run({ MEMRA_CUDA_INT8_PIPELINE: "1", ...profile });
    if (emulated) {
      expect(before.stderr).toContain("gemm_int8_kernel<MEMRA_CUDA_TYPE_Q8_0_X8>");
      expect(piped.stderr).toContain("gemm_int8_pipe_kernel<64>");
      expect(piped.stderr).not.toContain("gemm_int8_pipe_kernel<128>");
      expect(piped.stderr).not.toContain("gemm_int8_kernel<");
    }
    expect(piped.outputs.length).toBe(3);
    piped.outputs.forEach((actual, i) => {
      expect(actual.length).toBe(before.outputs[i]!.length);
      const { nmse: error, relative, worst } = compare(actual, before.outputs[i]!);
      expect(error, `case ${i}: NMSE (worst element ${worst})`).toBeLessThanOrEqual(NMSE_BOUND);
      expect(relative, `case ${i}: max |difference| / max |default| (worst element ${worst})`).toBeLessThanOrEqual(MAX_ERROR_BOUND);
    });
  });

  // 64 rows of 2,048 inputs into 2,048 outputs: 16 column tiles of 32 k-tiles. The split-K plan
  // counts the blocks that run at once: 132 for gemm_int8_kernel (one an SM) gives 8 parts (a wave
  // of 128 blocks), 264 for the 64-row pipelined kernel (two an SM) 16 parts (a wave of 256). Other
  // partial sums, so other roundings: within the first test's bounds of the default kernel.
  it("at 64 rows its own split-K (two blocks an SM): within the bounds of gemm_int8_kernel's", () => {
    const wide: Case = { type: GGMLType.Q8_0, rows: 64, nIn: 2048, nOut: 2048 };
    const [before] = outputsWith({ MEMRA_CUDA_INT8_PIPELINE: "0" }, [wide]);
    const [piped] = outputsWith({ MEMRA_CUDA_INT8_PIPELINE: "1" }, [wide]);
    const { nmse: error, relative, worst } = compare(piped!, before!);
    expect(error, `NMSE (worst element ${worst})`).toBeLessThanOrEqual(NMSE_BOUND);
    expect(relative, `max |difference| / max |default| (worst element ${worst})`).toBeLessThanOrEqual(MAX_ERROR_BOUND);
    expect(firstDifference(piped!, before!), "other parts: other roundings somewhere").not.toBe(-1);
  });
});
