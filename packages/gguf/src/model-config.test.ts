import { describe, expect, it } from "vitest";
import { GGUFError } from "./gguf-error";
import { type GGUFValue, ggufValue } from "./gguf-value";
import { readModelConfig } from "./model-config";
import { readGGUF } from "./read-gguf";
import { writeGGUF } from "./write-gguf";

function fileWith(entries: Record<string, GGUFValue | undefined>) {
  const base: Record<string, GGUFValue> = {
    "general.architecture": ggufValue.string("qwen3"),
    "qwen3.context_length": ggufValue.uint32(4096),
    "qwen3.embedding_length": ggufValue.uint32(1024),
    "qwen3.block_count": ggufValue.uint32(28),
    "qwen3.feed_forward_length": ggufValue.uint32(3072),
    "qwen3.attention.head_count": ggufValue.uint32(16),
    "qwen3.attention.head_count_kv": ggufValue.uint32(8),
    "qwen3.attention.key_length": ggufValue.uint32(128),
    "qwen3.attention.layer_norm_rms_epsilon": ggufValue.float32(1e-6),
    "qwen3.rope.freq_base": ggufValue.float32(1_000_000),
  };
  const metadata = new Map(Object.entries({ ...base, ...entries }).filter((e): e is [string, GGUFValue] => e[1] !== undefined));
  return readGGUF(writeGGUF({ metadata }));
}

describe("readModelConfig", () => {
  it("reads a Qwen3-0.6B-shaped config, deriving value_length from key_length defaults", () => {
    expect(readModelConfig(fileWith({}))).toMatchObject({
      architecture: "qwen3",
      embeddingLength: 1024,
      blockCount: 28,
      headCount: 16,
      headCountKv: 8,
      keyLength: 128,
      valueLength: 64, // absent: embedding_length / head_count, as llama.cpp
      ropeFreqBase: 1_000_000,
    });
  });

  it("names a missing or invalid key", () => {
    expect(() => readModelConfig(fileWith({ "qwen3.block_count": undefined }))).toThrow(/kv\["qwen3\.block_count"\] at byte 0: missing/);
    expect(() => readModelConfig(fileWith({ "qwen3.attention.head_count_kv": ggufValue.uint32(3) }))).toThrow(
      /qwen3\.attention\.head_count_kv.*head_count must be a multiple of attention\.head_count_kv/,
    );
    expect(() => readModelConfig(fileWith({ "general.architecture": ggufValue.string("llama") }))).toThrow(GGUFError);
    expect(() => readModelConfig(fileWith({ "qwen3.embedding_length": ggufValue.string("big") }))).toThrow(/expected a number, found string/);
  });

  it("needs the expert keys for qwen3moe", () => {
    const moe = (extra: Record<string, GGUFValue | undefined>) =>
      fileWith({
        "general.architecture": ggufValue.string("qwen3moe"),
        ...Object.fromEntries(
          Object.entries({
            "qwen3moe.context_length": ggufValue.uint32(4096),
            "qwen3moe.embedding_length": ggufValue.uint32(512),
            "qwen3moe.block_count": ggufValue.uint32(4),
            "qwen3moe.attention.head_count": ggufValue.uint32(8),
            "qwen3moe.attention.head_count_kv": ggufValue.uint32(2),
            "qwen3moe.attention.layer_norm_rms_epsilon": ggufValue.float32(1e-6),
            "qwen3moe.expert_count": ggufValue.uint32(64),
            "qwen3moe.expert_used_count": ggufValue.uint32(8),
            "qwen3moe.expert_feed_forward_length": ggufValue.uint32(256),
            ...extra,
          }),
        ),
      });
    expect(readModelConfig(moe({}))).toMatchObject({ architecture: "qwen3moe", expertCount: 64, expertUsedCount: 8, keyLength: 64, feedForwardLength: 0 });
    expect(() => readModelConfig(moe({ "qwen3moe.expert_used_count": ggufValue.uint32(65) }))).toThrow(/expert_used_count must not exceed expert_count/);
    expect(() => readModelConfig(moe({ "qwen3moe.expert_count": undefined }))).toThrow(/qwen3moe\.expert_count"\] at byte 0: missing/);
  });
});
