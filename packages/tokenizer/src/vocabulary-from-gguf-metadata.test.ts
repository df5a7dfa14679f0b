import { ggufValue, openGGUF, readGGUF, writeGGUF } from "@memra/gguf";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { qwen3Vocabulary, vocabularyFingerprint } from "./__fixtures__/qwen3-vocabulary";
import { byteChar } from "./__fixtures__/toy-vocabulary";
import { TokenType } from "./token-attributes";
import { Tokenizer } from "./tokenizer";
import { TokenizerError } from "./tokenizer-error";
import { vocabularyFromGGUFMetadata } from "./vocabulary-from-gguf-metadata";

const goldens = (await Bun.file(new URL("./__fixtures__/llamacpp-tokenizer-goldens.json", import.meta.url)).json()) as {
  cases: Array<{ category: string; text: string; ids: number[]; idsSpecial?: number[] }>;
};

const byteTokens = Array.from({ length: 256 }, (_, byte) => byteChar(byte));

/** A small GGUF written and read back with @memra/gguf. */
function ggufFile(extra: Record<string, ReturnType<typeof ggufValue.string>> = {}) {
  const tokens = [...byteTokens, "he", "hel", "hello", "<|im_end|>", "<think>"];
  const types = [...byteTokens.map(() => TokenType.NORMAL), TokenType.NORMAL, TokenType.NORMAL, TokenType.NORMAL, TokenType.CONTROL, TokenType.USER_DEFINED];
  const bytes = writeGGUF({
    metadata: {
      "general.architecture": ggufValue.string("qwen3"),
      "tokenizer.ggml.model": ggufValue.string("gpt2"),
      "tokenizer.ggml.pre": ggufValue.string("qwen2"),
      "tokenizer.ggml.tokens": ggufValue.stringArray(tokens),
      "tokenizer.ggml.token_type": ggufValue.int32Array(types),
      "tokenizer.ggml.merges": ggufValue.stringArray(["h e", "he l", "hel lo", "l o"]),
      "tokenizer.ggml.eos_token_id": ggufValue.uint32(259),
      "tokenizer.ggml.padding_token_id": ggufValue.uint64(259n),
      "tokenizer.ggml.add_bos_token": ggufValue.bool(false),
      "tokenizer.chat_template": ggufValue.string("{{ messages[0].content }}"),
      ...extra,
    },
  });
  return readGGUF(bytes);
}

describe("vocabularyFromGGUFMetadata", () => {
  it("reads the tokenizer.ggml.* keys of a GGUF file", () => {
    const file = ggufFile();
    const vocabulary = vocabularyFromGGUFMetadata((key) => file.get(key));
    expect(vocabulary.tokens.length).toBe(261);
    expect(vocabulary.preTokenizer).toBe("qwen2");
    expect(vocabulary.eosTokenId).toBe(259);
    expect(vocabulary.paddingTokenId).toBe(259);
    expect(vocabulary.bosTokenId).toBeUndefined();
    expect(vocabulary.addBos).toBe(false);
    expect(vocabulary.chatTemplate).toBe("{{ messages[0].content }}");
    expect(Array.from(vocabulary.tokenTypes ?? []).slice(-2)).toEqual([TokenType.CONTROL, TokenType.USER_DEFINED]);
  });

  it("builds a working tokenizer straight from the metadata getter", () => {
    const file = ggufFile();
    const tokenizer = Tokenizer.fromGGUFMetadata((key) => file.get(key));
    expect(tokenizer.encode("hello")).toEqual([258]);
    expect(tokenizer.encode("hello<|im_end|>", { special: true })).toEqual([258, 259]);
    expect(tokenizer.applyChatTemplate([{ role: "user", content: "hi" }])).toBe("hi");
  });

  it("reads the same Qwen3 vocabulary from a generated model file as the goldens were recorded with", async () => {
    const file = openGGUF(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
    const vocabulary = vocabularyFromGGUFMetadata((key) => file.get(key));
    expect(vocabularyFingerprint(vocabulary)).toBe(vocabularyFingerprint(qwen3Vocabulary()));
    expect(vocabulary).toMatchObject({ preTokenizer: "qwen2", bosTokenId: 151643, eosTokenId: 151645, paddingTokenId: 151643, addBos: false });
    const tokenizer = Tokenizer.fromGGUFMetadata((key) => file.get(key));
    for (const golden of goldens.cases.filter((c) => c.category === "specials").slice(0, 20)) {
      expect(tokenizer.encode(golden.text), golden.text).toEqual(golden.ids);
      if (golden.idsSpecial) expect(tokenizer.encode(golden.text, { special: true }), golden.text).toEqual(golden.idsSpecial);
    }
  });

  it("rejects what the tokenizer cannot use, naming the key", () => {
    const noTokens = (key: string): unknown => (key === "tokenizer.ggml.model" ? "gpt2" : undefined);
    expect(() => vocabularyFromGGUFMetadata(noTokens)).toThrow(/tokenizer\.ggml\.tokens: missing/);
    expect(() => vocabularyFromGGUFMetadata(() => undefined)).toThrow(/tokenizer\.ggml\.model: missing/);
    const spm = (key: string): unknown => (key === "tokenizer.ggml.model" ? "llama" : undefined);
    expect(() => vocabularyFromGGUFMetadata(spm)).toThrow(TokenizerError);
    const file = ggufFile({ "tokenizer.ggml.eos_token_id": ggufValue.string("x") });
    expect(() => vocabularyFromGGUFMetadata((key) => file.get(key))).toThrow(/eos_token_id: expected an integer/);
    const shortTypes = (key: string): unknown =>
      ({ "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.token_type": Int32Array.of(1), "tokenizer.ggml.merges": [] })[key];
    expect(() => vocabularyFromGGUFMetadata(shortTypes)).toThrow(/token_type: 1 types for 2 tokens/);
  });
});
