/**
 * computeKlDivergence against llama.cpp: kld-goldens.json (tools/llamacpp/kld-goldens.mjs) holds, for
 * a synthetic f16 model and its Q8_0, Q4_K_M and Q2_K files, every scored token's KL divergence,
 * change in the next token's probability and top-1 agreement, computed from llama.cpp's
 * distributions of both models. The quantized files are made again here with @memra/gguf's
 * quantizeModel, which writes llama-quantize's files byte for byte.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { quantizeModel } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import goldens from "./__fixtures__/kld-goldens.json";
import { computeKlDivergence } from "./evaluation";
import { loadModel } from "./load-model";

interface GoldenCase {
  type: string;
  meanKld: number;
  kld: number[];
  deltaP: number[];
  sameTop: boolean[];
  topMargin: number[];
}

const cases = goldens.cases as GoldenCase[];
const directory = mkdtempSync(join(tmpdir(), "memra-kld-"));
let basePath: string;
const paths: Record<string, string> = {};

beforeAll(async () => {
  const base = goldens.base as { preset: PresetName; options: Partial<SyntheticModelOptions> };
  basePath = await syntheticModelFile(resolveOptions(base.preset, base.options));
  for (const c of cases) {
    paths[c.type] = join(directory, `${c.type}.gguf`);
    await quantizeModel(basePath, paths[c.type]!, { type: c.type });
  }
}, 120_000);

describe("computeKlDivergence against llama.cpp's distributions (reference backend, f32 KV)", () => {
  it.each(cases.map((c) => [c.type, c] as const))("%s", (_type, c) => {
    const base = loadModel(basePath, { kvType: "f32" });
    const model = loadModel(paths[c.type]!, { kvType: "f32" });
    const result = computeKlDivergence(base, model, goldens.tokens, goldens.context);
    expect(result.windows).toBe(goldens.windows);
    expect(result.scoredTokens).toBe(c.kld.length);
    let largest = 0;
    c.kld.forEach((expected, i) => {
      largest = Math.max(largest, Math.abs(result.perToken.klDivergence[i]! - expected));
      expect(Math.abs(result.perToken.deltaP[i]! - c.deltaP[i]!), `token ${i}: Δp`).toBeLessThan(DELTA_P_BOUND);
      if (c.topMargin[i]! >= SAME_TOP_MARGIN) expect(result.perToken.sameTop[i] === 1, `token ${i}: same top`).toBe(c.sameTop[i]);
    });
    expect(largest).toBeLessThan(KLD_BOUNDS[c.type]!);
    expect(Math.abs(result.klDivergence.mean - c.meanKld) / c.meanKld).toBeLessThan(0.02);
    expect(result.sameTop.fraction).toBeCloseTo(c.sameTop.filter(Boolean).length / c.sameTop.length, 1);
  });
});

// Our distributions and llama.cpp's differ by the golden suite's rounding flips (up to 3e-2 in a
// probability for q8_0 and the k-quants), so each token's KL divergence differs by a few percent of
// the worst ones. Measured (reference backend): largest per-token difference Q8_0 4.7e-3, Q4_K_M
// 5.8e-2, Q2_K 0.23 (its mean KLD is 2.19); mean KLD within 0.7%, 0.4%, 0.03%; Δp within 3.4e-3;
// top-1 disagreements only where one model's top-1/top-2 margin is below 0.11.
const KLD_BOUNDS: Record<string, number> = { Q8_0: 7e-3, Q4_K_M: 9e-2, Q2_K: 0.35 };
const DELTA_P_BOUND = 1e-2;
const SAME_TOP_MARGIN = 0.25;
