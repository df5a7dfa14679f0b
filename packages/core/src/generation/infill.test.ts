import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadQwen3Vocabulary, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { Tokenizer } from "@memra/tokenizer";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";
import { InvalidOptionError } from "./generation-options";
import { InfillUnsupportedError, infillPromptTokens } from "./infill";

const goldens = JSON.parse(readFileSync(join(__dirname, "../../../tokenizer/src/__fixtures__/llamacpp-tokenizer-goldens.json"), "utf8")) as {
  specialTokens: { infill: { prefix: number; suffix: number; middle: number } };
};

/** Qwen3's vocabulary with some tokens' texts replaced (to take FIM tokens away). */
function qwen3Tokenizer(renamed: Record<string, string> = {}): Tokenizer {
  const vocabulary = loadQwen3Vocabulary();
  const tokens = vocabulary.tokens.map((text) => renamed[text] ?? text);
  return Tokenizer.fromVocabulary({ ...vocabulary, tokens, preTokenizer: "qwen2", addBos: false });
}

let tokenizer: Tokenizer;
const text = (value: string) => tokenizer.encode(value, { special: false });
const big = { batchTokens: 2048, contextTokens: 40960, predictTokens: -1 };

beforeAll(() => {
  tokenizer = qwen3Tokenizer();
});

describe("infillPromptTokens", () => {
  it("finds the FIM tokens llama.cpp finds in Qwen3's vocabulary", () => {
    const fim = tokenizer.fillInMiddleTokens;
    expect({ prefix: fim.prefix, suffix: fim.suffix, middle: fim.middle }).toEqual(goldens.specialTokens.infill);
    expect(tokenizer.tokenText(fim.repository!)).toBe("<|repo_name|>");
    expect(tokenizer.tokenText(fim.separator!)).toBe("<|file_sep|>");
    expect(tokenizer.tokenText(fim.pad!)).toBe("<|fim_pad|>");
  });

  it("lays out llama.cpp's repository-level prompt: extra files, prefix and prompt, suffix, middle", () => {
    const fim = tokenizer.fillInMiddleTokens;
    const input = {
      prefix: "def add(a, b):\n    ",
      suffix: "\n\nprint(add(1, 2))\n",
      extra: [{ filename: "util.py", text: "import math\n" }, { text: "x = 1\n" }],
      prompt: "return",
    };
    const tokens = infillPromptTokens(tokenizer, input, big);
    expect(tokens).toEqual([
      fim.repository, ...text("myproject\n"),
      fim.separator, ...text("util.py\n"), ...text("import math\n"),
      fim.separator, ...text("tmp\n"), ...text("x = 1\n"),
      fim.separator, ...text("filename\n"),
      fim.prefix, ...text(input.prefix), ...text("return"),
      fim.suffix, ...text(input.suffix),
      fim.middle,
    ]);
    // Suffix first (llama.cpp's --spm-infill).
    const spm = infillPromptTokens(tokenizer, { prefix: "a", suffix: "b" }, { ...big, suffixFirst: true });
    expect(spm.slice(-5)).toEqual([fim.suffix, ...text("b"), fim.prefix, ...text("a"), fim.middle]);
    // Special tokens are text in the prefix and suffix, tokens in the prompt.
    const special = infillPromptTokens(tokenizer, { prefix: "<|im_end|>", suffix: "", prompt: "<|im_end|>" }, big);
    const specialTail = [fim.prefix, ...text("<|im_end|>"), tokenizer.eotTokenId, fim.suffix, fim.middle];
    expect(special.slice(-specialTail.length)).toEqual(specialTail);
  });

  it("keeps the prefix's end, the suffix's start and the extra context's end, as llama.cpp sizes them", () => {
    const fim = tokenizer.fillInMiddleTokens;
    const prefix = Array.from({ length: 40 }, (_, i) => `p${i}`).join(" ");
    const suffix = Array.from({ length: 40 }, (_, i) => `s${i}`).join(" ");
    const extraText = Array.from({ length: 40 }, (_, i) => `e${i}`).join(" ");
    const prompt = "q";
    // batch 32: the prefix keeps 24 tokens, the suffix 8 - (2 + 1) = 5; context 100 - 32 - 2 * 20 = 28 extra tokens.
    const tokens = infillPromptTokens(tokenizer, { prefix, suffix, prompt, extra: [{ filename: "f", text: extraText }] }, { batchTokens: 32, contextTokens: 100, predictTokens: 20 });
    const extra = [fim.repository!, ...text("myproject\n"), fim.separator!, ...text("f\n"), ...text(extraText), fim.separator!, ...text("filename\n")];
    expect(tokens).toEqual([...extra.slice(-28), fim.prefix, ...text(prefix).slice(-24), ...text(prompt), fim.suffix, ...text(suffix).slice(0, 5), fim.middle]);
    // No room for extra context (context - batch - 2 * predict <= 0): not even the header.
    const bare = infillPromptTokens(tokenizer, { prefix: "a", suffix: "b", extra: [{ text: "c" }] }, { batchTokens: 2048, contextTokens: 512, predictTokens: -1 });
    expect(bare).toEqual([fim.prefix, ...text("a"), fim.suffix, ...text("b"), fim.middle]);
    // A prompt longer than a quarter batch leaves no suffix.
    const long = infillPromptTokens(tokenizer, { prefix: "a", suffix: "b c d", prompt: "x y z" }, { batchTokens: 16, contextTokens: 16, predictTokens: 0 });
    expect(long).toEqual([fim.prefix, ...text("a"), ...text("x y z"), fim.suffix, fim.middle]);
  });

  it("without repository tokens separates extra files with llama.cpp's snippet line; without FIM tokens refuses", () => {
    const plain = qwen3Tokenizer({ "<|repo_name|>": "<|not_repo|>", "<|file_sep|>": "<|not_sep|>" });
    const fim = plain.fillInMiddleTokens;
    expect(fim.repository).toBeUndefined();
    expect(fim.separator).toBeUndefined();
    const tokens = infillPromptTokens(plain, { prefix: "a", suffix: "b", extra: [{ filename: "ignored", text: "c" }] }, big);
    const t = (value: string) => plain.encode(value, { special: false });
    expect(tokens).toEqual([...t("\n\n--- snippet ---\n\n"), ...t("c"), fim.prefix, ...t("a"), fim.suffix, ...t("b"), fim.middle]);

    const none = qwen3Tokenizer({ "<|fim_prefix|>": "<|a|>", "<|fim_middle|>": "<|b|>" });
    expect(() => infillPromptTokens(none, { prefix: "a", suffix: "b" }, big)).toThrow(InfillUnsupportedError);
    expect(() => infillPromptTokens(none, { prefix: "a", suffix: "b" }, big)).toThrow(/no fill-in-the-middle prefix, middle token/);
  });

  it("takes FIM tokens the metadata names over the ones found by text", () => {
    const vocabulary = loadQwen3Vocabulary();
    const named = Tokenizer.fromVocabulary({ ...vocabulary, preTokenizer: "qwen2", fimPrefixTokenId: 100, fimSuffixTokenId: 101, fimMiddleTokenId: 102 });
    expect(named.fillInMiddleTokens).toMatchObject({ prefix: 100, suffix: 101, middle: 102, repository: tokenizer.fillInMiddleTokens.repository });
  });
});

