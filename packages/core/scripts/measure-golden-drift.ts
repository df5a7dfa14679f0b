#!/usr/bin/env bun
/**
 * Measures how far the reference backend is from llama.cpp's goldens, per model: decided steps,
 * top-1 mismatches where llama.cpp's margin is ≥ 0.1, near-tie flips, largest and mean top-5
 * probability difference. The golden suite's bounds come from these figures.
 *
 *   bun packages/core/scripts/measure-golden-drift.ts [MODEL-ID-SUBSTRING] [--f32-activations]
 *
 * --f32-activations keeps activations exact instead of rounding them as ggml does: the floor a
 * plain f32 reference has against llama.cpp on quantized models.
 */
import { basename } from "node:path";
import { ReferenceBackend, loadModel } from "@memra/core";
import { type PresetName, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { compareWithGolden } from "../src/conformance/golden-comparison";
import { MARGIN_BOUND, loadGoldenSuite } from "../src/conformance/golden-suite";

const f32Activations = process.argv.includes("--f32-activations");
const filter = process.argv.slice(2).find((a) => !a.startsWith("--"));
const { suite, goldens } = loadGoldenSuite();
console.log(`activations: ${f32Activations ? "f32" : "rounded as ggml"}; margin bound ${MARGIN_BOUND}`);
for (const entry of suite.models) {
  if (filter && !entry.id.includes(filter)) continue;
  const golden = goldens.get(entry.id)!;
  const path = await syntheticModelFile(resolveOptions(entry.preset as PresetName, entry.options));
  if (basename(path) !== golden.model.file) console.log(`${entry.id}: generated ${basename(path)}, goldens recorded on ${golden.model.file}`);
  const started = performance.now();
  const model = loadModel(path, { backend: new ReferenceBackend({ ggmlActivationRounding: !f32Activations }) });
  const r = compareWithGolden(model, golden, MARGIN_BOUND);
  model.dispose();
  console.log(
    [
      entry.id.padEnd(24),
      `decided ${r.decidedSteps}/${r.steps}`,
      `mismatches ${r.argmaxMismatches.length}`,
      `near-tie flips ${r.nearTieFlips}`,
      `max Δp ${r.maxProbabilityDifference.toExponential(2)}`,
      `mean Δp ${r.meanProbabilityDifference.toExponential(2)}`,
      `${((performance.now() - started) / 1000).toFixed(1)} s`,
      r.argmaxMismatches.length ? JSON.stringify(r.argmaxMismatches) : "",
    ].join("  "),
  );
}
