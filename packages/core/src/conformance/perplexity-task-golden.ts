/**
 * computeHellaswag / computeWinogrande / computeMultipleChoice against llama-perplexity: the cases
 * of __fixtures__/perplexity-tasks/perplexity-task-goldens.json (recorded by
 * tools/llamacpp/perplexity-task-goldens.ts from llama.cpp's own perplexity.cpp on golden-suite
 * models, over the committed data files), run on any backend.
 *
 * The tasks loaded and picked (in order) must be llama.cpp's. Each task's right-or-wrong must be
 * llama.cpp's (read from the running accuracy it prints) unless this run's answer scores are within
 * TASK_TIE_BOUNDS of flipping it: random-weight models have near-ties, and backends round
 * differently. WinoGrande's printed scores must agree within WINOGRANDE_SCORE_BOUNDS. Where no task
 * differs, the running accuracies and the final score ± error equal llama.cpp's printed figures.
 */
import { readFileSync } from "node:fs";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import type { Backend } from "../backend";
import { loadModel } from "../load-model";
import { computeHellaswag, computeMultipleChoice, computeWinogrande } from "../task-scoring/compute-task-scores";
import { parseHellaswagFile, parseMultipleChoiceFile, parseWinograndeFile } from "../task-scoring/task-files";

/**
 * Largest difference from llama-perplexity's printed WinoGrande scores (mean log-probabilities, 6
 * decimals), in nats per token, by the model's weights. f32: llama.cpp sums each row's exponentials
 * in float (measured up to 3.6e-4 on moe-f32). Quantized: the rare rounding flips of q8_0 activations
 * (see PROBABILITY_BOUNDS) move the mean over a few tokens more (measured up to 5.0e-2 on dense-q8_0,
 * native CPU backend).
 */
export const WINOGRANDE_SCORE_BOUNDS = { f32: 2e-3, quantized: 0.1 } as const;
/**
 * Nats of mean log-likelihood between the best right and the best wrong answer within which a task
 * may be scored right by one and wrong by the other: twice the score bounds' headroom, by weights.
 */
export const TASK_TIE_BOUNDS = { f32: 1e-3, quantized: 0.1 } as const;

const weights = (c: PerplexityTaskGoldenCase) => (c.options.weightType === "f32" ? "f32" : "quantized");

const FIXTURES = new URL("../__fixtures__/perplexity-tasks/", import.meta.url);
const ROOT = new URL("../../../../", import.meta.url);

export interface PerplexityTaskGoldenCase {
  readonly id: string;
  readonly kind: "hellaswag" | "winogrande" | "multiple-choice";
  readonly model: string;
  readonly preset: PresetName;
  readonly options: Partial<SyntheticModelOptions>;
  readonly tasks?: number;
  readonly context?: number;
  readonly data: string;
  readonly loaded: number;
  readonly selection?: readonly number[];
  /** llama-perplexity's per-task lines (stdout) and final lines (stderr, without the log prefix). */
  readonly lines: readonly string[];
  readonly final: readonly string[];
  readonly seconds: number;
}

export function loadPerplexityTaskGoldens(): { readonly cases: readonly PerplexityTaskGoldenCase[] } {
  return JSON.parse(readFileSync(new URL("perplexity-task-goldens.json", FIXTURES), "utf8"));
}

/** How one run compares with llama-perplexity's. */
export interface PerplexityTaskComparison {
  readonly tasks: number;
  /** Tasks scored right or wrong as llama.cpp scored them. */
  readonly agreeing: number;
  /** Positions (from 1) of tasks within TASK_TIE_BOUNDS of flipping, and of those that differ. */
  readonly nearTies: readonly number[];
  readonly differing: readonly number[];
  /** Running accuracy (percent) after each task, and the final figures: this run's and llama.cpp's. */
  readonly accuracy: readonly number[];
  readonly llamaAccuracy: readonly number[];
  readonly final: readonly number[];
  readonly llamaFinal: readonly number[];
  /** WinoGrande: the largest difference from llama.cpp's printed scores. */
  readonly largestScoreDifference?: number;
  /** File indices of the tasks scored, in order. */
  readonly order: readonly number[];
  readonly available: number;
  readonly seconds: number;
}

/** The right/wrong increments of a running accuracy in percent (after 1, 2, ... tasks). */
function increments(percentages: readonly number[]): number[] {
  let previous = 0;
  return percentages.map((percent, i) => {
    const correct = Math.round((percent * (i + 1)) / 100);
    const step = correct - previous;
    previous = correct;
    return step;
  });
}

/** How far the scores are from changing whether the pick is right: the best right one against the best wrong one. */
function flipMargin(scores: readonly number[], right: (i: number) => boolean): number {
  let bestRight = -Infinity;
  let bestWrong = -Infinity;
  scores.forEach((score, i) => {
    if (right(i)) bestRight = Math.max(bestRight, score);
    else bestWrong = Math.max(bestWrong, score);
  });
  return Math.abs(bestRight - bestWrong);
}

