/**
 * libmemra_cpu's memra_quantize against @memra/gguf's TypeScript quantizers, bit for bit: the
 * synthetic models (and so the goldens recorded from them) must not depend on which one ran.
 */
import { GGMLType, type GGUFTensorToWrite, ggmlTypeName, quantize } from "@memra/gguf";
import { describe, expect, it } from "vitest";
import { nativeQuantize, nativeQuantizerUnavailableReason, quantizeWeights } from "./native-quantize";
import { SeededRandom } from "./random";
import { buildSyntheticModel, resolveOptions } from "./synthetic-model";

const seededNormalValues = (count: number, seed: number) => new SeededRandom(`native-quantize:${seed}`).normals(count, 0, 1);

const K_TYPES = [GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K];
const BLOCK_32_TYPES = [GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0];
const TYPES = [...K_TYPES, ...BLOCK_32_TYPES, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ3_S];
const unavailable = nativeQuantizerUnavailableReason();
const required = process.env.MEMRA_REQUIRE_NATIVE === "1";

/** Blocks of 256 that take each branch of the scale searches: zeros, one value, one sign, constants, outliers, tiny and huge magnitudes. */
function edgeBlocks(): Float32Array {
  const blocks: number[][] = [];
  const normal = seededNormalValues(256 * 16, 7);
  const block = (make: (i: number) => number) => blocks.push(Array.from({ length: 256 }, (_, i) => make(i)));
  block(() => 0);
  block((i) => (i === 37 ? 0.5 : 0));
  block((i) => (i === 200 ? -3 : 0));
  block((i) => Math.abs(normal[i]!)); // all positive: min clamps to 0
  block((i) => -Math.abs(normal[256 + i]!)); // all negative
  block(() => 0.25); // constant: max == min
  block((i) => (i < 128 ? 1 : -1));
  block((i) => normal[512 + i]! * (i % 17 === 0 ? 100 : 1)); // outliers
  block((i) => normal[768 + i]! * 1e-20); // below GROUP_MAX_EPS in every group
  block((i) => normal[1024 + i]! * 1e-7); // scales in f16's subnormal range
  block((i) => normal[1280 + i]! * 1e-3 * (i < 16 ? 0 : 1)); // one zero group
  block((i) => normal[1536 + i]! * 6e4); // d near f16's largest value
  block((i) => normal[1792 + i]! * 1e6); // d overflows f16
  block((i) => Math.round(normal[2048 + i]! * 4) / 4); // many exact ties
  block((i) => (i % 2 === 0 ? 1e-30 : -1e-30) * (i + 1));
  block((i) => normal[2304 + i]! + 3); // offset: min above 0
  block((i) => normal[2560 + i]! * 1e-39); // subnormal values: a block's 1/d overflows to infinity
  block((i) => (i % 32 === 5 ? 1e-39 : 0)); // one subnormal value per 32, the rest zero (0 * inf: NaN)
  return new Float32Array(blocks.flat());
}

describe.skipIf(unavailable !== undefined && !required)("native quantization (memra_quantize)", () => {
  it("is available where the native library is built", () => {
    expect(unavailable).toBeUndefined();
  });

  describe.each(TYPES.map((type) => [ggmlTypeName(type), type] as const))("%s", (_name, type) => {
    it("writes the TypeScript quantizer's bytes for seeded normal values at three scales", () => {
      for (const [scale, seed] of [
        [0.02, 1],
        [1, 2],
        [1000, 3],
      ] as const) {
        const values = seededNormalValues(256 * 512, seed).map((v) => v * scale);
        const native = nativeQuantize(type, values)!;
        expect(native).toBeDefined();
        expect(Buffer.from(native).equals(Buffer.from(quantize(type, values)))).toBe(true);
      }
    });

    it("writes the TypeScript quantizer's bytes for blocks on every branch", () => {
      const values = edgeBlocks();
      const native = nativeQuantize(type, values)!;
      const reference = quantize(type, values);
      const blockBytes = reference.length / (values.length / 256);
      const differing: number[] = [];
      for (let b = 0; b < values.length / 256; b++) {
        if (!Buffer.from(native.subarray(b * blockBytes, (b + 1) * blockBytes)).equals(Buffer.from(reference.subarray(b * blockBytes, (b + 1) * blockBytes)))) differing.push(b);
      }
      expect(differing).toEqual([]);
    });
  });

  it("writes the same bytes on the portable path (MEMRA_CPU_ISA=scalar) as on the vector one", () => {
    // the library picks its path once per process: a child process runs the portable one
    const script = `
      import { nativeQuantize } from ${JSON.stringify(new URL("./native-quantize.ts", import.meta.url).pathname)};
      import { SeededRandom } from ${JSON.stringify(new URL("./random.ts", import.meta.url).pathname)};
      const values = new SeededRandom("native-quantize:portable").normals(256 * 64, 0, 1);
      console.log(JSON.stringify([${TYPES.join(", ")}].map((type) => Bun.hash(nativeQuantize(type, values)).toString())));
    `;
    const child = Bun.spawnSync([process.execPath, "-e", script], { env: { ...process.env, MEMRA_CPU_ISA: "scalar" } });
    expect(child.stderr.toString()).toBe("");
    const values = new SeededRandom("native-quantize:portable").normals(256 * 64, 0, 1);
    const expected = TYPES.map((type) => Bun.hash(quantize(type, values)).toString());
    expect(JSON.parse(child.stdout.toString())).toEqual(expected);
  });

  it("rejects a count that is not a whole number of blocks, naming it", () => {
    expect(() => nativeQuantize(GGMLType.Q4_K, new Float32Array(300))).toThrow(/memra_quantize: count is 300, not a whole number of q4_K blocks \(256 values\)/);
    expect(() => nativeQuantize(GGMLType.Q8_0, new Float32Array(48))).toThrow(/memra_quantize: count is 48, not a whole number of q8_0 blocks \(32 values\)/);
  });

  it("leaves the types it does not implement to the TypeScript quantizer", () => {
    const values = seededNormalValues(256 * 4, 9);
    expect(nativeQuantize(GGMLType.BF16, values)).toBeUndefined();
    expect(Buffer.from(quantizeWeights(GGMLType.BF16, values)).equals(Buffer.from(quantize(GGMLType.BF16, values)))).toBe(true);
  });

  it("gives a synthetic model the same tensor bytes as the TypeScript quantizers", () => {
    // hidden 256: every matrix a k-quant (the embedding, 39 M values, left out: the per-type checks cover it)
    for (const weightType of ["q4_K_M", "q2_K", "q3_K", "q5_K"] as const) {
      const options = resolveOptions("small", { weightType });
      const native = (buildSyntheticModel(options).tensors ?? []).filter((t) => t.name.startsWith("blk.0."));
      const typescript = (buildSyntheticModel(options, quantize).tensors ?? []).filter((t) => t.name.startsWith("blk.0."));
      const kQuant = native.filter((t) => K_TYPES.includes(t.type));
      expect(kQuant.length).toBeGreaterThanOrEqual(7);
      for (let i = 0; i < native.length; i++) {
        // the generator gives each tensor's bytes whole
        const bytes = (data: GGUFTensorToWrite["data"]) => Buffer.from((typeof data === "function" ? data() : data) as Uint8Array);
        expect(bytes(native[i]!.data).equals(bytes(typescript[i]!.data)), native[i]!.name).toBe(true);
      }
    }
  });
});
