import { GGMLType, openGGUF, tensorByteSize } from "@memra/gguf";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { kvRowBytes } from "../backend";
import { type FootprintTensor, type ModelShape, footprintFromTensors, modelFootprint } from "./model-footprint";
import { PlacementError } from "./placement-error";
import { DEFAULT_ACCELERATOR_RESERVE_BYTES, type PlacementDevice, type PlacementPlan, planPlacement } from "./plan-placement";

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** Qwen3-30B-A3B's real shape (48 layers, 128 experts of 768, GQA 32/4, vocabulary 151936). */
const QWEN3_30B_A3B: ModelShape = {
  architecture: "qwen3moe",
  layers: 48,
  embedding: 2048,
  queryWidth: 32 * 128,
  kvWidth: 4 * 128,
  vocabulary: 151936,
  feedForwardLength: 0,
  experts: 128,
  expertFeedForwardLength: 768,
  contextLength: 40960,
};

function tensor(name: string, type: GGMLType, shape: number[]): FootprintTensor {
  const byteSize = Number(tensorByteSize(type, shape));
  return { name, byteSize, elementCount: shape.reduce((a, b) => a * b, 1) };
}

/** The tensor table of a Q4_K (matrices), Q6_K (embedding and LM head), F32 (norms, router) 30B-A3B. */
function qwen3MoeTensors(s: ModelShape): FootprintTensor[] {
  const headDim = 128;
  const list = [tensor("token_embd.weight", GGMLType.Q6_K, [s.embedding, s.vocabulary]), tensor("output_norm.weight", GGMLType.F32, [s.embedding]), tensor("output.weight", GGMLType.Q6_K, [s.embedding, s.vocabulary])];
  for (let layer = 0; layer < s.layers; layer++) {
    const blk = `blk.${layer}`;
    list.push(
      tensor(`${blk}.attn_norm.weight`, GGMLType.F32, [s.embedding]),
      tensor(`${blk}.attn_q.weight`, GGMLType.Q4_K, [s.embedding, s.queryWidth]),
      tensor(`${blk}.attn_k.weight`, GGMLType.Q4_K, [s.embedding, s.kvWidth]),
      tensor(`${blk}.attn_v.weight`, GGMLType.Q4_K, [s.embedding, s.kvWidth]),
      tensor(`${blk}.attn_q_norm.weight`, GGMLType.F32, [headDim]),
      tensor(`${blk}.attn_k_norm.weight`, GGMLType.F32, [headDim]),
      tensor(`${blk}.attn_output.weight`, GGMLType.Q4_K, [s.queryWidth, s.embedding]),
      tensor(`${blk}.ffn_norm.weight`, GGMLType.F32, [s.embedding]),
      tensor(`${blk}.ffn_gate_inp.weight`, GGMLType.F32, [s.embedding, s.experts]),
      tensor(`${blk}.ffn_gate_exps.weight`, GGMLType.Q4_K, [s.embedding, s.expertFeedForwardLength, s.experts]),
      tensor(`${blk}.ffn_up_exps.weight`, GGMLType.Q4_K, [s.embedding, s.expertFeedForwardLength, s.experts]),
      tensor(`${blk}.ffn_down_exps.weight`, GGMLType.Q4_K, [s.expertFeedForwardLength, s.embedding, s.experts]),
    );
  }
  return list;
}

const tensors = qwen3MoeTensors(QWEN3_30B_A3B);
const footprint = footprintFromTensors(QWEN3_30B_A3B, tensors);
const sum = (filter: (name: string) => boolean) => tensors.filter((t) => filter(t.name)).reduce((total, t) => total + t.byteSize, 0);
const allWeightBytes = sum(() => true);
const expertWeightBytes = sum((name) => /_exps\./.test(name));
const host = (freeBytes = 64 * GiB): PlacementDevice => ({ name: "cpu", kind: "cpu", freeBytes });
const gpu = (index: number, freeBytes: number): PlacementDevice => ({ name: `cuda:${index}`, kind: "cuda", freeBytes });
const device = (plan: PlacementPlan, name: string) => plan.devices.find((d) => d.name === name)!;
const fits = (plan: PlacementPlan) => plan.devices.every((d) => d.totalBytes <= d.availableBytes);

