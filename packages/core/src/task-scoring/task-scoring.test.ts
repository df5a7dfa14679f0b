/**
 * llama-perplexity's task scores: the golden cases on the reference backend (the two smallest; the
 * native CPU backend runs them all, in @memra/cpu-ffi), the task pick against llama.cpp's selection
 * code, the data files' formats and errors, and the shared-prefix scoring against plain scoring.
 */
import { readFileSync } from "node:fs";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { definePerplexityTaskGoldenSuite, loadPerplexityTaskGoldens } from "../conformance/perplexity-task-golden";
import { type Model, loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { TaskScoringError, computeHellaswag, computeMultipleChoice, computeWinogrande, wilsonInterval } from "./compute-task-scores";
import { scoreSequenceGroups } from "./score-sequences";
import { TaskFileError, parseHellaswagFile, parseMultipleChoiceFile, parseWinograndeFile } from "./task-files";
import { MersenneTwister, hellaswagTaskOrder, sampledTaskOrder } from "./task-selection";

definePerplexityTaskGoldenSuite({ name: "reference", create: () => new ReferenceBackend(), cases: ["winogrande-moe-f32-30", "multiple-choice-dense-f32-15"], timeout: 300_000 });

const FIXTURES = new URL("../__fixtures__/perplexity-tasks/", import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES));

describe("the tasks llama-perplexity picks", () => {
  it("std::mt19937(1): the standard's 10000th draw", () => {
    const rng = new MersenneTwister(5489);
    let draw = 0;
    for (let i = 0; i < 10000; i++) draw = rng.next();
    expect(draw).toBe(4123659995); // [rand.predef]: mt19937 default-seeded, 10000th invocation
  });

  it("equal llama.cpp's selection code (perplexity-task-selection.cpp) in every golden case", () => {
    const cases = loadPerplexityTaskGoldens().cases.filter((c) => c.selection);
    expect(cases.map((c) => c.kind)).toEqual(expect.arrayContaining(["hellaswag", "winogrande", "multiple-choice"]));
    for (const c of cases) {
      const order = c.kind === "hellaswag" ? hellaswagTaskOrder(c.loaded, c.tasks ?? 400) : sampledTaskOrder(c.loaded, c.tasks!);
      expect(order, c.id).toEqual(c.selection);
    }
    expect(sampledTaskOrder(5, 0)).toEqual([0, 1, 2, 3, 4]);
    expect(sampledTaskOrder(5, 9)).toEqual([0, 1, 2, 3, 4]);
  });
});

