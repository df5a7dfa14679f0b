/**
 * Every native op against the reference backend's op on the same seeded random inputs, by
 * normalised mean squared error: NMSE = Σ(native − reference)² / Σ reference².
 *
 * Bounds, with the largest NMSE measured here on each SIMD path (avx512vnni / avx2 / scalar, forced
 * with MEMRA_CPU_ISA):
 * - f32 row and elementwise ops (rmsNorm, ropeNeox, attention, swiglu, add, moeRoute weights,
 *   scatter-add): 1e-12. Measured ≤ 2e-14: the native ops compute in f32 (attention and silu with a
 *   polynomial e^x) where the reference uses double; f32 rounding alone gives ~1e-14.
 * - embedding and gatherRows: exact. Both sides dequantize with ggml's formulas.
 * - matmul / expertMatmul, every weight type the library supports: 1e-10. Measured ≤ 4.1e-14 /
 *   6.0e-14 / 2.7e-14. Both sides round activations identically (ggml's vec_dot_type conversion),
 *   so only f32 summation order against the reference's double sums remains. One activation that
 *   rounds to a neighbouring integer would cost ~1e-8 on these shapes, so the bound also catches a
 *   conversion that drifts from ggml's. MEMRA_PRINT_NMSE=1 prints the matmul NMSE per type.
 */
import { ReferenceBackend, UnsupportedTensorTypeError, resolveRopeScaling } from "@memra/core";
import { GGMLType, canQuantize, ggmlTypeName, quantize } from "@memra/gguf";
import { ptr } from "bun:ffi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { BackendDisposedError, NativeError } from "./errors";
import { nativeLibraryUnavailableReason } from "./native-availability";
import { mulberry32 } from "@memra/synthetic";
import { ALL_GGML_TYPES, BackendPair, expectKVRowsPortable, expectRotateKVMatches, nmse, normals, pagedLayout, residentFraction, tensorInfo, weightBytes } from "@memra/core/internal";

const unavailable = nativeLibraryUnavailableReason();

const ELEMENTWISE_BOUND = 1e-12;
const MATMUL_BOUND = 1e-10;
/** The i-quants (random valid blocks from weightBytes: no quantizer needed). */
const I_QUANTS = [GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M];



