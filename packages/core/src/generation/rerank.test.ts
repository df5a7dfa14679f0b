/**
 * Model.rank against llama.cpp's rank pooling (tools/llamacpp/rerank-goldens.mjs) on synthetic
 * models shaped as llama.cpp's Qwen3-Reranker conversion: the same prompt tokens from the rerank
 * template, and the same scores within a bound per weight type.
 */
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { PROBABILITY_BOUNDS } from "../conformance/golden-suite";
import { ModelTensorError } from "../errors";
import { loadModel } from "../load-model";
import { loadRerankGoldens } from "../testing/rerank-goldens";
import { InvalidOptionError } from "./generation-options";
import { rerankPrompt } from "./rerank";

const goldens = loadRerankGoldens();

describe("Model.rank against llama.cpp", () => {
  for (const golden of goldens) {
    it(`gives llama.cpp's prompt tokens and scores: ${golden.id}`, async () => {
      const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)));
      expect(model.classifier?.labels).toEqual(["yes", "no"]);
      const template = model.rerankTemplate!;
      // The golden suite's bounds on a probability per weight type (rounding flips of the 8-bit
      // activations). Measured: f32 4.4e-7, q8_0 7.6e-10, q4_K_M 2.8e-2 (reference backend).
      const bound = PROBABILITY_BOUNDS[golden.options.weightType as string]!.max;
      for (const c of golden.cases) {
        const tokens = model.tokenizer.encode(rerankPrompt(template, c.query, c.document), { special: true });
        expect(tokens, `${c.query} / ${c.document}`).toEqual(c.tokens);
        const score = model.rankTokens(tokens);
        expect(Math.abs(score - c.score), `${c.query} / ${c.document}: ${score} against ${c.score}`).toBeLessThan(bound);
      }
      // rank() orders each query's documents as llama.cpp's scores do, where they are clearly apart.
      for (const query of new Set(golden.cases.map((c) => c.query))) {
        const cases = golden.cases.filter((c) => c.query === query);
        const ranked = model.rank(query, cases.map((c) => c.document));
        expect(ranked.map((r) => r.tokens).sort()).toEqual(cases.map((c) => c.tokens.length).sort());
        for (let i = 1; i < ranked.length; i++) {
          const [better, worse] = [cases[ranked[i - 1]!.index]!.score, cases[ranked[i]!.index]!.score];
          if (Math.abs(better - worse) > 2 * bound) expect(better, query).toBeGreaterThan(worse);
        }
      }
      model.dispose();
    });
  }

  it("rankAsync runs the documents through the engine beside a generation: rank's scores, the shared head evaluated once", async () => {
    const golden = goldens.find((m) => m.id === "small-q4_K_M-reranker")!;
    const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)));
    const query = golden.cases[0]!.query;
    const documents = golden.cases.filter((c) => c.query === query).map((c) => c.document);
    const expected = model.rank(query, documents, { topN: 3 });
    const alone = await model.complete("Once upon a time", { temperature: 0, maxTokens: 12 });
    const before = { ...model.engine.statistics };
    const stream = model.generate("Once upon a time", { temperature: 0, maxTokens: 12 });
    const ranked = model.rankAsync(query, documents, { topN: 3 });
    expect((await stream.result).tokens).toEqual(alone.tokens);
    const async = await ranked;
    expect(async.map((r) => r.index)).toEqual(expected.map((r) => r.index));
    for (let i = 0; i < async.length; i++) expect(async[i]!.score).toBeCloseTo(expected[i]!.score, 9);
    // The template's head and the query (whole blocks of it) came from the prefix cache for every document.
    const prompts = documents.map((document) => model.tokenizer.encode(rerankPrompt(model.rerankTemplate!, query, document), { special: true }));
    const sharedBlocks = Math.floor(Math.min(...prompts.map((p) => p.length)) / 16) - 1;
    expect(sharedBlocks).toBeGreaterThan(2);
    expect(model.engine.statistics.reusedTokens - before.reusedTokens).toBeGreaterThanOrEqual(documents.length * sharedBlocks * 16);
    const aborted = new AbortController();
    aborted.abort(new Error("stop"));
    await expect(model.rankAsync(query, documents, { signal: aborted.signal })).rejects.toThrow("stop");
    expect(model.engine.pool.usedBlocks).toBe(0);
    model.dispose();
  });

  it("sorts best first, keeps topN, and refuses what it cannot rank", async () => {
    const golden = goldens.find((m) => m.id === "small-q4_K_M-reranker")!;
    const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)));
    const query = golden.cases[0]!.query;
    const documents = golden.cases.filter((c) => c.query === query).map((c) => c.document);
    const ranked = model.rank(query, documents);
    expect(ranked.map((r) => r.index).sort()).toEqual(documents.map((_, i) => i));
    for (let i = 1; i < ranked.length; i++) expect(ranked[i - 1]!.score).toBeGreaterThanOrEqual(ranked[i]!.score);
    expect(model.rank(query, documents, { topN: 2 })).toEqual(ranked.slice(0, 2));
    // The prompts share the template's head and the query, evaluated once: the same scores as each prompt alone.
    const prompts = documents.map((document) => model.tokenizer.encode(rerankPrompt(model.rerankTemplate!, query, document), { special: true }));
    expect(prompts.every((tokens) => tokens.slice(0, 40).join() === prompts[0]!.slice(0, 40).join())).toBe(true);
    for (const r of ranked) expect(r.score).toBeCloseTo(model.rankTokens(prompts[r.index]!), 12);
    expect(model.rank(query, [])).toEqual([]);
    // A template of one's own: the same pair scores differently, and one without {document} is refused.
    const own = model.rank(query, documents, { template: "<Query>: {query}\n<Document>: {document}" });
    expect(own.map((r) => r.score)).not.toEqual(ranked.map((r) => r.score));
    expect(() => model.rank(query, documents, { template: "{query} only" })).toThrow(InvalidOptionError);
    expect(() => model.rank(query, documents, { topN: 0 })).toThrow(InvalidOptionError);
    // "$&" in a text is the text, not a replacement pattern.
    expect(rerankPrompt("q={query} d={document}", "$&", "$1")).toBe("q=$& d=$1");
    model.dispose();

    const chat = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
    await expect(chat.rankAsync("q", ["d"])).rejects.toThrow(ModelTensorError);
    expect(chat.classifier).toBeUndefined();
    expect(() => chat.rank("q", ["d"])).toThrow(ModelTensorError);
    expect(() => chat.rank("q", ["d"])).toThrow(/cls.output.weight.*not a reranker/);
    chat.dispose();
  });
});