describe("model footprint", () => {
  it("sums the tensor infos' bytes per layer, experts apart", () => {
    expect(footprint.layers).toHaveLength(48);
    expect(footprint.layers.reduce((t, l) => t + l.experts.stored, 0)).toBe(expertWeightBytes);
    const total = footprint.layers.reduce((t, l) => t + l.weights.stored + l.experts.stored, 0) + footprint.tokenEmbedding.stored + footprint.outputNorm.stored + footprint.output!.stored;
    expect(total).toBe(allWeightBytes);
    // the Q4_K_M-like 30B-A3B is about 17 GB
    expect(allWeightBytes / 1e9).toBeGreaterThan(16);
    expect(allWeightBytes / 1e9).toBeLessThan(19);
  });

  it("reads a GGUF header: stored bytes are the file's tensor bytes, f32 bytes four per element", async () => {
    const file = openGGUF(await syntheticModelFile(resolveOptions("tiny-moe", { weightType: "q8_0" })));
    const f = modelFootprint(file);
    const stored = f.layers.reduce((t, l) => t + l.weights.stored + l.experts.stored, 0) + f.tokenEmbedding.stored + f.outputNorm.stored + (f.output?.stored ?? 0);
    expect(stored).toBe(file.tensorBytes);
    const elements = file.tensors.reduce((t, info) => t + info.elementCount, 0);
    const f32 = f.layers.reduce((t, l) => t + l.weights.f32 + l.experts.f32, 0) + f.tokenEmbedding.f32 + f.outputNorm.f32 + (f.output?.f32 ?? 0);
    expect(f32).toBe(elements * 4);
    expect(f.output).toBeUndefined(); // tied
    expect(f.shape).toMatchObject({ architecture: "qwen3moe", layers: 2, embedding: 64, experts: 8, expertFeedForwardLength: 32, kvWidth: 32 });
    expect(f.layers[0]!.experts.stored).toBeGreaterThan(0);
  });
});