describe("the data files", () => {
  it("HellaSwag: 6 lines a task, a final newline or not; a count that is not a multiple of 6 or a bad label is named", () => {
    const text = "ctx one\n2\na\nb\nc\nd\nctx two\n0\ne\nf\ng\nh\n";
    const tasks = parseHellaswagFile(text, "hs.txt");
    expect(tasks).toEqual([
      { index: 0, context: "ctx one", gold: 2, endings: ["a", "b", "c", "d"] },
      { index: 1, context: "ctx two", gold: 0, endings: ["e", "f", "g", "h"] },
    ]);
    expect(parseHellaswagFile(text.slice(0, -1), "hs.txt")).toEqual(tasks);
    expect(parseHellaswagFile(`${text}\n`, "hs.txt")).toEqual(tasks); // -f drops one newline, getline the empty rest
    expect(() => parseHellaswagFile(`${text}x\n`, "hs.txt")).toThrow(new TaskFileError("hs.txt: 13 lines, not a multiple of 6 (a HellaSwag task is 6 lines: context, gold ending index, 4 endings)"));
    expect(() => parseHellaswagFile(text.replace("\n0\n", "\nzero\n"), "hs.txt")).toThrow(/^hs\.txt:8: the gold ending index of task 1 is "zero", not 0, 1, 2 or 3$/);
    expect(() => parseHellaswagFile("", "hs.txt")).toThrow(/no HellaSwag tasks/);
    expect(parseHellaswagFile(fixture("hellaswag.txt").toString(), "f")).toHaveLength(48);
  });

  it("WinoGrande: llama.cpp's CSV reading, the header skipped and the last line (without a blank line after it) not read", () => {
    const text = 'index,sentence,option1,option2,answer\n0,"Anna, not Bea, said _ won.",Anna,Bea,1\n1,The _ sat.,cat,dog, 2\n2,Last _ line.,a,b,1\n';
    expect(parseWinograndeFile(text, "w.csv")).toEqual([
      { index: 0, line: 2, first: "Anna, not Bea, said ", second: " won.", choices: ["Anna", "Bea"], answer: 1 },
      { index: 1, line: 3, first: "The ", second: " sat.", choices: ["cat", "dog"], answer: 2 },
    ]);
    expect(parseWinograndeFile(`${text}\n`, "w.csv")).toHaveLength(3);
    expect(() => parseWinograndeFile("0,a _ b,x,y,1\n1,no blank,x,y,2\n2,x _,a,b,1\n", "w.csv")).toThrow(/^w\.csv:2: the sentence has no '_' for the choices to fill$/);
    expect(() => parseWinograndeFile("0,a _ b,x,y,1\n1,a _ b,x,3\n2,x _,a,b,1\n", "w.csv")).toThrow(/^w\.csv:2: 3 field separators/);
    expect(() => parseWinograndeFile("0,a _ b,x,y,1\n1,a _ b,x,y,3\n2,x _,a,b,1\n", "w.csv")).toThrow(/^w\.csv:2: the answer is "3", not 1 or 2$/);
    expect(() => parseWinograndeFile("0,a _ b,x,y,1\n", "w.csv")).toThrow(/^w\.csv: no WinoGrande tasks$/);
    expect(parseWinograndeFile(fixture("winogrande.csv").toString(), "f")).toHaveLength(120);
  });

  it("multiple choice: the binary format, all tasks in sequence or picked ones at their offsets; truncations named by byte", () => {
    const bytes = new Uint8Array(fixture("multiple-choice.bin"));
    const all = parseMultipleChoiceFile(bytes, "mc.bin");
    expect(all.available).toBe(40);
    expect(all.tasks.map((t) => t.index)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    for (const task of all.tasks) expect(task.labels.filter((label) => label === 1)).toHaveLength(1);
    const some = parseMultipleChoiceFile(bytes, "mc.bin", 15);
    expect(some.tasks).toEqual(sampledTaskOrder(40, 15).map((i) => all.tasks[i]));
    expect(() => parseMultipleChoiceFile(bytes.subarray(0, 3), "mc.bin")).toThrow(/^mc\.bin: 3 bytes, too short for the u32 task count$/);
    expect(() => parseMultipleChoiceFile(bytes.subarray(0, 100), "mc.bin")).toThrow(/^mc\.bin: 40 tasks need 160 bytes of task offsets from byte 4, the file has 100 bytes$/);
    expect(() => parseMultipleChoiceFile(bytes.subarray(0, bytes.length - 2), "mc.bin")).toThrow(/^mc\.bin: task 39 \(from byte \d+\): the file ends in the 2 mc2 labels at byte \d+$/);
    const many = bytes.slice();
    const view = new DataView(many.buffer);
    const first = 4 + 4 * 40;
    view.setUint32(first + 4 + view.getUint32(first, true), 101, true); // the first task's mc1 answer count
    expect(() => parseMultipleChoiceFile(many, "mc.bin")).toThrow(new RegExp(`^mc\\.bin: task 0 \\(from byte ${first}\\): 101 mc1 answers, more than 100, at byte \\d+$`));
    const empty = bytes.slice();
    new DataView(empty.buffer).setUint32(first, 0, true); // the first task's question: empty
    expect(() => parseMultipleChoiceFile(empty, "mc.bin")).toThrow(TaskFileError);
  });
});

describe("scoring", () => {
  let model: Model;
  let path = "";
  beforeAll(async () => {
    path = await syntheticModelFile(resolveOptions("tiny", { weightType: "f32" }));
    model = loadModel(path, { backend: new ReferenceBackend(), kvType: "f32" });
  }, 120_000);

  it("a shared prefix evaluated once gives each sequence's log-probabilities as scoring it alone", () => {
    const sequences = [
      [9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21],
      [9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12, 13, 14, 15, 16, 17, 18, 19, 30, 31, 32],
      [9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12, 13, 14, 15, 16, 17, 18, 19],
    ];
    const probes = sequences.flatMap((tokens, sequence) => tokens.slice(1).map((target, j) => ({ sequence, position: j, target })));
    const groups = [{ sequences, shared: 18, probes }, { sequences: [sequences[0]!], shared: 5, probes: probes.filter((p) => p.sequence === 0) }];
    // a step of 16 rows: pieces of several entries per step, and entries over several steps
    const small = loadModel(path, { backend: new ReferenceBackend(), kvType: "f32", maxBatchTokens: 16 });
    const [together, alone] = [...scoreSequenceGroups(small, groups, 1000)];
    small.dispose();
    const plain = sequences.flatMap((tokens) => {
      const cache = model.createCache(tokens.length);
      const rows = tokens.slice(1).map((_, j) => j);
      const result = Array.from(model.forwardLogprobs(tokens, cache, rows, tokens.slice(1)));
      cache.dispose();
      return result;
    });
    for (let i = 0; i < plain.length; i++) expect(together![i]).toBeCloseTo(plain[i]!, 5);
    expect(Array.from(alone!)).toEqual(Array.from(together!.subarray(0, sequences[0]!.length - 1)));
  });

  it("refuses a task that does not fit in 4 × the context, and sequences that share no token", () => {
    const tasks = parseHellaswagFile("A context of several words\n1\nand one ending\nand another one\nand a third\nand a fourth\n", "hs.txt");
    expect(() => computeHellaswag(model, tasks, { context: 3 })).toThrow(new TaskScoringError("task 0 (task 0 of the file) needs 14 tokens, more than llama-perplexity's context for tasks: 4 × --ctx 3"));
    const loose = parseWinograndeFile("0,_ sat.,Cats,Dogs,1\n\n", "w.csv");
    expect(() => computeWinogrande(model, loose)).toThrow(/^task 0 \(line 1\): its sequences share no leading token/);
  });

  it("HellaSwag: the mean log-probability of each ending's tokens, the first best picked; identical endings tie and the first wins", () => {
    const tasks = parseHellaswagFile("The weather today is\n3\nsunny and warm.\nraining hard.\nsunny and warm.\ncold.\n", "hs.txt");
    const [result] = computeHellaswag(model, tasks).tasks;
    expect(result!.logLikelihoods[0]).toBe(result!.logLikelihoods[2]);
    const best = Math.max(...result!.logLikelihoods);
    expect(result!.picked).toBe(result!.logLikelihoods.indexOf(best));
    const sequences = tasks[0]!.endings.map((ending) => model.tokenizer.encode(`The weather today is ${ending}`));
    const cache = model.createCache(64);
    const tokens = sequences[1]!;
    const own = tokens.length - 4; // "The weather today is" is 4 tokens here, shared by all
    expect(model.tokenizer.encode("The weather today is")).toEqual(tokens.slice(0, 4));
    const logprobs = model.forwardLogprobs(tokens, cache, Array.from({ length: own }, (_, i) => 3 + i), tokens.slice(4));
    cache.dispose();
    expect(result!.logLikelihoods[1]).toBeCloseTo(logprobs.reduce((s, x) => s + x, 0) / own, 5);
  });

  it("multiple choice: right when the first best answer's label is 1; the random chance is tasks over answers", () => {
    const bytes = new Uint8Array(fixture("multiple-choice.bin"));
    const file = parseMultipleChoiceFile(bytes, "mc.bin", 3);
    const result = computeMultipleChoice(model, file);
    for (const task of result.tasks) expect(task.correct - (task.scored > 1 ? result.tasks[task.scored - 2]!.correct : 0)).toBe(task.labels[task.picked] === 1 ? 1 : 0);
    expect(result.randomChance).toBeCloseTo(3 / file.tasks.reduce((s, t) => s + t.answers.length, 0), 12);
  });

  it("the Wilson interval llama-perplexity prints", () => {
    // llama-perplexity's line 48 of hellaswag-dense-f32: "48	8.33333333%	[3.2884%, 19.5533%]"
    const [low, high] = wilsonInterval(4, 48);
    expect([(100 * low).toFixed(4), (100 * high).toFixed(4)]).toEqual(["3.2884", "19.5533"]);
  });
});
