import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { qwen3Vocabulary } from "./__fixtures__/qwen3-vocabulary";
import { Tokenizer } from "./tokenizer";

interface OtherCase {
  ids: number[];
  idsSpecial?: number[];
  /** llama.cpp detokenize(ids, special = false), when not the text (these pre-tokenizers clean up spaces). */
  decoded?: string;
}

const texts = (
  JSON.parse(readFileSync(new URL("./__fixtures__/llamacpp-tokenizer-goldens.json", import.meta.url), "utf8")) as {
    cases: Array<{ text: string }>;
  }
).cases.map((c) => c.text);
const goldens = JSON.parse(readFileSync(new URL("./__fixtures__/llamacpp-pre-tokenizer-goldens.json", import.meta.url), "utf8")) as {
  preTokenizers: Record<string, OtherCase[]>;
};

describe.each(Object.keys(goldens.preTokenizers))("the %s pre-tokenizer on the Qwen vocabulary equals llama.cpp", (preTokenizer) => {
  const tokenizer = Tokenizer.fromVocabulary({ ...qwen3Vocabulary(), preTokenizer });
  const cases = (goldens.preTokenizers[preTokenizer] ?? []).map((c, index) => ({
    ...c,
    text: texts[index] ?? "",
    name: `#${index}: ${JSON.stringify((texts[index] ?? "").slice(0, 40))}`,
  }));

  it("has a golden for every corpus string", () => {
    expect(cases.length).toBe(texts.length);
  });

  it.each(cases)("tokens and detokenized text $name", (c) => {
    expect(tokenizer.encode(c.text)).toEqual(c.ids);
    expect(tokenizer.encode(c.text, { special: true })).toEqual(c.idsSpecial ?? c.ids);
    expect(tokenizer.decode(c.ids)).toBe(c.decoded ?? c.text);
  });
});