describe("planPlacement", () => {
  it("puts all of a 30B-A3B on one 24 GB GPU at 4096 tokens, with exact weight and KV bytes", () => {
    const plan = planPlacement(footprint, { devices: [gpu(0, 24 * GiB)], host: host(), contextTokens: 4096 });
    expect(plan.gpuLayers).toBe(48);
    expect(plan.layers.every((l) => l.device === "cuda:0" && l.expertDevice === "cuda:0")).toBe(true);
    expect(plan.embeddingDevice).toBe("cuda:0");
    expect(plan.outputDevice).toBe("cuda:0");
    const cuda = device(plan, "cuda:0");
    expect(cuda.weightBytes).toBe(allWeightBytes);
    const layerKV = 2 * 4096 * kvRowBytes("f16", 512);
    expect(plan.kvBytes).toBe(48 * layerKV);
    expect(plan.kvBytes).toBe(384 * MiB);
    expect(cuda.kvBytes).toBe(plan.kvBytes);
    expect(cuda.availableBytes).toBe(24 * GiB - DEFAULT_ACCELERATOR_RESERVE_BYTES);
    expect(cuda.totalBytes).toBeLessThanOrEqual(cuda.availableBytes);
    expect(device(plan, "cpu").totalBytes).toBe(0);
  });

  it("offloads only the last layers that fit when the KV cache is large", () => {
    const options = { devices: [gpu(0, 24 * GiB)], host: host(), contextTokens: 40960, sequences: 4 };
    const plan = planPlacement(footprint, options);
    expect(plan.gpuLayers).toBeGreaterThan(0);
    expect(plan.gpuLayers).toBeLessThan(48);
    expect(fits(plan)).toBe(true);
    const first = 48 - plan.gpuLayers;
    expect(plan.layers.map((l) => l.device)).toEqual([...Array<string>(first).fill("cpu"), ...Array<string>(plan.gpuLayers).fill("cuda:0")]);
    expect(plan.embeddingDevice).toBe("cpu");
    expect(plan.outputDevice).toBe("cuda:0");
    // the most that fit: one more layer does not
    expect(() => planPlacement(footprint, { ...options, gpuLayers: plan.gpuLayers + 1 })).toThrow(PlacementError);
    expect(planPlacement(footprint, { ...options, gpuLayers: plan.gpuLayers }).layers).toEqual(plan.layers);
  });

  it("keeps the experts of the first N layers (or all) on the CPU with cpuMoe", () => {
    const all = planPlacement(footprint, { devices: [gpu(0, 24 * GiB)], host: host(), contextTokens: 4096, cpuMoe: true });
    expect(all.layers.every((l) => l.device === "cuda:0" && l.expertDevice === "cpu")).toBe(true);
    expect(device(all, "cuda:0").weightBytes).toBe(allWeightBytes - expertWeightBytes);
    expect(device(all, "cpu").weightBytes).toBe(expertWeightBytes);
    expect(device(all, "cpu").expertLayers).toBe(48);

    const ten = planPlacement(footprint, { devices: [gpu(0, 24 * GiB)], host: host(), contextTokens: 4096, cpuMoe: 10 });
    expect(ten.layers.map((l) => l.expertDevice)).toEqual([...Array<string>(10).fill("cpu"), ...Array<string>(38).fill("cuda:0")]);
    expect(device(ten, "cpu").weightBytes).toBe(sum((name) => /_exps\./.test(name) && Number(/^blk\.(\d+)\./.exec(name)![1]) < 10));
    expect(device(ten, "cpu").kvBytes).toBe(0);
  });

  it("splits layers over two GPUs in proportion to their free memory", () => {
    const plan = planPlacement(footprint, { devices: [gpu(0, 24 * GiB), gpu(1, 12 * GiB)], host: host(), contextTokens: 8192 });
    expect(plan.gpuLayers).toBe(48);
    const a0 = 24 * GiB - DEFAULT_ACCELERATOR_RESERVE_BYTES;
    const a1 = 12 * GiB - DEFAULT_ACCELERATOR_RESERVE_BYTES;
    const onFirst = Math.round((48 * a0) / (a0 + a1));
    expect(onFirst).toBe(32);
    expect(plan.layers.map((l) => l.device)).toEqual([...Array<string>(onFirst).fill("cuda:0"), ...Array<string>(48 - onFirst).fill("cuda:1")]);
    expect(plan.embeddingDevice).toBe("cuda:0");
    expect(plan.outputDevice).toBe("cuda:1");
    expect(device(plan, "cuda:0").kvBytes).toBe((plan.kvBytes * 32) / 48);
    expect(fits(plan)).toBe(true);
    expect(device(plan, "cpu").totalBytes).toBe(0);
    // together they hold what one 24 GB GPU cannot at this context and batch
    const big = { host: host(), contextTokens: 32768, sequences: 3 };
    expect(planPlacement(footprint, { ...big, devices: [gpu(0, 24 * GiB)] }).gpuLayers).toBeLessThan(48);
    expect(planPlacement(footprint, { ...big, devices: [gpu(0, 24 * GiB), gpu(1, 24 * GiB)] }).gpuLayers).toBe(48);
  });

  it("puts nothing on a GPU too small for even one layer, and names the numbers when layers are forced onto it", () => {
    const small = gpu(0, 512 * MiB);
    const plan = planPlacement(footprint, { devices: [small], host: host(), contextTokens: 4096 });
    expect(plan.gpuLayers).toBe(0);
    expect(plan.layers.every((l) => l.device === "cpu" && l.expertDevice === "cpu")).toBe(true);
    expect(device(plan, "cuda:0").totalBytes).toBe(0);
    expect(device(plan, "cpu").weightBytes).toBe(allWeightBytes);

    let error: unknown;
    try {
      planPlacement(footprint, { devices: [small], host: host(), contextTokens: 4096, gpuLayers: 1 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(PlacementError);
    const shortfall = (error as PlacementError).shortfalls[0]!;
    expect(shortfall.device).toBe("cuda:0");
    expect(shortfall.availableBytes).toBe(256 * MiB);
    // one layer (attention + experts) and the LM head exceed it
    expect(shortfall.weightBytes).toBe(footprint.layers[47]!.weights.stored + footprint.layers[47]!.experts.stored + footprint.outputNorm.stored + footprint.output!.stored);
    expect(shortfall.neededBytes).toBeGreaterThan(shortfall.availableBytes);
    expect((error as Error).message).toMatch(/cuda:0 needs [\d.]+ MiB \(weights [\d.]+ MiB, KV 8\.00 MiB, scratch [\d.]+ MiB\) but has 256 MiB/);
  });

  it("fails before any allocation when the context is too large for every device, naming the bytes", () => {
    let error: unknown;
    try {
      planPlacement(footprint, { devices: [gpu(0, 24 * GiB)], host: host(64 * GiB), contextTokens: 40960, sequences: 64 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(PlacementError);
    const message = (error as Error).message;
    expect(message).toContain("does not fit at 40960 tokens × 64 sequences");
    expect(message).toContain("KV cache 240 GiB f16"); // 48 layers × 2 × 2621440 tokens × 1 KiB
    expect(message).toMatch(/cpu needs 257 GiB \(weights 16\.\d GiB, KV 240 GiB, scratch [\d.]+ MiB\) but has 64\.0 GiB/);
  });

  it("rejects GPU layers without a GPU and bad options", () => {
    expect(() => planPlacement(footprint, { devices: [], host: host(), contextTokens: 4096, gpuLayers: 4 })).toThrow(/4 GPU layers requested, but there is no GPU/);
    expect(planPlacement(footprint, { devices: [], host: host(), contextTokens: 4096 }).gpuLayers).toBe(0);
    expect(() => planPlacement(footprint, { devices: [], host: host(), contextTokens: 0 })).toThrow(/contextTokens must be a positive integer/);
    expect(() => planPlacement(footprint, { devices: [gpu(0, GiB)], host: host(), contextTokens: 16, cpuMoe: -1 })).toThrow(/cpuMoe/);
    expect(() => planPlacement(footprint, { devices: [host()], host: host(), contextTokens: 16 })).toThrow(/unique/);
  });

  it("sizes reference-backend weights as f32", async () => {
    const file = openGGUF(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
    const f = modelFootprint(file);
    const plan = planPlacement(f, { devices: [{ name: "cpu", kind: "cpu", freeBytes: GiB }], host: { name: "reference", kind: "reference", freeBytes: GiB }, contextTokens: 64, gpuLayers: 1, reserveBytes: 0 });
    expect(plan.layers.map((l) => l.device)).toEqual(["reference", "cpu"]);
    expect(plan.layers[0]!.weightBytes).toBe(f.layers[0]!.weights.f32);
    expect(plan.layers[1]!.weightBytes).toBe(f.layers[1]!.weights.stored);
    // tied LM head on another device than the embedding: the embedding is held twice
    expect(device(plan, "cpu").weightBytes).toBe(f.layers[1]!.weights.stored + f.outputNorm.stored + f.tokenEmbedding.stored);
    expect(device(plan, "reference").weightBytes).toBe(f.layers[0]!.weights.f32 + f.tokenEmbedding.f32);
  });
});
