/**
 * llama-perplexity's --hellaswag, --winogrande and --multiple-choice scores (tools/perplexity/
 * perplexity.cpp): the same tasks picked, tokenized the same way (the tokenizer's BOS / EOS as the
 * vocabulary asks, special tokens as text), the same tokens' log-probabilities averaged, and the
 * same choice made of the answers, ties included.
 *
 * Where llama.cpp reads past a sequence (an answer whose tokens all lie in the part every answer
 * shares; a WinoGrande choice that ends before the shared part does) its numbers are undefined;
 * here such an answer is scored on its last token, and such a choice from its own logits.
 */
import type { Model } from "../load-model";
import { type ScoringGroup, type ScoringProbe, groupTokens, scoreSequenceGroups } from "./score-sequences";
import type { HellaswagTask, MultipleChoiceTask, WinograndeTask } from "./task-files";
import { hellaswagTaskOrder, sampledTaskOrder } from "./task-selection";

/** Parallel sequences llama-perplexity's context holds for these tasks: its -c is per sequence. */
export const TASK_CONTEXT_SEQUENCES = 4;

export interface TaskScoringOptions<TaskResult> {
  /** llama-perplexity's -c: a task's tokens must fit in 4 × context (default 512). */
  readonly context?: number;
  /** Called with each task's result as it is scored, in order. */
  readonly onTask?: (result: TaskResult) => void;
}

/** A task's sequences do not fit in llama-perplexity's context, or share no leading token. */
export class TaskScoringError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TaskScoringError";
  }
}

/** Tokens shared at the start of every sequence. */
function commonPrefixLength(sequences: readonly (readonly number[])[]): number {
  const shortest = Math.min(...sequences.map((tokens) => tokens.length));
  let shared = 0;
  while (shared < shortest && sequences.every((tokens) => tokens[shared] === sequences[0]![shared])) shared++;
  return shared;
}

function checkContext(context: number): void {
  if (!Number.isInteger(context) || context < 1) throw new RangeError(`context must be a positive integer, got ${context}`);
}

/** The checks llama-perplexity makes of a task before decoding it. */
function checkGroup(group: ScoringGroup, position: number, label: string, context: number): void {
  const required = groupTokens(group);
  if (required > TASK_CONTEXT_SEQUENCES * context) {
    throw new TaskScoringError(`task ${position} (${label}) needs ${required} tokens, more than llama-perplexity's context for tasks: ${TASK_CONTEXT_SEQUENCES} × --ctx ${context}`);
  }
  if (group.shared < 1) throw new TaskScoringError(`task ${position} (${label}): its sequences share no leading token (no BOS and different first tokens), so there are no logits for their first tokens`);
}

/**
 * The probes of the mean log-probability of each sequence's tokens after the shared ones (a
 * sequence whose tokens all are shared: of its last token).
 */
function continuationProbes(sequences: readonly (readonly number[])[], shared: number): { probes: ScoringProbe[]; ranges: Array<[number, number]> } {
  const probes: ScoringProbe[] = [];
  const ranges: Array<[number, number]> = [];
  sequences.forEach((tokens, sequence) => {
    const from = probes.length;
    for (let t = Math.min(shared, tokens.length - 1); t < tokens.length; t++) probes.push({ sequence, position: t - 1, target: tokens[t]! });
    ranges.push([from, probes.length]);
  });
  return { probes, ranges };
}

function mean(values: Float64Array, [from, to]: [number, number]): number {
  let sum = 0;
  for (let i = from; i < to; i++) sum += values[i]!;
  return sum / (to - from);
}

/** The first best score (a later equal one does not replace it). */
function firstBest(scores: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i]! > scores[best]!) best = i;
  return best;
}

/** The 95% Wilson score interval of `correct` successes in `count`, as llama-perplexity --hellaswag prints it. */
export function wilsonInterval(correct: number, count: number): [number, number] {
  const za = 1.95996398454;
  const frequency = correct / count;
  const z = (za * za) / count;
  const spread = (z * Math.sqrt(count * (4 * frequency * (1 - frequency) + z))) / (za + za);
  return [(frequency + z * 0.5 - spread) / (1 + z), (frequency + z * 0.5 + spread) / (1 + z)];
}

/** √(p(1 − p)/(n − 1)): the error llama-perplexity gives its WinoGrande and multiple-choice accuracies. */
export function accuracyError(correct: number, count: number): number {
  const p = correct / count;
  return Math.sqrt((p * (1 - p)) / (count - 1));
}

export interface HellaswagTaskResult {
  /** The task's index in the file. */
  readonly task: number;
  readonly gold: number;
  readonly picked: number;
  /** Each ending's mean log-probability per token (acc_norm's score). */
  readonly logLikelihoods: readonly number[];
  /** Right answers so far, of `scored`. */
  readonly correct: number;
  readonly scored: number;
  /** The 95% Wilson interval of the accuracy so far. */
  readonly interval: readonly [number, number];
}

