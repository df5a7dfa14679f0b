/**
 * `memra perplexity --hellaswag / --winogrande / --multiple-choice`: llama-perplexity's task scores
 * (@memra/core computeHellaswag, computeWinogrande, computeMultipleChoice), printed as it prints them:
 * its per-task lines character for character, then its final lines.
 */
import { readFileSync } from "node:fs";
import { type KVType, TaskFileError, TaskScoringError, computeHellaswag, computeMultipleChoice, computeWinogrande, loadModel, parseHellaswagFile, parseMultipleChoiceFile, parseWinograndeFile } from "@memra/core";
import { chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { metadataOverrideOptions, parsePositiveInteger } from "./model-arguments";

export const perplexityTaskParseOptions = {
  hellaswag: { type: "boolean" },
  "hellaswag-tasks": { type: "string" },
  winogrande: { type: "boolean" },
  "winogrande-tasks": { type: "string" },
  "multiple-choice": { type: "boolean" },
  "multiple-choice-tasks": { type: "string" },
} as const;

export const perplexityTaskOptionHelp = `  --hellaswag             HellaSwag (acc_norm) over -f: 6 lines a task (context, gold ending 0-3, 4 endings)
  --hellaswag-tasks N     tasks, in llama.cpp's random order (default: 400, at most the file's)
  --winogrande            WinoGrande over -f: CSV lines index,sentence with _,choice1,choice2,answer 1|2
  --winogrande-tasks N    tasks picked at random as llama.cpp picks them (default: 0, all in order)
  --multiple-choice       multiple choice over -f: llama.cpp's binary format (ARC, MMLU, TruthfulQA...)
  --multiple-choice-tasks N
                          tasks picked at random as llama.cpp picks them (default: 0, all in order)`;

type TaskKind = "hellaswag" | "winogrande" | "multiple-choice";
const KINDS: readonly TaskKind[] = ["hellaswag", "winogrande", "multiple-choice"];

export interface PerplexityTaskValues {
  readonly hellaswag?: boolean;
  readonly "hellaswag-tasks"?: string;
  readonly winogrande?: boolean;
  readonly "winogrande-tasks"?: string;
  readonly "multiple-choice"?: boolean;
  readonly "multiple-choice-tasks"?: string;
}

/** The task score asked for, if any (one at most; a task count only with its score). */
export function perplexityTaskKind(values: PerplexityTaskValues): TaskKind | undefined {
  const asked = KINDS.filter((kind) => values[kind] === true);
  if (asked.length > 1) throw new CliError(`${asked.map((kind) => `--${kind}`).join(" and ")} cannot be combined: one task score a run`);
  for (const kind of KINDS) {
    if (values[`${kind}-tasks`] !== undefined && values[kind] !== true) throw new CliError(`--${kind}-tasks needs --${kind}`);
  }
  return asked[0];
}

function parseTaskCount(value: string | undefined, name: string): number {
  if (value === undefined) return 0;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0) throw new CliError(`${name} must be a non-negative integer (0: all), got "${value}"`);
  return parsed;
}

/**
 * C's printf("%*.*f"): `value` rounded to `digits` decimals, half to even on its exact binary value
 * (JavaScript's toFixed rounds such halves up), right-aligned in `width`; nan as glibc prints it.
 */
export function formatFixed(value: number, digits: number, width = 0): string {
  let text: string;
  if (Number.isNaN(value)) text = "-nan"; // the NaN of 0/0 on x86 has its sign bit set
  else if (!Number.isFinite(value)) text = value > 0 ? "inf" : "-inf";
  else {
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, value);
    const high = view.getUint32(0);
    const biased = (high >>> 20) & 0x7ff;
    const mantissa = (BigInt(high & 0xfffff) << 32n) | BigInt(view.getUint32(4));
    const significand = biased === 0 ? mantissa : mantissa | (1n << 52n);
    const exponent = (biased === 0 ? 1 : biased) - 1075; // value = ±significand × 2^exponent
    const scaled = significand * 10n ** BigInt(digits);
    let rounded: bigint;
    if (exponent >= 0) rounded = scaled << BigInt(exponent);
    else {
      const divisor = 1n << BigInt(-exponent);
      rounded = scaled / divisor;
      const twice = 2n * (scaled % divisor);
      if (twice > divisor || (twice === divisor && rounded % 2n === 1n)) rounded++;
    }
    const plain = rounded.toString().padStart(digits + 1, "0");
    const sign = value < 0 || Object.is(value, -0) ? "-" : "";
    text = `${sign}${digits === 0 ? plain : `${plain.slice(0, -digits)}.${plain.slice(-digits)}`}`;
  }
  return text.padStart(width);
}

/**
 * llama-perplexity's final figures, in its single precision: 100·p and 100·√(p(1 − p)/(samples − 1))
 * for p = numerator / denominator.
 */
