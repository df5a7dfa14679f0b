import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { type GoldenModelFile, compareWithGolden, comparedSteps } from "./golden-comparison";
import { MARGIN_BOUND, loadGoldenSuite } from "./golden-suite";

describe("compareWithGolden's step stride", () => {
  it("takes steps 0, k, 2k, ... and the last", () => {
    expect(comparedSteps(32)).toEqual(Array.from({ length: 32 }, (_, i) => i));
    expect(comparedSteps(32, 4)).toEqual([0, 4, 8, 12, 16, 20, 24, 28, 31]);
    expect(comparedSteps(29, 4)).toEqual([0, 4, 8, 12, 16, 20, 24, 28]);
    expect(comparedSteps(1, 4)).toEqual([0]);
    expect(comparedSteps(0, 4)).toEqual([]);
    expect(() => comparedSteps(32, 0)).toThrow(/stride must be a positive integer/);
  });

  it("compares the strided steps' rows with the goldens' same steps: a changed golden token there is a mismatch, elsewhere not looked at", async () => {
    const { suite, goldens } = loadGoldenSuite();
    const entry = suite.models.find((m) => m.id === "dense-q8_0")!;
    const golden = goldens.get(entry.id)!;
    const model = loadModel(await syntheticModelFile(resolveOptions("small", entry.options)), { backend: new ReferenceBackend() });
    try {
      const prompt = golden.prompts.find((p) => p.steps[4]!.margin >= MARGIN_BOUND && p.steps[5]!.margin >= MARGIN_BOUND)!;
      const one = { ...golden, prompts: [prompt] };
      const clean = compareWithGolden(model, one, MARGIN_BOUND, 4);
      expect(clean.steps).toBe(comparedSteps(prompt.steps.length, 4).length);
      expect(clean.argmaxMismatches).toEqual([]);
      // the continuation is the model's input too: change the expected pick only (steps[].top stays)
      const changed = (step: number): GoldenModelFile => ({
        ...one,
        prompts: [{ ...prompt, continuation: prompt.continuation.map((token, i) => (i === step ? token + 1 : token)) }],
      });
      const atStrided = compareWithGolden(model, changed(4), MARGIN_BOUND, 4);
      // the changed token is also the input of the steps after it; only step 4's pick is compared against it
      expect(atStrided.argmaxMismatches.map((m) => m.step)).toContain(4);
      expect(compareWithGolden(model, changed(5), MARGIN_BOUND, 4).argmaxMismatches.map((m) => m.step)).not.toContain(5);
      expect(compareWithGolden(model, changed(5), MARGIN_BOUND, 1).argmaxMismatches.map((m) => m.step)).toContain(5);
    } finally {
      model.dispose();
    }
  }, 120_000);
});