export interface HellaswagResult {
  /** Tasks in the file. */
  readonly available: number;
  readonly tasks: readonly HellaswagTaskResult[];
  readonly correct: number;
  readonly accuracy: number;
  readonly interval: readonly [number, number];
}

/**
 * llama-perplexity --hellaswag (acc_norm): `tasks` of the file's tasks (default 400, at most all),
 * drawn in llama.cpp's random order; each ending scored by the mean log-probability of its tokens
 * after the tokens all four share, tokenizing context + " " + ending.
 */
export function computeHellaswag(model: Model, all: readonly HellaswagTask[], options: TaskScoringOptions<HellaswagTaskResult> & { readonly tasks?: number } = {}): HellaswagResult {
  const context = options.context ?? 512;
  checkContext(context);
  const count = options.tasks ?? 400;
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`tasks must be a positive integer, got ${count}`);
  const selected = hellaswagTaskOrder(all.length, count).map((index) => all[index]!);
  const prepared = selected.map((task, position) => {
    const sequences = task.endings.map((ending) => model.tokenizer.encode(`${task.context} ${ending}`));
    const shared = commonPrefixLength(sequences);
    const { probes, ranges } = continuationProbes(sequences, shared);
    const group = { sequences, shared, probes };
    checkGroup(group, position, `task ${task.index} of the file`, context);
    return { group, ranges };
  });
  const tasks: HellaswagTaskResult[] = [];
  let correct = 0;
  let position = 0;
  for (const logprobs of scoreSequenceGroups(model, prepared.map((p) => p.group), TASK_CONTEXT_SEQUENCES * context)) {
    const task = selected[position]!;
    const logLikelihoods = prepared[position]!.ranges.map((range) => mean(logprobs, range));
    const picked = firstBest(logLikelihoods);
    if (picked === task.gold) correct++;
    position++;
    const result = { task: task.index, gold: task.gold, picked, logLikelihoods, correct, scored: position, interval: wilsonInterval(correct, position) };
    tasks.push(result);
    options.onTask?.(result);
  }
  return { available: all.length, tasks, correct, accuracy: correct / tasks.length, interval: wilsonInterval(correct, tasks.length) };
}

export interface WinograndeTaskResult {
  /** The task's index among the file's tasks, and its line. */
  readonly task: number;
  readonly line: number;
  readonly answer: 1 | 2;
  /** 1 when the first choice's score is the greater, else 2 (a tie picks 2). */
  readonly picked: 1 | 2;
  /** The two choices' mean log-probabilities per scored token. */
  readonly scores: readonly [number, number];
  readonly correct: number;
  readonly scored: number;
}

export interface WinograndeResult {
  readonly available: number;
  readonly tasks: readonly WinograndeTaskResult[];
  readonly correct: number;
  readonly accuracy: number;
  /** √(p(1 − p)/(n − 1)); llama-perplexity prints the final score only from 100 tasks. */
  readonly error: number;
}

/** Fewer tokens than this after the shared ones in either sentence: the choice itself is scored too. */
const MIN_TRAILING_TOKENS = 3;

/**
 * llama-perplexity --winogrande: `tasks` of the file's tasks (0, the default: all, in file order;
 * fewer: llama.cpp's random pick), each sentence completed with either choice and scored by the
 * mean log-probability of the tokens after the choice (of the tokens after the shared ones when
 * either sentence has at most 3 of them), but its last token (when more than one is scored).
 * As in llama.cpp, the second sentence's first scored token, when it is the first after the shared
 * ones, is scored from the logits at the end of the first sentence.
 */
