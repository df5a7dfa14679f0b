import { GGMLType, type GGUFValue, TokenType, ggmlTypeName, ggufValue, plainValue, readGGUF, readModelConfig, writeGGUF } from "@memra/gguf";
import { describe, expect, it } from "vitest";
import { QWEN3_VOCAB_SIZE, loadQwen3Vocabulary, truncatedQwen3Vocabulary } from "./qwen3-vocabulary";
import { buildSyntheticModel, resolveOptions } from "./synthetic-model";

function typesByName(preset: Parameters<typeof resolveOptions>[0], overrides: Parameters<typeof resolveOptions>[1]) {
  // Tensor data are produced lazily: the plan alone says which type each tensor gets.
  return new Map((buildSyntheticModel(resolveOptions(preset, overrides)).tensors ?? []).map((t) => [t.name, ggmlTypeName(t.type)]));
}

describe("synthetic model generator", () => {
  it("writes the same bytes for the same options and different bytes for another seed", () => {
    const a = writeGGUF(buildSyntheticModel(resolveOptions("tiny", { weightType: "q4_0" })));
    const b = writeGGUF(buildSyntheticModel(resolveOptions("tiny", { weightType: "q4_0" })));
    const c = writeGGUF(buildSyntheticModel(resolveOptions("tiny", { weightType: "q4_0", seed: 2 })));
    expect(Bun.hash(a)).toBe(Bun.hash(b));
    expect(a.byteLength).toBe(c.byteLength);
    expect(Bun.hash(a)).not.toBe(Bun.hash(c));
  });

  it("writes llama.cpp's keys and tensor names, and a config that validates", () => {
    const file = readGGUF(writeGGUF(buildSyntheticModel(resolveOptions("tiny-moe", { weightType: "f16", tiedEmbeddings: false }))));
    expect(readModelConfig(file)).toMatchObject({
      architecture: "qwen3moe",
      blockCount: 2,
      embeddingLength: 64,
      headCount: 4,
      headCountKv: 2,
      keyLength: 16,
      expertCount: 8,
      expertUsedCount: 2,
      expertFeedForwardLength: 32,
    });
    const names = file.tensors.map((t) => t.name);
    expect(names).toContain("output.weight");
    expect(names).toContain("blk.1.ffn_gate_inp.weight");
    expect(file.tensor("blk.0.ffn_down_exps.weight")!.shape).toEqual([32, 64, 8]);
    expect(file.tensor("blk.0.ffn_gate_inp.weight")!.type).toBe(GGMLType.F32);
    expect(file.tensor("token_embd.weight")!.shape).toEqual([64, QWEN3_VOCAB_SIZE]);
  });

  it("falls back as llama.cpp does when rows are shorter than a k-quant block", () => {
    const tiny = typesByName("tiny", { weightType: "q4_K" });
    expect(tiny.get("blk.0.attn_q.weight")).toBe("q5_0");
    const small = typesByName("small", { weightType: "q4_K" });
    expect(small.get("blk.0.attn_q.weight")).toBe("q4_K");
    expect(small.get("blk.0.attn_norm.weight")).toBe("f32");
  });

  it("writes q2_K and q3_K, falling back to q4_0 (for llama.cpp's iq4_nl) on short rows", () => {
    for (const [type, fileType] of [["q2_K", 10], ["q3_K", 11]] as const) {
      const small = typesByName("small", { weightType: type });
      for (const name of ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.1.attn_output.weight", "blk.1.ffn_down.weight"]) {
        expect(small.get(name), name).toBe(type);
      }
      expect(small.get("blk.0.attn_norm.weight")).toBe("f32");
      expect(typesByName("tiny", { weightType: type }).get("blk.0.attn_q.weight")).toBe("q4_0");
      // The data of a 256x128 matrix: 128 blocks of 256 (84 bytes for q2_K, 110 for q3_K); llama.cpp's file type.
      const model = buildSyntheticModel(resolveOptions("small", { weightType: type }));
      const attnK = model.tensors!.find((t) => t.name === "blk.0.attn_k.weight")!;
      const data = (typeof attnK.data === "function" ? attnK.data() : attnK.data) as Uint8Array;
      expect(data.byteLength).toBe(128 * (type === "q2_K" ? 84 : 110));
      expect((model.metadata as ReadonlyMap<string, GGUFValue>).get("general.file_type")).toEqual(ggufValue.uint32(fileType));
    }
  });

  it("mixes q4_K and q6_K like llama.cpp's Q4_K_M", () => {
    const types = typesByName("small", { weightType: "q4_K_M", layers: 8 });
    expect(types.get("token_embd.weight")).toBe("q6_K"); // tied: the embedding is the output
    expect(types.get("blk.3.attn_q.weight")).toBe("q4_K");
    // use_more_bits(i, 8): i < 1, i >= 7, or (i - 1) % 3 == 2  → layers 0, 3, 6, 7
    const six = [0, 1, 2, 3, 4, 5, 6, 7].filter((i) => types.get(`blk.${i}.attn_v.weight`) === "q6_K");
    expect(six).toEqual([0, 3, 6, 7]);
    expect([0, 1, 2, 3, 4, 5, 6, 7].filter((i) => types.get(`blk.${i}.ffn_down.weight`) === "q6_K")).toEqual([0, 3, 6, 7]);
  });

  it("lays out the Qwen3 vocabulary as llama.cpp's converter does", () => {
    const vocabulary = loadQwen3Vocabulary();
    expect(vocabulary.tokens).toHaveLength(QWEN3_VOCAB_SIZE);
    expect(vocabulary.tokens[151644]).toBe("<|im_start|>");
    expect(vocabulary.tokenTypes[151644]).toBe(TokenType.CONTROL);
    expect(vocabulary.tokenTypes[151659]).toBe(TokenType.CONTROL); // <|fim_prefix|>: not special, but looks special
    expect(vocabulary.tokens[151667]).toBe("<think>");
    expect(vocabulary.tokenTypes[151667]).toBe(TokenType.USER_DEFINED);
    expect(vocabulary.tokens[151669]).toBe("[PAD151669]");
    expect(vocabulary.tokenTypes[151935]).toBe(TokenType.UNUSED);
    expect(vocabulary.merges[0]).toBe("Ġ Ġ");
    expect(vocabulary.eosTokenId).toBe(151645);
  });

  it("distinctLayers: later layers repeat the first ones' bytes under their own names; the first ones are the usual model's", () => {
    const tensorsOf = (overrides: Parameters<typeof resolveOptions>[1]) => {
      const file = readGGUF(writeGGUF(buildSyntheticModel(resolveOptions("tiny", { weightType: "q8_0", ...overrides }))));
      return new Map(file.tensors.map((t) => [t.name, Bun.hash(file.tensorData(t))]));
    };
    const deep = tensorsOf({ layers: 5, distinctLayers: 2 });
    const usual = tensorsOf({ layers: 5 });
    expect(deep.size).toBe(usual.size);
    for (const suffix of ["attn_q.weight", "attn_norm.weight", "ffn_down.weight"]) {
      const at = (layer: number) => deep.get(`blk.${layer}.${suffix}`);
      expect([at(2), at(4)]).toEqual([at(0), at(0)]);
      expect(at(3)).toBe(at(1));
      expect(at(1)).not.toBe(at(0));
      expect([at(0), at(1)]).toEqual([usual.get(`blk.0.${suffix}`), usual.get(`blk.1.${suffix}`)]);
      expect(at(2)).not.toBe(usual.get(`blk.2.${suffix}`));
    }
    // as many distinct layers as layers, or more: the usual model
    expect(tensorsOf({ layers: 2, distinctLayers: 2 })).toEqual(tensorsOf({ layers: 2 }));
    expect(() => buildSyntheticModel(resolveOptions("tiny", { distinctLayers: 0 }))).toThrow(/distinctLayers must be a positive integer, got 0/);
  });

  it("rejects impossible shapes with a message naming the option", () => {
    expect(() => buildSyntheticModel(resolveOptions("tiny", { heads: 3 }))).toThrow(/heads \(3\) must be a multiple of kvHeads/);
    expect(() => buildSyntheticModel(resolveOptions("tiny", { layers: 0 }))).toThrow(/layers must be a positive integer/);
  });
});

