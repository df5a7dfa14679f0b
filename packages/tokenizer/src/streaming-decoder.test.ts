import { describe, expect, it } from "vitest";
import { toyVocabulary } from "./__fixtures__/toy-vocabulary";
import { StreamingDecoder } from "./streaming-decoder";
import { Tokenizer } from "./tokenizer";

describe("StreamingDecoder", () => {
  // No merges: every byte is its own token, so multi-byte characters span several tokens.
  const tokenizer = Tokenizer.fromVocabulary(toyVocabulary());

  it("holds back the bytes of a character until its last byte arrives", () => {
    const ids = tokenizer.encode("é👍");
    expect(ids.length).toBe(6);
    const decoder = tokenizer.createStreamingDecoder();
    expect(ids.map((id) => decoder.push(id))).toEqual(["", "é", "", "", "", "👍"]);
    expect(decoder.flush()).toBe("");
  });

  it("ends an unfinished character as U+FFFD on flush, then starts over", () => {
    const decoder = new StreamingDecoder((id) => tokenizer.tokenPiece(id));
    const [first] = tokenizer.encode("€");
    expect(decoder.push(first ?? 0)).toBe("");
    expect(decoder.flush()).toBe("\ufffd");
    expect(decoder.pushMany(tokenizer.encode("ok"))).toBe("ok");
  });

  it("keeps a leading U+FEFF and equals decoding everything at once", () => {
    const text = "\ufeffa€b\u{1f600}c";
    const ids = tokenizer.encode(text);
    const decoder = tokenizer.createStreamingDecoder();
    expect(decoder.pushMany(ids) + decoder.flush()).toBe(tokenizer.decode(ids));
    expect(tokenizer.decode(ids)).toBe(text);
  });
});
