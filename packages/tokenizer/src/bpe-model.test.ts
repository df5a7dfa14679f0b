import { describe, expect, it } from "vitest";
import { byteChar } from "./__fixtures__/toy-vocabulary";
import { qwen3Vocabulary } from "./__fixtures__/qwen3-vocabulary";
import { BpeModel } from "./bpe-model";

/** A model over the 256 byte characters (ids = bytes) plus `extra` tokens (ids from 256 on). */
function model(merges: string[], extra: string[], options: { ignoreMerges?: boolean; shortWordLimit?: number } = {}): BpeModel {
  const ids = new Map<string, number>();
  for (let byte = 0; byte < 256; byte++) ids.set(byteChar(byte), byte);
  extra.forEach((text, i) => ids.set(text, 256 + i));
  return new BpeModel(ids, 256 + extra.length, merges, { ignoreMerges: options.ignoreMerges ?? false, ...options });
}

function encode(bpe: BpeModel, text: string): number[] {
  const bytes = new TextEncoder().encode(text);
  const out: number[] = [];
  bpe.encodeWord(bytes, bytes.length, out);
  return out;
}

const A = 0x61;
const B = 0x62;
const C = 0x63;

describe("BpeModel", () => {
  it("merges the lowest-ranked pair first", () => {
    // "b c" outranks "a b": abc → a + bc
    const bpe = model(["b c", "a b"], ["bc", "ab"]);
    expect(encode(bpe, "abc")).toEqual([A, 256]);
    const other = model(["a b", "b c"], ["ab", "bc"]);
    expect(encode(other, "abc")).toEqual([256, C]);
  });

  it("merges the leftmost pair on equal ranks, then the pairs that merging creates", () => {
    const bpe = model(["a a", "aa aa"], ["aa", "aaaa"]);
    expect(encode(bpe, "aaa")).toEqual([256, A]);
    expect(encode(bpe, "aaaaa")).toEqual([257, A]);
  });

  it("keeps the first rank of a duplicate merge", () => {
    const bpe = model(["a b", "b c", "a b"], ["ab", "bc"]);
    expect(bpe.mergeCount).toBe(2);
    expect(encode(bpe, "abc")).toEqual([256, C]);
  });

  it("merges through strings that are no token, and spells leftovers with single-byte tokens", () => {
    // "ab" is no token but "ab c" merges it into the token "abc".
    const bpe = model(["a b", "ab c"], ["abc"]);
    expect(encode(bpe, "abc")).toEqual([256]);
    // "ab" stays a symbol without a token: llama.cpp falls back to the tokens of its single bytes.
    expect(encode(bpe, "abd")).toEqual([A, B, 0x64]);
  });

  it("emits a word that is a token whole when merges are ignored (llama3)", () => {
    const bpe = model([], ["abc"], { ignoreMerges: true });
    expect(encode(bpe, "abc")).toEqual([256]);
    expect(encode(model([], ["abc"]), "abc")).toEqual([A, B, C]);
  });

  it("encodes non-ASCII through the byte-level characters", () => {
    const bpe = model([`${byteChar(0xc3)} ${byteChar(0xa9)}`], [byteChar(0xc3) + byteChar(0xa9)]);
    expect(encode(bpe, "é")).toEqual([256]);
    expect(encode(bpe, "ée")).toEqual([256, 0x65]);
  });

  it("gives the same tokens with and without the heap, on the Qwen3 vocabulary", () => {
    const vocabulary = qwen3Vocabulary();
    const ids = new Map<string, number>();
    vocabulary.tokens.forEach((text, id) => ids.set(text, id));
    const scan = new BpeModel(ids, vocabulary.tokens.length, vocabulary.merges, { ignoreMerges: false, shortWordLimit: 1 << 16 });
    const heap = new BpeModel(ids, vocabulary.tokens.length, vocabulary.merges, { ignoreMerges: false, shortWordLimit: 0 });
    const words = [
      "hello",
      " internationalization",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "机器学习是人工智能的一个分支它使计算机能够从数据中学习",
      "👨‍👩‍👧‍👦👍🏽🇯🇵",
      " Zwölfboxkämpferjagenviktorquerüberdengroßensylterdeich",
      "ab".repeat(300),
    ];
    for (const word of words) expect(encode(heap, word), word).toEqual(encode(scan, word));
  });
});
