/**
 * KV states move between backends: a prompt's state saved on the native CPU backend loads into a
 * model on the reference backend (and back), and the reused blocks give the logprobs the loading
 * backend computes from scratch.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Model, ReferenceBackend, loadModel } from "@memra/core";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

const PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker who repaired every clock in the valley but his own.";

async function greedy(model: Model) {
  const stream = model.generate(PROMPT, { temperature: 0, maxTokens: 6, logprobs: true, ignoreEos: true });
  const logprobs: number[] = [];
  for await (const chunk of stream) if (chunk.logprob !== undefined) logprobs.push(chunk.logprob);
  return { ...(await stream.result), logprobs };
}

describe.skipIf(unavailable !== undefined)("KV states across backends", () => {
  it("a state saved on the native CPU backend loads on the reference backend, and one saved there loads on the CPU backend", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
    const directory = mkdtempSync(join(tmpdir(), "memra-cpu-state-"));
    const open = (native: boolean) => loadModel(path, { backend: native ? CpuBackend.create({ threads: 2 }) : new ReferenceBackend() });
    try {
      for (const [saveNative, file] of [
        [true, join(directory, "cpu.state")],
        [false, join(directory, "reference.state")],
      ] as const) {
        const saver = open(saveNative);
        const baselineModel = open(!saveNative);
        const loader = open(!saveNative);
        try {
          expect(saver.fingerprint).toBe(loader.fingerprint);
          const saved = await saver.saveState(file, PROMPT);
          const baseline = await greedy(baselineModel);
          const loaded = loader.loadState(file);
          expect(loaded.cachedTokens).toBe(Math.floor(saved.tokens / 16) * 16);
          expect(loaded.cachedTokens).toBeGreaterThanOrEqual(32);
          const reused = await greedy(loader);
          expect(reused.usage.cachedPromptTokens).toBe(loaded.cachedTokens);
          // The reference backend rounds activations as the native one does, so the logprobs agree
          // (measured: equal here); 1e-3 leaves room for another SIMD path's summation order.
          expect(reused.logprobs).toHaveLength(6);
          reused.logprobs.forEach((logprob, i) => expect(Math.abs(logprob - baseline.logprobs[i]!), `step ${i}, saved on ${saveNative ? "cpu" : "reference"}`).toBeLessThan(1e-3));
        } finally {
          for (const model of [saver, baselineModel, loader]) model.dispose();
        }
      }
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  }, 60_000);
});
