import { describe, expect, it } from "vitest";
import { byteChar, toyVocabulary } from "./__fixtures__/toy-vocabulary";
import { TokenAttribute, TokenType } from "./token-attributes";
import { Tokenizer } from "./tokenizer";
import { TokenizerError } from "./tokenizer-error";

const SPACE = byteChar(0x20);

/** ids 256… = merges; then <|im_end|> (CONTROL), <think> (USER_DEFINED), [PAD] (UNUSED), <0x41> (BYTE), <unk> (UNKNOWN). */
function toy(extra: Parameters<typeof toyVocabulary>[0] = {}) {
  return Tokenizer.fromVocabulary(
    toyVocabulary({
      merges: ["h e", "l l", "he ll", "hell o", `${SPACE} w`, `${SPACE}w o`, "r l", `${SPACE}wo rl`, `${SPACE}worl d`],
      specials: [
        { text: "<|im_end|>", type: TokenType.CONTROL },
        { text: "<think>", type: TokenType.USER_DEFINED },
        { text: "[PAD300]", type: TokenType.UNUSED },
        { text: "<0x41>", type: TokenType.BYTE },
        { text: "<unk>", type: TokenType.UNKNOWN },
      ],
      eosTokenId: 265,
      ...extra,
    }),
  );
}

describe("Tokenizer", () => {
  const tokenizer = toy();
  const [hello, world, imEnd, think, pad, byteA, unknown] = [259, 264, 265, 266, 267, 268, 269];

  it("encodes words with BPE and decodes them back", () => {
    expect(tokenizer.tokenText(hello)).toBe("hello");
    expect(tokenizer.tokenText(world)).toBe(`${SPACE}world`);
    expect(tokenizer.encode("hello world")).toEqual([hello, world]);
    expect(tokenizer.decode([hello, world])).toBe("hello world");
    expect(tokenizer.tokenId(`${SPACE}world`)).toBe(world);
  });

  it("parses control tokens only with special: true; user-defined tokens always", () => {
    expect(tokenizer.encode("hello<|im_end|>", { special: true })).toEqual([hello, imEnd]);
    expect(tokenizer.encode("hello<|im_end|>")).not.toContain(imEnd);
    expect(tokenizer.encode("<think>hello")).toEqual([think, hello]);
  });

  it("adds BOS and EOS when asked or when the vocabulary says so", () => {
    const withBos = toy({ bosTokenId: imEnd, addBos: true });
    expect(withBos.encode("hello")).toEqual([imEnd, hello]);
    expect(withBos.encode("hello", { addBos: false })).toEqual([hello]);
    expect(tokenizer.encode("hello", { addEos: true })).toEqual([hello, imEnd]);
    expect(toy({ addEos: true }).encode("")).toEqual([imEnd]);
    // Without bos_token_id llama.cpp falls back to id 11 for "gpt2" vocabularies, when it exists.
    expect(Tokenizer.fromVocabulary({ ...toyVocabulary(), addBos: true }).encode("x")).toEqual([11, 0x78]);
    const tiny = Tokenizer.fromVocabulary({ tokens: ["a", "b"], merges: [], preTokenizer: "qwen2", addBos: true });
    expect(() => tiny.encode("a")).toThrow(/no BOS token/);
  });

  it("renders token pieces as llama.cpp's token_to_piece does", () => {
    expect(tokenizer.decode([imEnd])).toBe("");
    expect(tokenizer.decode([imEnd], { special: true })).toBe("<|im_end|>");
    expect(tokenizer.decode([unknown])).toBe("");
    expect(tokenizer.decode([unknown], { special: true })).toBe("<unk>");
    expect(tokenizer.decode([think])).toBe("<think>");
    expect(tokenizer.decode([pad], { special: true })).toBe("");
    expect(tokenizer.decode([byteA])).toBe("A");
    expect(Array.from(tokenizer.tokenPiece(0x0a))).toEqual([0x0a]);
  });

  it("spells byte-level characters that encode no byte as llama.cpp does", () => {
    const odd = Tokenizer.fromVocabulary(toyVocabulary({ extraTokens: ["a€"] }));
    expect(odd.decode([256])).toBe("a[UNK_BYTE_0xe282aca€]");
  });

  it("cleans up spaces when the pre-tokenizer asks for it (gpt2, llama3), as llama.cpp's detokenize", () => {
    const gpt2 = Tokenizer.fromVocabulary(toyVocabulary({ preTokenizer: "gpt-2" }));
    const ids = gpt2.encode("a , b ' c . d 's e 're f 't g 'll");
    expect(gpt2.decode(ids)).toBe("a, b'c. d's e're f 't g 'll");
    expect(gpt2.decode(ids, { cleanUpSpaces: false })).toBe("a , b ' c . d 's e 're f 't g 'll");
    expect(tokenizer.decode(tokenizer.encode("a , b"))).toBe("a , b");
  });

  it("treats a lone surrogate as U+FFFD, as UTF-8 conversion does", () => {
    expect(tokenizer.encode("a\ud800b")).toEqual(tokenizer.encode("a\ufffdb"));
    expect(tokenizer.decode(tokenizer.encode("x\udc00"))).toBe("x\ufffd");
  });

  it("caches words without changing the result", () => {
    const text = "hello world hello world";
    const first = tokenizer.encode(text);
    expect(tokenizer.encode(text)).toEqual(first);
    tokenizer.clearCache();
    expect(tokenizer.encode(text)).toEqual(first);
  });

  it("names empty vocabulary texts as llama.cpp does", () => {
    const vocabulary = toyVocabulary({ extraTokens: [""] });
    expect(Tokenizer.fromVocabulary(vocabulary).tokenText(256)).toBe("[EMPTY_256]");
  });

  it("exposes special ids, attributes and end-of-generation tokens", () => {
    expect(tokenizer.eosTokenId).toBe(imEnd);
    expect(tokenizer.eotTokenId).toBe(imEnd);
    expect(tokenizer.isEndOfGeneration(imEnd)).toBe(true);
    expect(tokenizer.isEndOfGeneration(hello)).toBe(false);
    expect(tokenizer.tokenAttributes(think)).toBe(TokenAttribute.USER_DEFINED);
    expect(tokenizer.vocabularySize).toBe(270);
  });

  it("rejects ids outside the vocabulary and vocabularies it cannot use", () => {
    expect(() => tokenizer.decode([270])).toThrow(RangeError);
    expect(() => tokenizer.decode([-1])).toThrow(RangeError);
    expect(() => tokenizer.tokenText(1.5)).toThrow(RangeError);
    expect(() => Tokenizer.fromVocabulary({ ...toyVocabulary(), preTokenizer: "default" })).toThrow(TokenizerError);
    expect(() => Tokenizer.fromVocabulary({ ...toyVocabulary(), model: "llama" })).toThrow(TokenizerError);
    expect(() => Tokenizer.fromVocabulary({ tokens: [], merges: [], preTokenizer: "qwen2" })).toThrow(TokenizerError);
  });

  it("renders ChatML when the vocabulary has no chat template", () => {
    const text = tokenizer.applyChatTemplate([{ role: "user", content: "hi" }]);
    expect(text).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    expect(tokenizer.applyChatTemplate([{ role: "user", content: "hi" }], { addGenerationPrompt: false })).toBe("<|im_start|>user\nhi<|im_end|>\n");
  });
});
