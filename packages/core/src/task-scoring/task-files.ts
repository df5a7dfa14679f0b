/**
 * The data files of llama-perplexity's --hellaswag, --winogrande and --multiple-choice, read as its
 * tools/perplexity/perplexity.cpp reads them (after `-f FILE` has dropped one trailing newline of a
 * text file), with an error naming the file and the line or byte where llama.cpp would fail or read
 * nonsense.
 */
import { sampledTaskOrder } from "./task-selection";

/** A data file that cannot be scored: the message names the file and the line or byte. */
export class TaskFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TaskFileError";
  }
}

/** The text of a `-f FILE` as llama.cpp's argument parser keeps it: one trailing newline dropped. */
function promptText(text: string): string {
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

/** The leading integer of `text` as std::stoi / `istream >> int` read it (leading blanks, a sign, digits), or undefined. */
function leadingInteger(text: string): number | undefined {
  const match = /^[ \t\n\v\f\r]*([+-]?\d+)/.exec(text);
  if (!match) return undefined;
  const value = Number(match[1]);
  return Math.abs(value) <= 0x7fffffff ? value : undefined;
}

export interface HellaswagTask {
  /** Index of the task in the file (its first line is 6 × index + 1). */
  readonly index: number;
  /** activity label + ": " + context: the text the endings continue. */
  readonly context: string;
  /** Index (0 to 3) of the right ending. */
  readonly gold: number;
  readonly endings: readonly [string, string, string, string];
}

/**
 * A HellaSwag file as llama-perplexity --hellaswag reads it: 6 lines a task (the context, the gold
 * ending's index, four endings), split at '\n' only (a '\r' stays part of the line).
 */
export function parseHellaswagFile(text: string, source: string): HellaswagTask[] {
  const lines = promptText(text).split("\n");
  if (lines.at(-1) === "") lines.pop(); // std::getline does not return the empty piece after a final '\n'
  if (lines.length % 6 !== 0) throw new TaskFileError(`${source}: ${lines.length} lines, not a multiple of 6 (a HellaSwag task is 6 lines: context, gold ending index, 4 endings)`);
  if (lines.length === 0) throw new TaskFileError(`${source}: no HellaSwag tasks`);
  const tasks: HellaswagTask[] = [];
  for (let index = 0; index < lines.length / 6; index++) {
    const at = index * 6;
    const gold = leadingInteger(lines[at + 1]!);
    if (gold === undefined || gold < 0 || gold > 3) {
      throw new TaskFileError(`${source}:${at + 2}: the gold ending index of task ${index} is ${JSON.stringify(lines[at + 1])}, not 0, 1, 2 or 3`);
    }
    tasks.push({ index, context: lines[at]!, gold, endings: [lines[at + 2]!, lines[at + 3]!, lines[at + 4]!, lines[at + 5]!] });
  }
  return tasks;
}

export interface WinograndeTask {
  /** Index of the task among the file's tasks. */
  readonly index: number;
  /** Line of the file (from 1). */
  readonly line: number;
  /** The sentence before and after its '_'. */
  readonly first: string;
  readonly second: string;
  readonly choices: readonly [string, string];
  /** The right choice: 1 or 2. */
  readonly answer: 1 | 2;
}

/**
 * A WinoGrande CSV as llama-perplexity --winogrande reads it: `index,sentence,choice1,choice2,answer`
 * a line, the first four commas outside double quotes separating the fields; a sentence in quotes
 * loses them (nothing else is unquoted); the sentence is cut at its first '_'.
 *
 * llama.cpp's reader stops at a line that ends the file without a newline after it: as `-f` drops
 * the file's last newline, the last line is not read unless the file ends in a blank line. That is
 * kept, so that the same tasks are scored. A first line whose answer is not a number (a header) is
 * skipped, as llama.cpp skips it; other lines it would skip are errors here.
 */
export function parseWinograndeFile(text: string, source: string): WinograndeTask[] {
  const lines = promptText(text).split("\n");
  lines.pop(); // the line the end of the text cuts off (see above), or the empty piece after a final '\n'
  const tasks: WinograndeTask[] = [];
  lines.forEach((line, i) => {
    const commas: number[] = [];
    let quoted = false;
    for (let c = 0; c < line.length && commas.length < 4; c++) {
      if (quoted) quoted = line[c] !== '"';
      else if (line[c] === ",") commas.push(c);
      else if (line[c] === '"') quoted = true;
    }
    if (commas.length !== 4) throw new TaskFileError(`${source}:${i + 1}: ${commas.length} field separators, a WinoGrande line is index,sentence,choice1,choice2,answer`);
    const [c0, c1, c2, c3] = commas as [number, number, number, number];
    const sentence = line[c0 + 1] === '"' ? line.slice(c0 + 2, c1 - 1) : line.slice(c0 + 1, c1);
    const answer = leadingInteger(line.slice(c3 + 1));
    if (answer !== 1 && answer !== 2) {
      if (i === 0 && answer === undefined) return; // a header line
      throw new TaskFileError(`${source}:${i + 1}: the answer is ${JSON.stringify(line.slice(c3 + 1))}, not 1 or 2`);
    }
    const blank = sentence.indexOf("_");
    if (blank < 0) throw new TaskFileError(`${source}:${i + 1}: the sentence has no '_' for the choices to fill`);
    tasks.push({
      index: tasks.length,
      line: i + 1,
      first: sentence.slice(0, blank),
      second: sentence.slice(blank + 1),
      choices: [line.slice(c1 + 1, c2), line.slice(c2 + 1, c3)],
      answer,
    });
  });
  if (tasks.length === 0) throw new TaskFileError(`${source}: no WinoGrande tasks`);
  return tasks;
}

export interface MultipleChoiceTask {
  /** Index of the task in the file. */
  readonly index: number;
  /** Byte offset of the task in the file. */
  readonly offset: number;
  /** The question (or the context the answers continue). */
  readonly question: string;
  /** The answers of the single-correct-answer set (mc1) and their labels (1: right). */
  readonly answers: readonly string[];
  readonly labels: readonly number[];
}

/** The most answers a set may have: llama.cpp's limit. */
export const MAX_MULTIPLE_CHOICE_ANSWERS = 100;

/**
 * Reads `count` tasks (0: all) of a binary multiple-choice file as llama-perplexity
 * --multiple-choice does: a u32 task count n, n u32 byte offsets of the tasks, then the tasks, each
 * a string (u32 length, UTF-8 bytes) for the question and two answer sets (mc1: one right answer,
 * scored; mc2: read and not used), each a u32 answer count (at most 100), the answers as strings
 * and one i32 label per answer, little-endian. All tasks are read one after the other from the end
 * of the offsets; `count` of them (0: all), fewer than there are, are picked at random as llama.cpp
 * picks them (sampledTaskOrder) and read at their offsets, in the order they are picked.
 */
export function parseMultipleChoiceFile(bytes: Uint8Array, source: string, count = 0): { tasks: MultipleChoiceTask[]; available: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  if (bytes.length < 4) throw new TaskFileError(`${source}: ${bytes.length} bytes, too short for the u32 task count`);
  const available = view.getUint32(0, true);
  if (available === 0) throw new TaskFileError(`${source}: the task count at byte 0 is 0`);
  if (4 + 4 * available > bytes.length) throw new TaskFileError(`${source}: ${available} tasks need ${4 * available} bytes of task offsets from byte 4, the file has ${bytes.length} bytes`);
  const offsets = Array.from({ length: available }, (_, i) => view.getUint32(4 + 4 * i, true));

  const readTask = (index: number, start: number): { task: MultipleChoiceTask; end: number } => {
    let at = start;
    const fail = (what: string): never => {
      throw new TaskFileError(`${source}: task ${index} (from byte ${start}): ${what} at byte ${at}`);
    };
    const u32 = (what: string): number => {
      if (at + 4 > bytes.length) fail(`the file ends in ${what}`);
      const value = view.getUint32(at, true);
      at += 4;
      return value;
    };
    const string = (what: string): string => {
      const length = u32(`the length of ${what}`);
      if (at + length > bytes.length) fail(`${what} of ${length} bytes runs past the end of the file`);
      const text = decoder.decode(bytes.subarray(at, at + length));
      at += length;
      return text;
    };
    const answerSet = (name: string): { answers: string[]; labels: number[] } => {
      const countAt = at;
      const count = u32(`the ${name} answer count`);
      if (count > MAX_MULTIPLE_CHOICE_ANSWERS) {
        at = countAt;
        fail(`${count} ${name} answers, more than ${MAX_MULTIPLE_CHOICE_ANSWERS},`);
      }
      const answers = Array.from({ length: count }, (_, i) => string(`${name} answer ${i}`));
      if (at + 4 * count > bytes.length) fail(`the file ends in the ${count} ${name} labels`);
      const labels = Array.from({ length: count }, (_, i) => view.getInt32(at + 4 * i, true));
      at += 4 * count;
      return { answers, labels };
    };
    const question = string("the question");
    const mc1 = answerSet("mc1");
    answerSet("mc2");
    if (question === "" || mc1.answers.length === 0) {
      throw new TaskFileError(`${source}: task ${index} (from byte ${start}) has ${question === "" ? "an empty question" : "no mc1 answers"}`);
    }
    const empty = mc1.answers.indexOf("");
    if (empty >= 0) throw new TaskFileError(`${source}: task ${index} (from byte ${start}): mc1 answer ${empty} is empty`);
    return { task: { index, offset: start, question, answers: mc1.answers, labels: mc1.labels }, end: at };
  };

  if (count === 0 || count >= available) {
    // all of them, read in sequence (llama.cpp does not use the offsets then)
    const tasks: MultipleChoiceTask[] = [];
    let at = 4 + 4 * available;
    for (let index = 0; index < available; index++) {
      const { task, end } = readTask(index, at);
      tasks.push(task);
      at = end;
    }
    return { tasks, available };
  }
  const tasks = sampledTaskOrder(available, count).map((index) => {
    const offset = offsets[index]!;
    if (offset >= bytes.length) throw new TaskFileError(`${source}: the offset of task ${index} (byte ${4 + 4 * index}) is ${offset}, past the end of the file (${bytes.length} bytes)`);
    return readTask(index, offset).task;
  });
  return { tasks, available };
}
