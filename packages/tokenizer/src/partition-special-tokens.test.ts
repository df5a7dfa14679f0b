import { describe, expect, it } from "vitest";
import { type SpecialTokenPattern, type TextFragment, partitionSpecialTokens } from "./partition-special-tokens";

const pattern = (id: number, text: string, options: Partial<SpecialTokenPattern> = {}): SpecialTokenPattern => ({
  id,
  text,
  onlyWhenParsingSpecial: true,
  lstrip: false,
  rstrip: false,
  ...options,
});

/** Fragments as readable values: token ids, and the text of text fragments. */
function pieces(text: string, fragments: TextFragment[]): Array<number | string> {
  return fragments.map((f) => ("token" in f ? f.token : text.slice(f.start, f.end)));
}

describe("partitionSpecialTokens", () => {
  const imStart = pattern(1, "<|im_start|>");
  const imEnd = pattern(2, "<|im_end|>");
  const think = pattern(3, "<think>", { onlyWhenParsingSpecial: false });

  it("splits at control tokens only when parsing special tokens", () => {
    const text = "<|im_start|>user\nhi<|im_end|>\n";
    expect(pieces(text, partitionSpecialTokens(text, [imStart, imEnd], true))).toEqual([1, "user\nhi", 2, "\n"]);
    expect(pieces(text, partitionSpecialTokens(text, [imStart, imEnd], false))).toEqual([text]);
  });

  it("always splits at user-defined tokens", () => {
    const text = "a<think>b<think>";
    expect(pieces(text, partitionSpecialTokens(text, [think], false))).toEqual(["a", 3, "b", 3]);
  });

  it("tries longer tokens first, so a token inside a longer one is not matched", () => {
    const short = pattern(4, "<a>");
    const long = pattern(5, "<a>b");
    const text = "<a>b <a>";
    expect(pieces(text, partitionSpecialTokens(text, [long, short], true))).toEqual([5, " ", 4]);
  });

  it("handles adjacent tokens, tokens at both ends, and empty text", () => {
    const text = "<|im_end|><|im_end|>x<|im_end|>";
    expect(pieces(text, partitionSpecialTokens(text, [imEnd], true))).toEqual([2, 2, "x", 2]);
    expect(partitionSpecialTokens("", [imEnd], true)).toEqual([]);
    expect(pieces("plain", partitionSpecialTokens("plain", [imEnd], true))).toEqual(["plain"]);
  });

  it("drops C whitespace before an lstrip token and after an rstrip token", () => {
    const lstrip = pattern(6, "<mask>", { lstrip: true });
    const rstrip = pattern(7, "</s>", { rstrip: true });
    const text = "a \t<mask> b</s> \n c";
    expect(pieces(text, partitionSpecialTokens(text, [lstrip, rstrip], true))).toEqual(["a", 6, " b", 7, "c"]);
    // U+00A0 is no C isspace()
    const nbsp = "a\u00a0<mask>";
    expect(pieces(nbsp, partitionSpecialTokens(nbsp, [lstrip], true))).toEqual(["a\u00a0", 6]);
  });
});