describe.skipIf(unavailable !== undefined)(`CpuBackend ops against the reference backend${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let backend: CpuBackend;
  let pair: BackendPair;
  beforeAll(() => {
    backend = CpuBackend.create({ threads: 2 });
    pair = new BackendPair(backend, new ReferenceBackend());
  });
  afterAll(() => backend?.dispose());

  const matmulTypes = () => ALL_GGML_TYPES.filter((type) => backend.supportsOp("matmul", type));

  it("reports its library, SIMD path and threads", () => {
    expect(backend.library.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(["avx512vnni", "avx2", "neondot", "neon", "scalar"]).toContain(backend.isa);
    expect(backend.threads).toBe(2);
  });

  it("supports matmul for the types it has kernels for (asked from the library)", () => {
    const supported = matmulTypes().map(ggmlTypeName);
    expect(supported).toEqual(expect.arrayContaining(["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K"]));
    expect(supported).toEqual(expect.arrayContaining(["q2_K", "q3_K", "iq4_nl", "iq4_xs", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"]));
    for (const type of I_QUANTS) expect(backend.supportsOp("embedding", type), ggmlTypeName(type)).toBe(true);
    expect(backend.supportsOp("matmul", GGMLType.TQ2_0)).toBe(false);
    expect(backend.supportsOp("add")).toBe(true);
  });

  it.each([
    [1, "decode"],
    [5, "small batch"],
    [70, "prefill over two activation tiles"],
  ])("matmul, every supported weight type, %i row(s) (%s): NMSE ≤ 1e-10", (rows) => {
    const nIn = 512;
    const nOut = 37; // not a multiple of 4: exercises the single-row tail
    const results: Record<string, number> = {};
    for (const type of matmulTypes()) {
      const values = normals(nIn * nOut, 1000 + type, 0.05);
      const data = weightBytes(type, values, 2000 + type);
      const [w, wRef] = pair.weights(tensorInfo(`w.${ggmlTypeName(type)}`, type, [nIn, nOut], data), data);
      const [x, xRef] = pair.buffers(normals(rows * nIn, 3000 + rows));
      const out = pair.native.allocate(rows * nOut);
      const outRef = pair.reference.allocate(rows * nOut);
      pair.native.matmul(out, x, w, rows);
      pair.reference.matmul(outRef, xRef, wRef, rows);
      results[ggmlTypeName(type)] = nmse(pair.native.read(out), pair.reference.read(outRef));
    }
    if (process.env.MEMRA_PRINT_NMSE) console.log(rows, results);
    for (const [type, error] of Object.entries(results)) expect(error, `matmul ${type} NMSE`).toBeLessThanOrEqual(MATMUL_BOUND);
  });

  it("expertMatmul picks the expert's matrix of a 3-D weight: NMSE ≤ 1e-10", () => {
    const [nIn, nOut, experts, rows] = [256, 24, 3, 4];
    for (const type of [GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.F16, ...I_QUANTS]) {
      const data = weightBytes(type, normals(nIn * nOut * experts, 40 + type, 0.05), 50);
      const [w, wRef] = pair.weights(tensorInfo("experts", type, [nIn, nOut, experts], data), data);
      const [x, xRef] = pair.buffers(normals(rows * nIn, 41));
      for (let expert = 0; expert < experts; expert++) {
        const out = pair.native.allocate(rows * nOut);
        const outRef = pair.reference.allocate(rows * nOut);
        pair.native.expertMatmul(out, x, w, expert, rows);
        pair.reference.expertMatmul(outRef, xRef, wRef, expert, rows);
        expect(nmse(pair.native.read(out), pair.reference.read(outRef)), `${ggmlTypeName(type)} expert ${expert}`).toBeLessThanOrEqual(MATMUL_BOUND);
      }
    }
  });

  it("embedding dequantizes table rows exactly like the reference, for every supported type", () => {
    const [width, vocabulary] = [256, 10];
    const tokens = Int32Array.from([3, 0, 9, 3]);
    for (const type of ALL_GGML_TYPES.filter((t) => backend.supportsOp("embedding", t) && (canQuantize(t) || I_QUANTS.includes(t)))) {
      const data = weightBytes(type, normals(width * vocabulary, 60 + type, 0.1), 61);
      const [table, tableRef] = pair.weights(tensorInfo("token_embd.weight", type, [width, vocabulary], data), data);
      const out = pair.native.allocate(tokens.length * width);
      const outRef = pair.reference.allocate(tokens.length * width);
      pair.native.embedding(out, table, tokens);
      pair.reference.embedding(outRef, tableRef, tokens);
      expect(pair.native.read(out), `embedding ${ggmlTypeName(type)}`).toEqual(pair.reference.read(outRef));
    }
  });

  it("rmsNorm (in place and out of place; f32 and f16 weights): NMSE ≤ 1e-12", () => {
    const [rows, width] = [40, 1024]; // 40 × 1024 values: the threaded path
    for (const type of [GGMLType.F32, GGMLType.F16]) {
      const data = quantize(type, normals(width, 70, 0.5));
      const [w, wRef] = pair.weights(tensorInfo("norm", type, [width], data), data);
      const input = normals(rows * width, 71, 2);
      const [x, xRef] = pair.buffers(input);
      const out = pair.native.allocate(rows * width);
      const outRef = pair.reference.allocate(rows * width);
      pair.native.rmsNorm(out, x, w, rows, 1e-6);
      pair.reference.rmsNorm(outRef, xRef, wRef, rows, 1e-6);
      expect(nmse(pair.native.read(out), pair.reference.read(outRef))).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
      // per-head QK-norm style: in place over rows of the weight's width
      pair.native.rmsNorm(x, x, w, rows, 1e-6);
      pair.reference.rmsNorm(xRef, xRef, wRef, rows, 1e-6);
      expect(nmse(pair.native.read(x), pair.reference.read(xRef))).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
    }
  });

  it("ropeNeox: NMSE ≤ 1e-12", () => {
    for (const [heads, headDim, freqBase] of [
      [4, 64, 10000],
      [8, 128, 1000000],
    ] as const) {
      const positions = Int32Array.from([0, 1, 2, 7, 100, 4095, 30000]);
      const [x, xRef] = pair.buffers(normals(positions.length * heads * headDim, 80 + headDim));
      pair.native.ropeNeox(x, positions, heads, headDim, freqBase);
      pair.reference.ropeNeox(xRef, positions, heads, headDim, freqBase);
      expect(nmse(pair.native.read(x), pair.reference.read(xRef)), `rope headDim ${headDim}`).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
    }
  });

  it("ropeNeoxScaled (YaRN and linear, Qwen3's 128K setting among them): NMSE ≤ 1e-12, and a bad scaling is an error", () => {
    const cases = [
      [4, 64, 10000, { type: "yarn", factor: 4, originalContextLength: 256 }],
      [8, 128, 1000000, { type: "yarn", factor: 4, originalContextLength: 32768 }],
      [4, 64, 10000, { type: "linear", factor: 2 }],
    ] as const;
    for (const [heads, headDim, freqBase, options] of cases) {
      const scaling = resolveRopeScaling({ ropeFreqBase: freqBase, contextLength: 40960 }, headDim, options)!;
      const positions = Int32Array.from([0, 1, 2, 7, 100, 4095, 30000, 131071]);
      const [x, xRef] = pair.buffers(normals(positions.length * heads * headDim, 90 + headDim));
      pair.native.ropeNeoxScaled!(x, positions, heads, headDim, freqBase, scaling);
      pair.reference.ropeNeoxScaled!(xRef, positions, heads, headDim, freqBase, scaling);
      expect(nmse(pair.native.read(x), pair.reference.read(xRef)), `${options.type} headDim ${headDim}`).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
      // Not the plain rotation.
      const [plain] = pair.buffers(normals(positions.length * heads * headDim, 90 + headDim));
      pair.native.ropeNeox(plain, positions, heads, headDim, freqBase);
      expect(nmse(pair.native.read(plain), pair.native.read(x))).toBeGreaterThan(1e-4);
    }
    const [x] = pair.buffers(normals(64, 1));
    expect(() => pair.native.ropeNeoxScaled!(x, Int32Array.of(1), 1, 64, 10000, { freqScale: 0, extFactor: 1, magnitude: 1, low: 0, high: 1 })).toThrow(/freq_scale is 0/);
  });

  it.each([
    [4, "portable tile"],
    [16, "AVX-512 tile where the CPU has it (blocks of 16 keys)"],
  ])("paged attention, several sequences at different positions through block tables, f32/f16/q8_0 KV, blocks of %i (%s): NMSE ≤ 1e-12", (blockTokens) => {
    const [heads, kvHeads, headDim, blocks] = [4, 2, 64, 48];
    const kvWidth = kvHeads * headDim;
    const random = mulberry32(93);
    for (const type of ["f32", "f16", "q8_0"] as const) {
      const keys = pair.native.allocateKV(type, blocks * blockTokens, kvWidth);
      const values = pair.native.allocateKV(type, blocks * blockTokens, kvWidth);
      const keysRef = pair.reference.allocateKV(type, blocks * blockTokens, kvWidth);
      const valuesRef = pair.reference.allocateKV(type, blocks * blockTokens, kvWidth);
      // Every slot written with random rows, the same on both backends.
      const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
      const [k, kRef] = pair.buffers(normals(slots.length * kvWidth, 90));
      const [v, vRef] = pair.buffers(normals(slots.length * kvWidth, 91));
      pair.native.writeKV(keys, slots, k);
      pair.native.writeKV(values, slots, v);
      pair.reference.writeKV(keysRef, slots, kRef);
      pair.reference.writeKV(valuesRef, slots, vRef);
      const bytes = (storage: unknown) => (storage as { bytes: Uint8Array }).bytes;
      expect(Buffer.compare(bytes(keys), bytes(keysRef)), `${type} stored bytes`).toBe(0);
      // Sequences (query rows, position): decode at 0 and 29, a prefill chunk after 5 tokens, a prefill from 0.
      const shapes = [
        [1, 0],
        [1, 29],
        [7, 5],
        [30, 0],
      ] as const;
      const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => Math.floor(random() * blocks));
      const [q, qRef] = pair.buffers(normals(rows * heads * headDim, 92));
      const out = pair.native.allocate(rows * heads * headDim);
      const outRef = pair.reference.allocate(rows * heads * headDim);
      const shape = { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) };
      pair.native.attention(out, q, { keys, values, blockTokens, blockTables, sequences }, shape);
      pair.reference.attention(outRef, qRef, { keys: keysRef, values: valuesRef, blockTokens, blockTables, sequences }, shape);
      expect(nmse(pair.native.read(out), pair.reference.read(outRef)), `paged attention ${type}`).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
      // One sequence alone gives the same rows as inside the batch (batch invariance of the kernel).
      const [q1] = pair.buffers(pair.native.read(q, 2 * heads * headDim, 7 * heads * headDim));
      const out1 = pair.native.allocate(7 * heads * headDim);
      const single = Int32Array.from([0, 7, 5, sequences[2 * 4 + 3]!]);
      pair.native.attention(out1, q1, { keys, values, blockTokens, blockTables, sequences: single }, { ...shape, rows: 7 });
      expect(pair.native.read(out1)).toEqual(pair.native.read(out, 2 * heads * headDim, 7 * heads * headDim));
    }
  });

  // Paging adds no drift: the paged kernel over scattered f32 blocks gives the contiguous kernel's
  // result (bit for bit on the portable path; with the AVX-512 tile, which fuses multiply-adds and
  // sums in another order, within the elementwise bound).
  it("paged f32 attention matches the contiguous kernel for one sequence (no drift from paging)", () => {
    const [heads, kvHeads, headDim, rows, position] = [16, 8, 128, 37, 20];
    const kvWidth = kvHeads * headDim;
    const visible = position + rows;
    const keys = normals(visible * kvWidth, 94);
    const values = normals(visible * kvWidth, 95);
    const q = normals(rows * heads * headDim, 96);
    const contiguous = new Float32Array(rows * heads * headDim);
    (pair.native as CpuBackend).library.call(
      "memra_cpu_attention",
      (pair.native as unknown as { context(): never }).context(),
      ptr(contiguous),
      contiguous.length,
      ptr(q),
      q.length,
      ptr(keys),
      ptr(values),
      keys.length,
      visible,
      rows,
      heads,
      kvHeads,
      headDim,
      position,
      1 / Math.sqrt(headDim),
    );
    const blockTokens = 16;
    const blocks = Math.ceil(visible / blockTokens);
    const storageKeys = pair.native.allocateKV("f32", blocks * blockTokens * 2, kvWidth);
    const storageValues = pair.native.allocateKV("f32", blocks * blockTokens * 2, kvWidth);
    const table = Int32Array.from({ length: blocks }, (_, b) => 2 * b + 1); // scattered blocks
    const slots = Int32Array.from({ length: visible }, (_, t) => table[Math.floor(t / blockTokens)]! * blockTokens + (t % blockTokens));
    const [k] = pair.buffers(keys);
    const [v] = pair.buffers(values);
    pair.native.writeKV(storageKeys, slots, k);
    pair.native.writeKV(storageValues, slots, v);
    const [query] = pair.buffers(q);
    const out = pair.native.allocate(rows * heads * headDim);
    pair.native.attention(
      out,
      query,
      { keys: storageKeys, values: storageValues, blockTokens, blockTables: table, sequences: Int32Array.from([0, rows, position, 0]) },
      { rows, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) },
    );
    if ((pair.native as CpuBackend).isa === "avx512vnni") expect(nmse(pair.native.read(out), contiguous)).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
    else expect(pair.native.read(out)).toEqual(contiguous);
  });

  it("swiglu and add, small and threaded lengths, in place: NMSE ≤ 1e-12", () => {
    for (const length of [100, 200_000]) {
      const [gate, gateRef] = pair.buffers(normals(length, 100, 3));
      const [up, upRef] = pair.buffers(normals(length, 101));
      pair.native.swiglu(gate, gate, up, length);
      pair.reference.swiglu(gateRef, gateRef, upRef, length);
      expect(nmse(...pair.read([gate, gateRef])), `swiglu ${length}`).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
      pair.native.add(up, up, gate, length);
      pair.reference.add(upRef, upRef, gateRef, length);
      expect(nmse(...pair.read([up, upRef])), `add ${length}`).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
    }
  });

  it("moeRoute: same experts and weights (NMSE ≤ 1e-12)", () => {
    const [rows, experts, k] = [9, 16, 4];
    const [logits, logitsRef] = pair.buffers(normals(rows * experts, 110, 2));
    const native = pair.native.moeRoute(logits, rows, experts, k);
    const reference = pair.reference.moeRoute(logitsRef, rows, experts, k);
    expect(native.ids).toEqual(reference.ids);
    expect(nmse(native.weights, reference.weights)).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
  });

  it.each(["f32", "f16", "q8_0"] as const)("readKVRows / writeKVRows: %s rows in the reference's layout, moved between backends", (type) => {
    expectKVRowsPortable(pair.native, pair.reference, type, ELEMENTWISE_BOUND);
  });

  it.each([
    ["f32", ELEMENTWISE_BOUND],
    ["f16", 1e-7],
    ["q8_0", 1e-4],
  ] as const)("rotateKV (the context shift's K shift): %s rows as the reference rotates them", (type, bound) => {
    expectRotateKVMatches(pair.native, pair.reference, type, bound);
  });

  it("gatherRows and scatterAddRows: NMSE ≤ 1e-12", () => {
    const [rows, width] = [6, 33];
    const [x, xRef] = pair.buffers(normals(rows * width, 120));
    const ids = Int32Array.from([4, 0, 4, 2]);
    const gathered = pair.native.allocate(ids.length * width);
    const gatheredRef = pair.reference.allocate(ids.length * width);
    pair.native.gatherRows(gathered, x, ids, width);
    pair.reference.gatherRows(gatheredRef, xRef, ids, width);
    expect(pair.native.read(gathered)).toEqual(pair.reference.read(gatheredRef));
    const scales = Float32Array.from([0.5, -1, 0.25, 2]);
    pair.native.scatterAddRows(x, gathered, ids, scales, width);
    pair.reference.scatterAddRows(xRef, gatheredRef, ids, scales, width);
    expect(nmse(...pair.read([x, xRef]))).toBeLessThanOrEqual(ELEMENTWISE_BOUND);
  });

  describe("errors", () => {
    it("a weight type without kernels: uploadWeight refuses it, the library names it", () => {
      const data = new Uint8Array(66 * 4);
      expect(() => backend.uploadWeight(tensorInfo("w", GGMLType.TQ2_0, [256, 4], data), data)).toThrow(UnsupportedTensorTypeError);
      const out = new Float32Array(4);
      const x = new Float32Array(256);
      for (const [type, name] of [
        [GGMLType.TQ2_0, "tq2_0"],
        [99, "type 99"],
      ] as const) {
        let error: unknown;
        try {
          backend.library.call("memra_cpu_matmul", backend["context"](), ptr(out), 4, ptr(x), 256, 1, type, ptr(data), data.length, 256, 4);
        } catch (caught) {
          error = caught;
        }
        expect(error).toBeInstanceOf(NativeError);
        expect((error as NativeError).message).toContain(`weight type ${name}`);
        expect((error as NativeError).status).toBe(2);
        expect((error as NativeError).symbol).toBe("memra_cpu_matmul");
      }
    });

    it("sizes are checked against buffer lengths, naming the buffer", () => {
      const data = quantize(GGMLType.Q8_0, normals(64 * 8, 130));
      const w = backend.uploadWeight(tensorInfo("w", GGMLType.Q8_0, [64, 8], data), data);
      const x = backend.allocate(64 * 2);
      const out = backend.allocate(8);
      expect(() => backend.matmul(out, x, w, 2)).toThrow(/memra_cpu_matmul: out holds 8 elements, 16 needed/);
      expect(() => backend.matmul(out, x, w, 3)).toThrow(/x holds 128 elements, 192 needed/);
      expect(() => backend.add(out, x, x, 9)).toThrow(/memra_cpu_add: out holds 8 elements, 9 needed/);
      const truncated = backend.uploadWeight(tensorInfo("w", GGMLType.Q8_0, [64, 8], data.subarray(0, 34)), data.subarray(0, 34));
      expect(() => backend.matmul(backend.allocate(8), backend.allocate(64), truncated, 1)).toThrow(/weight has 34 bytes, its shape needs 544/);
    });

    it("indices out of range are errors, not crashes", () => {
      const data = quantize(GGMLType.F16, normals(32 * 4, 140));
      const table = backend.uploadWeight(tensorInfo("token_embd.weight", GGMLType.F16, [32, 4], data), data);
      expect(() => backend.embedding(backend.allocate(32), table, Int32Array.from([4]))).toThrow(/token id 4 at position 0 is outside the table \(0..3\)/);
      expect(() => backend.gatherRows(backend.allocate(32), backend.allocate(64), Int32Array.from([-1]), 32)).toThrow(/row id -1/);
      const q = backend.allocate(64);
      const storage = backend.allocateKV("f16", 8, 64);
      const view = (blockTables: number[], sequence: number[]) => ({
        keys: storage,
        values: storage,
        blockTokens: 4,
        blockTables: Int32Array.from(blockTables),
        sequences: Int32Array.from(sequence),
      });
      const shape = { rows: 1, heads: 1, kvHeads: 1, headDim: 64, scale: 1 };
      expect(() => backend.attention(backend.allocate(64), q, view([2], [0, 1, 0, 0]), shape)).toThrow(/sequence 0 block 0 is 2, outside the storage's 2 blocks/);
      expect(() => backend.attention(backend.allocate(64), q, view([0], [0, 1, 4, 0]), shape)).toThrow(/sequence 0 needs 2 blocks from table offset 0, block_tables holds 1/);
      expect(() => backend.attention(backend.allocate(64), q, view([0], [0, 2, 0, 0]), shape)).toThrow(/sequences hold more than the 1 query rows/);
      expect(() => backend.writeKV(storage, Int32Array.from([8]), backend.allocate(64))).toThrow(/slot 8 \(row 0\) outside the storage's 8 slots/);
      expect(() => backend.allocateKV("q8_0", 8, 48)).toThrow(/multiple of 32/);
    });

    it("prefault makes KV storage resident", () => {
      const storage = backend.allocateKV("f16", 64 * 1024, 768); // 96 MiB
      const bytes = (storage as unknown as { bytes: Uint8Array }).bytes;
      storage.prefault!();
      expect(residentFraction(bytes)).toBe(1);
    });

    it("a NULL context is an error", () => {
      expect(() => backend.library.call("memra_cpu_add", null, null, 0, null, 0, null, 0, 0)).toThrow(/memra_cpu_add: cpu is NULL/);
    });

    it("dispose is safe twice; use after dispose throws", () => {
      const other = CpuBackend.create({ threads: 3 });
      const buffer = other.allocate(4);
      other.dispose();
      other.dispose();
      expect(() => other.add(buffer, buffer, buffer, 4)).toThrow(BackendDisposedError);
      {
        using scoped = CpuBackend.create({ threads: 1 });
        expect(scoped.threads).toBe(1);
      }
    });
  });
});