function finalFigures(numerator: number, denominator: number, samples: number): [number, number] {
  const p = Math.fround(numerator / denominator);
  const variance = Math.fround(Math.fround(p * Math.fround(1 - p)) / (samples - 1));
  return [Math.fround(100 * p), Math.fround(100 * Math.fround(Math.sqrt(variance)))];
}

export async function perplexityTasksCommand(
  kind: TaskKind,
  values: PerplexityTaskValues & {
    readonly model?: string;
    readonly file: string;
    readonly ctx?: string;
    readonly threads?: string;
    readonly device?: string;
    readonly json?: boolean;
    readonly "override-kv"?: readonly string[];
  },
  path: string,
  kvType: KVType,
  io: CliIO,
): Promise<void> {
  const context = parsePositiveInteger(values.ctx, "--ctx", 512);
  const count = kind === "hellaswag" ? parsePositiveInteger(values["hellaswag-tasks"], "--hellaswag-tasks", 400) : parseTaskCount(values[`${kind}-tasks`], `--${kind}-tasks`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(values.file);
  } catch (error) {
    throw new CliError(`cannot read ${values.file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const source = values.file;
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const print = (line: string) => {
    if (!values.json) io.stdout(`${line}\n`);
  };
  // the header before the first task's line: a task that cannot be scored fails before any output
  let header: string | undefined;
  const printTask = (line: string) => {
    if (header !== undefined) print(header);
    header = undefined;
    print(line);
  };
  try {
    // the data file first: a malformed one fails before the model loads
    const data =
      kind === "hellaswag"
        ? { kind, tasks: parseHellaswagFile(bytes.toString("utf8"), source) }
        : kind === "winogrande"
          ? { kind, tasks: parseWinograndeFile(bytes.toString("utf8"), source) }
          : { kind, file: parseMultipleChoiceFile(new Uint8Array(bytes), source, count) };
    const backend = await chooseBackend(threads, parseBackendChoice(values.device));
    const model = loadModel(path, { backend, kvType, ...metadataOverrideOptions(values) });
    const started = performance.now();
    let summary: object;
    let scored: number;
    let available: number;
    if (data.kind === "hellaswag") {
      header = "task\tacc_norm\t95% confidence interval";
      const result = computeHellaswag(model, data.tasks, {
        context,
        tasks: count,
        onTask: (t) => printTask(`${t.scored}\t${formatFixed((t.correct / t.scored) * 100, 8, 3)}%\t[${formatFixed(t.interval[0] * 100, 4, 3)}%, ${formatFixed(t.interval[1] * 100, 4, 3)}%]`),
      });
      summary = result;
      scored = result.tasks.length;
      available = result.available;
    } else if (data.kind === "winogrande") {
      const result = computeWinogrande(model, data.tasks, {
        context,
        tasks: count,
        onTask: (t) => print(`${t.scored}\t${formatFixed((100 * t.correct) / t.scored, 4)}\t${formatFixed(t.scores[0], 6, 10)}  ${formatFixed(t.scores[1], 6, 10)}  ${t.picked}  ${t.answer}`),
      });
      if (result.tasks.length >= 100) {
        // llama.cpp prints its final score from 100 tasks
        const [accuracy, error] = finalFigures(result.correct, result.tasks.length, result.tasks.length);
        print(`\nFinal Winogrande score(${result.tasks.length} tasks): ${formatFixed(accuracy, 4)} +/- ${formatFixed(error, 4)}`);
      }
      summary = result;
      scored = result.tasks.length;
      available = result.available;
    } else {
      header = "task\tacc_norm";
      const result = computeMultipleChoice(model, data.file, { context, onTask: (t) => printTask(`${t.scored}\t${formatFixed((100 * t.correct) / t.scored, 8)}`) });
      const answers = result.tasks.reduce((sum, t) => sum + t.labels.length, 0);
      const [accuracy, error] = finalFigures(result.correct, result.tasks.length, result.tasks.length);
      const [chance, chanceError] = finalFigures(result.tasks.length, answers, result.tasks.length); // tasks − 1, as llama.cpp
      print(`\nFinal result: ${formatFixed(accuracy, 4)} +/- ${formatFixed(error, 4)}`);
      print(`Random chance: ${formatFixed(chance, 4)} +/- ${formatFixed(chanceError, 4)}`);
      summary = result;
      scored = result.tasks.length;
      available = result.available;
    }
    const seconds = (performance.now() - started) / 1000;
    if (values.json) io.stdout(`${JSON.stringify({ kind, file: source, context, ...summary, seconds })}\n`);
    else io.stderr(`${scored} of ${available} tasks scored in ${seconds.toFixed(1)} s\n`);
    model.dispose();
  } catch (error) {
    if (error instanceof TaskFileError || error instanceof TaskScoringError) throw new CliError(error.message);
    throw error;
  }
}
