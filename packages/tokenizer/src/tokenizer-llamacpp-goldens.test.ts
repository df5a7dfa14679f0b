import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { qwen3Vocabulary, vocabularyFingerprint } from "./__fixtures__/qwen3-vocabulary";
import { Tokenizer } from "./tokenizer";

interface GoldenCase {
  category: string;
  text: string;
  /** llama.cpp tokens with parse_special = false. */
  ids: number[];
  /** With parse_special = true, when different. */
  idsSpecial?: number[];
  /** llama.cpp detokenize(ids, special = false), when not `text`. */
  decoded?: string;
  /** detokenize(idsSpecial, special = true), when not `text`. */
  decodedSpecial?: string;
  /** detokenize(idsSpecial, special = false), when not `decoded ?? text`. */
  decodedSpecialHidden?: string;
}

interface Goldens {
  llamaCpp: { release: string; nodeLlamaCpp: string };
  vocabulary: { fingerprint: string; size: number; merges: number };
  specialTokens: { bos: number; eos: number; eot: number; nl: number; endOfGeneration: number[] };
  cases: GoldenCase[];
  /** [id, detokenize([id], false), detokenize([id], true)] */
  pieces: Array<[number, string, string]>;
}

const goldens = JSON.parse(
  readFileSync(new URL("./__fixtures__/llamacpp-tokenizer-goldens.json", import.meta.url), "utf8"),
) as Goldens;
const vocabulary = qwen3Vocabulary();
const tokenizer = Tokenizer.fromVocabulary(vocabulary);

/** What a JS string becomes through UTF-8 (lone surrogates → U+FFFD). */
function wellFormed(text: string): string {
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(new TextEncoder().encode(text));
}

const cases = goldens.cases.map((c, index) => ({ ...c, name: `${c.category} #${index}: ${JSON.stringify(c.text.slice(0, 40))}` }));

describe(`Qwen3 tokens equal llama.cpp's (${goldens.llamaCpp.release}, node-llama-cpp ${goldens.llamaCpp.nodeLlamaCpp})`, () => {
  it("builds the same vocabulary the golden GGUF was written from", () => {
    expect(vocabularyFingerprint(vocabulary)).toBe(goldens.vocabulary.fingerprint);
    expect(tokenizer.vocabularySize).toBe(goldens.vocabulary.size);
  });

  it("covers at least 300 strings, a 20 kB document among them", () => {
    expect(goldens.cases.length).toBeGreaterThanOrEqual(300);
    expect(goldens.cases.some((c) => c.text.length >= 20_000)).toBe(true);
  });

  it("resolves the special tokens llama.cpp resolves", () => {
    expect(tokenizer.bosTokenId).toBe(goldens.specialTokens.bos);
    expect(tokenizer.eosTokenId).toBe(goldens.specialTokens.eos);
    expect(tokenizer.eotTokenId).toBe(goldens.specialTokens.eot);
    expect(tokenizer.encode("\n")).toEqual([goldens.specialTokens.nl]);
    const endOfGeneration = [...tokenizer.endOfGenerationTokenIds].filter((id) => id >= 151643 && id < 151700).sort((a, b) => a - b);
    expect(endOfGeneration).toEqual(goldens.specialTokens.endOfGeneration);
  });

  it.each(cases)("encode without special parsing: $name", (c) => {
    expect(tokenizer.encode(c.text, { special: false })).toEqual(c.ids);
  });

  it.each(cases)("encode with special parsing: $name", (c) => {
    expect(tokenizer.encode(c.text, { special: true })).toEqual(c.idsSpecial ?? c.ids);
  });

  it.each(cases)("decode as llama.cpp detokenizes: $name", (c) => {
    const idsSpecial = c.idsSpecial ?? c.ids;
    expect(tokenizer.decode(c.ids)).toBe(c.decoded ?? c.text);
    expect(tokenizer.decode(idsSpecial, { special: true })).toBe(c.decodedSpecial ?? c.text);
    expect(tokenizer.decode(idsSpecial, { special: false })).toBe(c.decodedSpecialHidden ?? c.decoded ?? c.text);
  });

  it.each(cases)("decode(encode(s)) === s and streaming equals whole decoding: $name", (c) => {
    const expected = wellFormed(c.text);
    for (const special of [false, true]) {
      const ids = tokenizer.encode(c.text, { special });
      expect(tokenizer.decode(ids, { special })).toBe(expected);
      const stream = tokenizer.createStreamingDecoder({ special });
      let streamed = "";
      for (const id of ids) {
        const piece = stream.push(id);
        expect(piece).not.toMatch(/\ufffd/u.test(expected) ? /$^/ : /\ufffd/);
        streamed += piece;
      }
      streamed += stream.flush();
      expect(streamed).toBe(expected);
    }
  });

  it("renders single tokens as llama.cpp does (bytes, added, unused)", () => {
    const mismatches = goldens.pieces.filter(
      ([id, hidden, shown]) => tokenizer.decode([id]) !== hidden || tokenizer.decode([id], { special: true }) !== shown,
    );
    expect(mismatches).toEqual([]);
    expect(goldens.pieces.length).toBeGreaterThan(500);
  });
});