/** Runs one golden case on `backend` and compares it with llama-perplexity's output. */
export async function comparePerplexityTaskCase(c: PerplexityTaskGoldenCase, backend: Backend): Promise<PerplexityTaskComparison> {
  const path = await syntheticModelFile(resolveOptions(c.preset, c.options));
  const model = loadModel(path, { backend, kvType: "f32" });
  const data = readFileSync(new URL(c.data, ROOT));
  const context = c.context ?? 512;
  const numbers = (line: string) => (line.match(/-?\d+(\.\d+)?|-?nan/g) ?? []).map(Number);
  const llama = c.lines.map(numbers);
  const llamaFinal = c.final.flatMap((line) => numbers(line.replace(/^Final Winogrande score\(\d+ tasks\)/, "")));
  const tieBound = TASK_TIE_BOUNDS[weights(c)];
  const started = performance.now();
  try {
    if (c.kind === "winogrande") {
      const result = computeWinogrande(model, parseWinograndeFile(data.toString("utf8"), c.data), { context, ...(c.tasks ? { tasks: c.tasks } : {}) });
      const seconds = (performance.now() - started) / 1000;
      const nearTies: number[] = [];
      const differing: number[] = [];
      let largestScoreDifference = 0;
      result.tasks.forEach((task, i) => {
        const [, , first, second, picked, answer] = llama[i]!;
        expect(task.answer, `task ${i + 1}: the answer llama.cpp read`).toBe(answer);
        largestScoreDifference = Math.max(largestScoreDifference, Math.abs(task.scores[0] - first!), Math.abs(task.scores[1] - second!));
        const tie = Math.abs(task.scores[0] - task.scores[1]) <= tieBound;
        if (tie) nearTies.push(i + 1);
        if (task.picked !== picked) differing.push(i + 1);
      });
      const final = result.tasks.length >= 100 ? [100 * result.accuracy, 100 * result.error] : []; // llama.cpp prints it from 100 tasks
      return { tasks: result.tasks.length, agreeing: result.tasks.length - differing.length, nearTies, differing, accuracy: result.tasks.map((t) => (100 * t.correct) / t.scored), llamaAccuracy: llama.map((n) => n[1]!), final, llamaFinal, largestScoreDifference, order: result.tasks.map((t) => t.task), available: result.available, seconds };
    }
    const run =
      c.kind === "hellaswag"
        ? (() => {
            const result = computeHellaswag(model, parseHellaswagFile(data.toString("utf8"), c.data), { context, ...(c.tasks ? { tasks: c.tasks } : {}) });
            const margins = result.tasks.map((t) => flipMargin(t.logLikelihoods, (i) => i === t.gold));
            return { result, margins, final: [] as number[] };
          })()
        : (() => {
            const result = computeMultipleChoice(model, parseMultipleChoiceFile(data, c.data, c.tasks ?? 0), { context });
            const margins = result.tasks.map((t) => flipMargin(t.logLikelihoods, (i) => t.labels[i] === 1));
            return { result, margins, final: [100 * result.accuracy, 100 * result.error, 100 * result.randomChance, 100 * result.randomChanceError] };
          })();
    const seconds = (performance.now() - started) / 1000;
    const { result, margins } = run;
    const llamaAccuracy = llama.map((n) => n[1]!);
    const theirs = increments(llamaAccuracy);
    let previous = 0;
    const nearTies: number[] = [];
    const differing: number[] = [];
    result.tasks.forEach((task, i) => {
      const mine = task.correct - previous;
      previous = task.correct;
      if (margins[i]! <= tieBound) nearTies.push(i + 1);
      if (mine !== theirs[i]) differing.push(i + 1);
    });
    return {
      tasks: result.tasks.length,
      agreeing: result.tasks.length - differing.length,
      nearTies,
      differing,
      accuracy: result.tasks.map((t) => (100 * t.correct) / t.scored),
      llamaAccuracy,
      final: run.final,
      llamaFinal,
      order: result.tasks.map((t) => t.task),
      available: result.available,
      seconds,
    };
  } finally {
    model.dispose();
  }
}

export interface PerplexityTaskSuiteBackend {
  readonly name: string;
  readonly create: () => Backend;
  /** Case ids to run (default: all). */
  readonly cases?: readonly string[];
  /** Per case, in milliseconds (default 240 s). */
  readonly timeout?: number;
}

/** The golden cases as vitest tests on one backend. */
export function definePerplexityTaskGoldenSuite(backend: PerplexityTaskSuiteBackend): void {
  const { cases } = loadPerplexityTaskGoldens();
  describe(`llama-perplexity's task scores (${backend.name} backend)`, () => {
    for (const c of cases.filter((c) => !backend.cases || backend.cases.includes(c.id))) {
      it(
        `${c.id}: ${c.kind}, the tasks picked and scored as llama.cpp`,
        async () => {
          const run = await comparePerplexityTaskCase(c, backend.create());
          expect(run.available, "tasks loaded").toBe(c.loaded);
          expect(run.tasks, "tasks scored").toBe(c.lines.length);
          if (c.selection) expect(run.order, "tasks picked").toEqual(c.selection);
          expect(run.differing.filter((position) => !run.nearTies.includes(position)), "tasks scored otherwise than llama.cpp without a near-tie").toEqual([]);
          if (run.largestScoreDifference !== undefined) expect(run.largestScoreDifference).toBeLessThanOrEqual(WINOGRANDE_SCORE_BOUNDS[weights(c)]);
          if (run.differing.length === 0) {
            run.accuracy.forEach((accuracy, i) => expect(Math.abs(accuracy - run.llamaAccuracy[i]!), `running accuracy after task ${i + 1}`).toBeLessThanOrEqual(c.kind === "winogrande" ? 5e-5 : 5e-9));
            expect(run.final.length, "final figures").toBe(run.llamaFinal.length);
            run.final.forEach((figure, i) => expect(Math.abs(figure - run.llamaFinal[i]!), `final figure ${i}`).toBeLessThanOrEqual(6e-5));
          }
        },
        backend.timeout ?? 240_000,
      );
    }
  });
}
