import { loadModel } from "@memra/core";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { expect, it } from "vitest";
import { runLoadTest } from "./load-test";
import { startOpenAIServer } from "./openai-server";

// The short version of packages/cli/bench/load-test.ts: a few clients for a few seconds.
it("a short load test: no errors, every non-cancelled stream complete, every block free at the end", async () => {
  const model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })), { maxSequences: 4, kvCacheTokens: 4 * 256 });
  const server = startOpenAIServer({ model, modelId: "tiny", port: 0, contextLength: 256 });
  try {
    const report = await runLoadTest({ url: server.url, clients: 6, durationMs: 3000, cancelFraction: 0.25, maxTokens: [4, 16], promptWords: [3, 30], seed: 3 });
    expect(report.errorMessages).toEqual([]);
    expect(report.errors).toBe(0);
    expect(report.completed).toBeGreaterThan(3);
    expect(report.cancelled).toBeGreaterThan(0);
    expect(report.completed + report.cancelled).toBe(report.requests);
    for (let i = 0; i < 100 && model.engine.pool.usedBlocks > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(model.engine.pool.usedBlocks).toBe(0);
    expect(model.engine.queue).toEqual({ running: 0, waiting: 0 });
  } finally {
    await server.stop();
    model.dispose();
  }
}, 60_000);
