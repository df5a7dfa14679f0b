/**
 * Synthetic models with a truncated vocabulary (@memra/synthetic's `vocabulary` option), which the
 * emulated CUDA tests use to keep the LM head small: the tokenizer still encodes any text, a text
 * whose Qwen3 tokens are all kept gets exactly those tokens, chat templates get their special
 * tokens, and a model generates with them.
 */
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { loadModel } from "./load-model";
import { ReferenceBackend } from "./reference-backend";

describe("a synthetic model with a truncated vocabulary", () => {
  it("tokenizes as Qwen3 does where Qwen3's tokens are kept, encodes anything, and chats", async () => {
    const size = 2048;
    const ordinary = size - 26;
    const full = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })), { backend: new ReferenceBackend() });
    const cut = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: size })), { backend: new ReferenceBackend() });
    try {
      expect(cut.vocabularySize).toBe(size);
      // Qwen3's own tokens of this text are all below the cut: the truncated merges give the same ones.
      const common = "in the and to of it is on at as an or by";
      const qwen = full.tokenizer.encode(common);
      expect(Math.max(...qwen)).toBeLessThan(ordinary);
      expect(cut.tokenizer.encode(common)).toEqual(qwen);
      // Words Qwen3 has as single tokens past the cut fall back to smaller pieces, and round-trip.
      for (const text of ["internationalization 😀 Привет, 東京!", "\t  spaces\n\nand\r\nlines"]) {
        const tokens = cut.tokenizer.encode(text);
        expect(Math.max(...tokens)).toBeLessThan(ordinary);
        expect(cut.tokenizer.decode(tokens)).toBe(text);
        expect(tokens.length).toBeGreaterThanOrEqual(full.tokenizer.encode(text).length);
      }
      // The chat template's special tokens are the renumbered added tokens.
      const prompt = cut.tokenizer.applyChatTemplate([{ role: "user", content: "hi" }], { addGenerationPrompt: true });
      const tokens = cut.tokenizer.encode(prompt, { special: true });
      const imStart = cut.tokenizer.tokenId("<|im_start|>")!;
      expect(imStart).toBeGreaterThanOrEqual(ordinary);
      expect(tokens[0]).toBe(imStart);
      expect(cut.tokenizer.isEndOfGeneration(cut.tokenizer.tokenId("<|im_end|>")!)).toBe(true);
      const result = await cut.complete(common, { temperature: 0, maxTokens: 8 });
      expect(result.tokens.length).toBe(8);
      for (const token of result.tokens) expect(token).toBeLessThan(size);
    } finally {
      full.dispose();
      cut.dispose();
    }
  }, 60_000);
});