export function computeWinogrande(model: Model, all: readonly WinograndeTask[], options: TaskScoringOptions<WinograndeTaskResult> & { readonly tasks?: number } = {}): WinograndeResult {
  const context = options.context ?? 512;
  checkContext(context);
  const count = options.tasks ?? 0;
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`tasks must be a non-negative integer, got ${count}`);
  const selected = sampledTaskOrder(all.length, count).map((index) => all[index]!);
  const prepared = selected.map((task, position) => {
    const sequences = task.choices.map((choice) => model.tokenizer.encode(`${task.first}${choice}${task.second}`));
    const bases = task.choices.map((choice) => model.tokenizer.encode(`${task.first}${choice}`).length);
    const shared = commonPrefixLength(sequences);
    const [first, second] = sequences as [number[], number[]];
    const scoreChoice = first.length - shared > MIN_TRAILING_TOKENS && second.length - shared > MIN_TRAILING_TOKENS;
    const probes: ScoringProbe[] = [];
    const ranges: Array<[number, number]> = [];
    sequences.forEach((tokens, s) => {
      const base = scoreChoice ? bases[s]! : shared;
      const last = tokens.length - base > 1 ? 1 : 0;
      const from = probes.length;
      for (let j = base - 1; j < tokens.length - 1 - last; j++) probes.push(winograndeProbe(first.length, shared, s, j, tokens[j + 1]!));
      ranges.push([from, probes.length]);
    });
    const group = { sequences, shared, probes };
    checkGroup(group, position, `line ${task.line}`, context);
    return { group, ranges };
  });
  const tasks: WinograndeTaskResult[] = [];
  let correct = 0;
  let position = 0;
  for (const logprobs of scoreSequenceGroups(model, prepared.map((p) => p.group), TASK_CONTEXT_SEQUENCES * context)) {
    const task = selected[position]!;
    // an empty range is 0/0: NaN, which compares false (picks 2), as llama.cpp's float division
    const scores = prepared[position]!.ranges.map((range) => mean(logprobs, range)) as [number, number];
    const picked = scores[0] > scores[1] ? 1 : 2;
    if (picked === task.answer) correct++;
    position++;
    const result: WinograndeTaskResult = { task: task.index, line: task.line, answer: task.answer, picked, scores, correct, scored: position };
    tasks.push(result);
    options.onTask?.(result);
  }
  return { available: all.length, tasks, correct, accuracy: correct / tasks.length, error: accuracyError(correct, tasks.length) };
}

/**
 * The logits llama-perplexity --winogrande scores token j + 1 of sentence `s` with. Its batch holds
 * a task's logits as [the last shared token, the first sentence's own tokens, the second's], and it
 * reads the second sentence's from index (first length − shared) + (j + 1 − shared): for j ≥ shared
 * that is the second sentence's row j, for j = shared − 1 the first sentence's last row.
 */
function winograndeProbe(firstLength: number, shared: number, s: number, j: number, target: number): ScoringProbe {
  if (s === 0 || j >= shared) return { sequence: s, position: j, target };
  const index = firstLength - shared + (j + 1 - shared);
  if (index >= 0) return { sequence: 0, position: shared - 1 + index, target }; // index 0: the last shared token's row
  return { sequence: 1, position: j, target }; // llama.cpp reads outside the task's logits; here the row itself
}

export interface MultipleChoiceTaskResult {
  /** The task's index in the file. */
  readonly task: number;
  readonly picked: number;
  /** The labels of the answers (1: right). */
  readonly labels: readonly number[];
  /** Each answer's mean log-probability per token. */
  readonly logLikelihoods: readonly number[];
  readonly correct: number;
  readonly scored: number;
}

export interface MultipleChoiceResult {
  readonly available: number;
  readonly tasks: readonly MultipleChoiceTaskResult[];
  readonly correct: number;
  readonly accuracy: number;
  readonly error: number;
  /** Tasks over answers: the accuracy of picking at random, and its error. */
  readonly randomChance: number;
  readonly randomChanceError: number;
}

/**
 * llama-perplexity --multiple-choice over the tasks of parseMultipleChoiceFile (which picks them):
 * each answer scored by the mean log-probability of its tokens after those all answers share,
 * tokenizing question + " " + answer; a task counts as right when the first best answer's label is 1.
 */
export function computeMultipleChoice(model: Model, file: { readonly tasks: readonly MultipleChoiceTask[]; readonly available: number }, options: TaskScoringOptions<MultipleChoiceTaskResult> = {}): MultipleChoiceResult {
  const context = options.context ?? 512;
  checkContext(context);
  const selected = file.tasks;
  if (selected.length === 0) throw new RangeError("no multiple-choice tasks to score");
  const prepared = selected.map((task, position) => {
    const sequences = task.answers.map((answer) => model.tokenizer.encode(`${task.question} ${answer}`));
    const shared = commonPrefixLength(sequences);
    const { probes, ranges } = continuationProbes(sequences, shared);
    const group = { sequences, shared, probes };
    checkGroup(group, position, `task ${task.index} of the file`, context);
    return { group, ranges };
  });
  const tasks: MultipleChoiceTaskResult[] = [];
  let correct = 0;
  let answers = 0;
  let position = 0;
  for (const logprobs of scoreSequenceGroups(model, prepared.map((p) => p.group), TASK_CONTEXT_SEQUENCES * context)) {
    const task = selected[position]!;
    const logLikelihoods = prepared[position]!.ranges.map((range) => mean(logprobs, range));
    const picked = firstBest(logLikelihoods);
    if (task.labels[picked] === 1) correct++;
    answers += task.answers.length;
    position++;
    const result = { task: task.index, picked, labels: task.labels, logLikelihoods, correct, scored: position };
    tasks.push(result);
    options.onTask?.(result);
  }
  const n = tasks.length;
  return {
    available: file.available,
    tasks,
    correct,
    accuracy: correct / n,
    error: accuracyError(correct, n),
    randomChance: n / answers,
    randomChanceError: Math.sqrt(((n / answers) * (1 - n / answers)) / (n - 1)),
  };
}
