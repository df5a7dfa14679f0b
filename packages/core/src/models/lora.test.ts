/**
 * LoRA adapters: that they are applied as llama.cpp applies them is the golden suite's
 * dense-lora-f32 and dense-lora-q8_0 (recorded with llama.cpp loading the same adapters). Here:
 * scales, several adapters, MoE attention, and the refusals.
 */
import { writeGGUFFile } from "@memra/gguf";
import { buildSyntheticLora, buildSyntheticModel, resolveOptions, syntheticLoraFile, syntheticModelFile } from "@memra/synthetic";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadModel } from "../load-model";
import { GGMLType, type GGUFTensorInfo } from "@memra/gguf";
import { LoraAdapterError, padLoraRank } from "./lora";

const directory = mkdtempSync(join(tmpdir(), "memra-lora-"));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const prompt = [785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562];

function logitsOf(model: ReturnType<typeof loadModel>): Float32Array {
  const cache = model.createCache(32);
  try {
    return model.forward(prompt, cache, { logits: "all" });
  } finally {
    cache.dispose();
  }
}

function maxDifference(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

describe("LoRA adapters", () => {
  it("scale 0 is the base model bit for bit; two adapters add their terms; scales are linear in the delta", async () => {
    const options = resolveOptions("tiny", { weightType: "f32", tiedEmbeddings: false });
    const path = await syntheticModelFile(options);
    const first = await syntheticLoraFile(options, { rank: 4, alpha: 8, seed: 1, strength: 0.3 });
    const second = await syntheticLoraFile(options, { rank: 2, alpha: 0, seed: 2, strength: 0.3, targets: ["attn_v", "ffn_down"] });
    const base = logitsOf(loadModel(path));
    expect(Array.from(logitsOf(loadModel(path, { lora: [{ path: first, scale: 0 }] })))).toEqual(Array.from(base));
    const one = logitsOf(loadModel(path, { lora: [{ path: first }] }));
    expect(maxDifference(one, base)).toBeGreaterThan(0.1);
    const both = logitsOf(loadModel(path, { lora: [{ path: first }, { path: second, scale: 0.5 }] }));
    expect(maxDifference(both, one)).toBeGreaterThan(1e-3);
    // Only the output projection's term of a small scale: the logits move about linearly with it.
    const head = await syntheticLoraFile(options, { rank: 3, alpha: 3, seed: 4, targets: ["output"] });
    const small = logitsOf(loadModel(path, { lora: [{ path: head, scale: 0.001 }] }));
    const double = logitsOf(loadModel(path, { lora: [{ path: head, scale: 0.002 }] }));
    for (const i of [0, 1000, 151935]) expect(double[i]! - base[i]!).toBeCloseTo(2 * (small[i]! - base[i]!), 5);
  });

  it("adapts an MoE model's attention; generation and decode run with the adapter", async () => {
    const options = resolveOptions("tiny-moe", { weightType: "q8_0" });
    const path = await syntheticModelFile(options);
    const lora = await syntheticLoraFile(options, { rank: 4, alpha: 4, seed: 7, strength: 0.5 });
    const plain = await loadModel(path).complete(prompt, { temperature: 0, maxTokens: 8 });
    const adapted = loadModel(path, { lora: [{ path: lora }] });
    const result = await adapted.complete(prompt, { temperature: 0, maxTokens: 8 });
    expect(result.tokens).not.toEqual(plain.tokens);
    // Decoding token by token gives the tokens of the batched prompt's logits.
    const cache = adapted.createCache(32);
    const logits = adapted.forward([...prompt, ...result.tokens.slice(0, 4)], cache, { logits: "all" });
    const vocabulary = adapted.vocabularySize;
    for (let step = 0; step < 4; step++) {
      const row = logits.subarray((prompt.length - 1 + step) * vocabulary, (prompt.length + step) * vocabulary);
      expect(row.indexOf(Math.max(...row))).toBe(result.tokens[step]);
    }
  });

  it("per-generation scales (llama.cpp's per-request lora) give what a model loaded with those scales gives, several at once", async () => {
    const options = resolveOptions("tiny", { weightType: "q8_0", tiedEmbeddings: false });
    const path = await syntheticModelFile(options);
    const first = await syntheticLoraFile(options, { rank: 4, alpha: 8, seed: 1, strength: 0.5 });
    const second = await syntheticLoraFile(options, { rank: 2, alpha: 0, seed: 2, strength: 0.5, targets: ["attn_v", "ffn_down", "output"] });
    // Loaded unapplied (llama.cpp's --lora-init-without-apply): both at scale 0.
    const model = loadModel(path, { lora: [{ path: first, scale: 0 }, { path: second, scale: 0 }] });
    expect(model.loraAdapters).toEqual([{ id: 0, path: first, scale: 0 }, { id: 1, path: second, scale: 0 }]);
    const solo = async (scales: [number, number]) => {
      const reference = loadModel(path, { lora: [{ path: first, scale: scales[0] }, { path: second, scale: scales[1] }] });
      const result = await reference.complete(prompt, { temperature: 0, maxTokens: 10, logprobs: true, topLogprobs: 2 });
      reference.dispose();
      return result;
    };
    const logprobsOf = async (stream: ReturnType<typeof model.generate>) => {
      const values: number[] = [];
      for await (const chunk of stream) if (chunk.logprob !== undefined) values.push(chunk.logprob);
      return { tokens: (await stream.result).tokens, values };
    };
    const greedy = { temperature: 0, maxTokens: 10, logprobs: true, topLogprobs: 2 } as const;
    const cases: { lora?: { id: number; scale: number }[]; scales: [number, number] }[] = [
      { lora: [{ id: 0, scale: 0.6 }, { id: 1, scale: 0.3 }], scales: [0.6, 0.3] },
      { scales: [0, 0] },
      { lora: [{ id: 1, scale: 0.8 }], scales: [0, 0.8] },
    ];
    const expected = await Promise.all(cases.map(async ({ scales }) => {
      const result = await solo(scales);
      const stream = loadModel(path, { lora: [{ path: first, scale: scales[0] }, { path: second, scale: scales[1] }] }).generate(prompt, greedy);
      return { tokens: result.tokens, values: (await logprobsOf(stream)).values };
    }));
    expect(expected[0]!.tokens).not.toEqual(expected[1]!.tokens);
    // The three together, in batched steps whose rows have different scales: each is its own solo run, bit for bit.
    const together = await Promise.all(cases.map(({ lora }) => logprobsOf(model.generate(prompt, { ...greedy, ...(lora ? { lora } : {}) }))));
    together.forEach((run, i) => {
      expect(run.tokens, `case ${i}`).toEqual(expected[i]!.tokens);
      expect(run.values, `case ${i}`).toEqual(expected[i]!.values);
    });

    // Cached prefixes are shared between equal scales only (the blocks hold keys and values computed with them).
    const long = Array.from({ length: 40 }, (_, i) => prompt[i % prompt.length]!);
    const scaled = { temperature: 0, maxTokens: 4, lora: [{ id: 0, scale: 0.6 }] };
    const firstRun = await model.complete(long, scaled);
    const again = await model.complete(long, scaled);
    expect(again.usage.cachedPromptTokens).toBeGreaterThan(0);
    expect(again.tokens).toEqual(firstRun.tokens);
    const other = await model.complete(long, { ...scaled, lora: [{ id: 0, scale: 0.9 }] });
    expect(other.usage.cachedPromptTokens).toBe(0);
    const otherSolo = loadModel(path, { lora: [{ path: first, scale: 0.9 }, { path: second, scale: 0 }] });
    expect(other.tokens).toEqual((await otherSolo.complete(long, { temperature: 0, maxTokens: 4 })).tokens);
    otherSolo.dispose();

    // The model's scales (llama.cpp's POST /lora-adapters): what generations without `lora` run with.
    model.setLoraScales([{ id: 0, scale: 0.6 }, { id: 1, scale: 0.3 }]);
    expect(model.loraAdapters.map((adapter) => adapter.scale)).toEqual([0.6, 0.3]);
    expect((await model.complete(prompt, { temperature: 0, maxTokens: 10 })).tokens).toEqual(expected[0]!.tokens);
    model.setLoraScales([{ id: 1, scale: 0.8 }]);
    expect(model.loraAdapters.map((adapter) => adapter.scale)).toEqual([0, 0.8]);
    const session = model.createChatSession({ lora: [{ id: 0, scale: 0.6 }, { id: 1, scale: 0.3 }] });
    const turn = await session.send("Hi", { temperature: 0, maxTokens: 6 }).result;
    const chatted = await model.chat([{ role: "user", content: "Hi" }], { temperature: 0, maxTokens: 6, lora: [{ id: 0, scale: 0.6 }, { id: 1, scale: 0.3 }] });
    expect(turn.tokens).toEqual(chatted.tokens);
    expect(() => session.send("Again", { lora: [{ id: 0, scale: 1 }] })).toThrow(/a chat session's LoRA scales are set when it is created/);
    session.dispose();

    await expect(model.complete(prompt, { maxTokens: 2, lora: [{ id: 2, scale: 1 }] })).rejects.toThrow(/lora: adapter id 2 is not loaded \(the model has 2 LoRA adapters\)/);
    expect(() => model.setLoraScales([{ id: 0, scale: Number.NaN }])).toThrow(/lora\.0\.scale/);
    expect(() => loadModel(path).setLoraScales([{ id: 0, scale: 1 }])).toThrow(/adapter id 0 is not loaded \(the model has 0 LoRA adapters\)/);
    model.dispose();
  }, 120_000);

  it("refuses an adapter for another model, another architecture or shape, or a file that is no adapter, naming it", async () => {
    const tiny = resolveOptions("tiny", { weightType: "f32" });
    const path = await syntheticModelFile(tiny);
    const write = async (name: string, file: Parameters<typeof writeGGUFFile>[1]) => {
      const out = join(directory, name);
      await writeGGUFFile(out, file);
      return out;
    };
    const refusals: [string, RegExp][] = [
      [path, /general\.type is missing, expected "adapter"/],
      [join(directory, "absent.gguf"), /absent\.gguf/],
      [await write("moe.gguf", buildSyntheticLora(resolveOptions("tiny-moe", { weightType: "f32" }), { rank: 2, alpha: 2, seed: 1, targets: ["attn_q"] })), /made for architecture "qwen3moe", the model is "qwen3"/],
      [await write("small.gguf", buildSyntheticLora(resolveOptions("small", { weightType: "f32" }), { rank: 2, alpha: 2, seed: 1, targets: ["attn_q"] })), /"blk\.0\.attn_q\.weight" is \[64, 64\]; lora_a \[256, 2\] and lora_b \[2, 256\]/],
      [await write("head.gguf", buildSyntheticLora({ ...tiny, tiedEmbeddings: false }, { rank: 2, alpha: 2, seed: 1, targets: ["output"] })), /"output\.weight" is not a tensor of the model/],
    ];
    for (const [adapter, message] of refusals) {
      expect(() => loadModel(path, { lora: [{ path: adapter }] }), adapter).toThrow(LoraAdapterError);
      expect(() => loadModel(path, { lora: [{ path: adapter }] }), adapter).toThrow(message);
    }
    // A lone half, an unexpected tensor, a token embedding's adapter.
    const model = buildSyntheticModel(tiny);
    const lora = buildSyntheticLora(tiny, { rank: 2, alpha: 2, seed: 1, targets: ["attn_q"], layers: [0] });
    const lone = await write("lone.gguf", { ...lora, tensors: lora.tensors!.filter((t) => !t.name.endsWith("lora_b")) });
    expect(() => loadModel(path, { lora: [{ path: lone }] })).toThrow(/"blk\.0\.attn_q\.weight" has a lora_a and no lora_b/);
    const odd = await write("odd.gguf", { ...lora, tensors: [...lora.tensors!, { ...model.tensors!.find((t) => t.name === "output_norm.weight")!, name: "blk.0.extra" }] });
    expect(() => loadModel(path, { lora: [{ path: odd }] })).toThrow(/tensor "blk\.0\.extra" is neither a \.lora_a nor a \.lora_b/);
    const embedding = await write("embd.gguf", { ...lora, tensors: lora.tensors!.map((t) => ({ ...t, name: t.name.replace("blk.0.attn_q.weight", "token_embd.weight") })) });
    expect(() => loadModel(path, { lora: [{ path: embedding }] })).toThrow(/"token_embd\.weight" is \[|adapting "token_embd\.weight" is not supported/);
    expect(() => loadModel(path, { lora: [{ path: lone, scale: Number.NaN }] })).toThrow(/scale must be a finite number/);
  });

  it("pads a rank that is no multiple of 8 with zeros (A's rows, B's columns), and leaves a multiple of 8 alone", () => {
    const info = (name: string, shape: number[], type: GGMLType, bytes: number): GGUFTensorInfo => ({ name, type, shape, elementCount: shape[0]! * shape[1]!, offset: 0, byteSize: bytes });
    const [inputs, rank, outputs] = [3, 4, 2];
    // f16 A: `rank` rows of `inputs` values; f32 B: `outputs` rows of `rank` values (ggml order)
    const aValues = Uint16Array.from({ length: rank * inputs }, (_, i) => 0x3c00 + i);
    const bValues = Float32Array.from({ length: outputs * rank }, (_, i) => i + 1);
    const a = info("w.lora_a", [inputs, rank], GGMLType.F16, aValues.byteLength);
    const b = info("w.lora_b", [rank, outputs], GGMLType.F32, bValues.byteLength);
    const [pa, pb] = padLoraRank(a, new Uint8Array(aValues.buffer), b, new Uint8Array(bValues.buffer));
    expect(pa.info.shape).toEqual([inputs, 8]);
    expect(pb.info.shape).toEqual([8, outputs]);
    expect([pa.info.elementCount, pa.info.byteSize, pb.info.elementCount, pb.info.byteSize]).toEqual([24, 48, 16, 64]);
    const paddedA = new Uint16Array(pa.data.buffer, pa.data.byteOffset, 24);
    expect([...paddedA]).toEqual([...aValues, ...new Array(12).fill(0)]);
    const paddedB = new Float32Array(pb.data.buffer, pb.data.byteOffset, 16);
    expect([...paddedB]).toEqual([1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0]);
    // rank 8: the tensors as they are
    const a8 = info("w.lora_a", [inputs, 8], GGMLType.F16, 48);
    const b8 = info("w.lora_b", [8, outputs], GGMLType.F32, 64);
    const data = new Uint8Array(64);
    const [same, sameB] = padLoraRank(a8, data.subarray(0, 48), b8, data);
    expect(same.info).toBe(a8);
    expect(sameB.info).toBe(b8);
  });
});
