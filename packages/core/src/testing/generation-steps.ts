import { expect } from "vitest";
import type { TokenLogprob } from "../evaluation";
import type { GenerateOptions } from "../generation/generation-options";
import type { Model } from "../load-model";

/** One streamed generation step: its token, logprob and top logprobs. */
export interface GenerationStep {
  readonly token: number;
  readonly logprob: number;
  readonly top: readonly TokenLogprob[];
}

/** Every step `model.generate(prompt, options)` streams (options with logprobs). */
export async function generationSteps(model: Model, prompt: readonly number[], options: GenerateOptions): Promise<GenerationStep[]> {
  const steps: GenerationStep[] = [];
  for await (const chunk of model.generate(prompt, options)) {
    if (chunk.token !== undefined) steps.push({ token: chunk.token, logprob: chunk.logprob!, top: [...(chunk.topLogprobs ?? [])] });
  }
  return steps;
}

/**
 * `actual` has the tokens and top-logprob ids of `expected`, and every logprob within
 * `bound`·max(1, |expected|) (an f32 log Σ exp against the host's double one: 1e-5).
 */
export function expectStepsClose(actual: readonly GenerationStep[], expected: readonly GenerationStep[], bound: number): void {
  const close = (value: number, reference: number) => expect(Math.abs(value - reference)).toBeLessThan(bound * Math.max(1, Math.abs(reference)));
  expect(actual.map((step) => step.token)).toEqual(expected.map((step) => step.token));
  actual.forEach((step, i) => {
    const reference = expected[i]!;
    close(step.logprob, reference.logprob);
    expect(step.top.map((top) => top.id)).toEqual(reference.top.map((top) => top.id));
    step.top.forEach((top, j) => close(top.logprob, reference.top[j]!.logprob));
  });
}