describe("a truncated vocabulary (options.vocabulary)", () => {
  it("keeps the first ordinary tokens, then Qwen3's added tokens renumbered, and the merges among kept tokens", () => {
    const full = loadQwen3Vocabulary();
    const cut = truncatedQwen3Vocabulary(2048);
    expect(cut.tokens.length).toBe(2048);
    expect(cut.tokenTypes.length).toBe(2048);
    const added = full.tokens.flatMap((text, id) => (full.tokenTypes[id] !== TokenType.NORMAL && full.tokenTypes[id] !== TokenType.UNUSED ? [[text, full.tokenTypes[id]!] as const] : []));
    expect(added.length).toBe(26);
    expect(cut.tokens.slice(0, 2048 - 26)).toEqual(full.tokens.slice(0, 2048 - 26));
    expect(cut.tokens.slice(2048 - 26)).toEqual(added.map(([text]) => text));
    expect([...cut.tokenTypes.subarray(2048 - 26)]).toEqual(added.map(([, type]) => type));
    expect(cut.tokens[cut.eosTokenId]).toBe("<|im_end|>");
    expect(cut.tokens[cut.bosTokenId]).toBe("<|endoftext|>");
    const kept = new Set(cut.tokens.slice(0, 2048 - 26));
    expect(cut.merges.length).toBeGreaterThan(1000);
    for (const merge of cut.merges) {
      const [left, right] = merge.split(" ");
      expect(kept.has(left!) && kept.has(right!) && kept.has(left! + right!), merge).toBe(true);
    }
    // in Qwen3's order, and every merge of the whole list among kept tokens is there
    const order = new Map(full.merges.map((merge, rank) => [merge, rank]));
    for (let i = 1; i < cut.merges.length; i++) expect(order.get(cut.merges[i]!)!).toBeGreaterThan(order.get(cut.merges[i - 1]!)!);
    expect(full.merges.filter((merge) => { const [l, r] = merge.split(" "); return kept.has(l!) && kept.has(r!) && kept.has(l! + r!); })).toEqual(cut.merges);
  });

  it("sizes the embeddings and the LM head by it; out of range is refused", () => {
    const file = readGGUF(writeGGUF(buildSyntheticModel(resolveOptions("tiny", { vocabulary: 1000, tiedEmbeddings: false }))));
    expect(file.tensor("token_embd.weight")!.shape).toEqual([64, 1000]);
    expect(file.tensor("output.weight")!.shape).toEqual([64, 1000]);
    expect((plainValue(file.metadata.get("tokenizer.ggml.tokens")!) as string[]).length).toBe(1000);
    expect(() => buildSyntheticModel(resolveOptions("tiny", { vocabulary: 100 }))).toThrow(/vocabulary must be an integer from 512 to 151936, got 100/);
    expect(() => buildSyntheticModel(resolveOptions("tiny", { vocabulary: 200_000 }))).toThrow(/vocabulary must be/);
  });
});