describe("model.infill", () => {
  let model: Model;
  beforeAll(async () => {
    model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
  });
  afterAll(() => model.dispose());

  it("generates from the infill prompt, as a completion of those tokens does", async () => {
    const input = { prefix: "def add(a, b):\n    ", suffix: "\n\nprint(add(1, 2))\n", extra: [{ filename: "util.py", text: "import math\n" }] };
    const expectedPrompt = infillPromptTokens(model.tokenizer, input, { batchTokens: 64, contextTokens: model.contextLength, predictTokens: 12 });
    expect(expectedPrompt[0]).toBe(model.tokenizer.fillInMiddleTokens.repository);
    const expected = await model.complete(expectedPrompt, { temperature: 0, maxTokens: 12 });
    const result = await model.infill(input, { temperature: 0, maxTokens: 12, batchTokens: 64 }).result;
    expect(result.promptTokens).toEqual(expectedPrompt);
    expect(result.tokens).toEqual(expected.tokens);
    expect(result.text).toBe(expected.text);
    // The layout follows maxTokens: the extra files fill context - batch - 2 * maxTokens.
    const small = await model.infill(input, { temperature: 0, maxTokens: 4, batchTokens: model.contextLength - 8 }).result;
    expect(small.promptTokens).toEqual(infillPromptTokens(model.tokenizer, input, { batchTokens: model.contextLength - 8, contextTokens: model.contextLength, predictTokens: 4 }));
    expect(small.promptTokens[0]).toBe(model.tokenizer.fillInMiddleTokens.prefix);
  });

  it("names a wrong input or option", () => {
    expect(() => model.infill({ prefix: "a" } as never)).toThrow(InvalidOptionError);
    expect(() => model.infill({ prefix: "a" } as never)).toThrow(/suffix/);
    expect(() => model.infill({ prefix: "a", suffix: "b", extra: [{ name: "x", text: "y" }] } as never)).toThrow(/unknown infill input "name"/);
    expect(() => model.infill({ prefix: "a", suffix: "b" }, { batchTokens: 2 })).toThrow(/batchTokens must be an integer of at least 4/);
    expect(() => model.infill({ prefix: "a", suffix: "b" }, { maxTokens: 0 })).toThrow(/maxTokens must be at least 1/);
  });
});
