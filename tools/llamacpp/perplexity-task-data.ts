#!/usr/bin/env bun
/**
 * Small data files for llama-perplexity's --hellaswag, --winogrande and --multiple-choice, made of
 * sentences cut from README.md (so that they tokenize as text does), from a seeded generator: the
 * same README gives the same files. Used by perplexity-task-goldens.ts.
 *
 *   bun tools/llamacpp/perplexity-task-data.ts [OUTPUT_DIR]   (from the repository root)
 *
 * Writes hellaswag.txt (48 tasks of 6 lines), winogrande.csv (a header and 121 lines: llama.cpp
 * does not read the last one) and multiple-choice.bin (40 tasks of 2 to 4 answers) into OUTPUT_DIR
 * (default packages/core/src/__fixtures__/perplexity-tasks). A few tasks on purpose hit the rules'
 * corners: identical endings (an exact tie), quoted WinoGrande sentences with commas, blanks near the
 * end of a sentence (the choice itself is scored), answers that share their first words.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { mulberry32 } from "../../packages/synthetic/src/index";

const ROOT = join(import.meta.dir, "..", "..");
const OUTPUT = process.argv[2] ?? join(ROOT, "packages/core/src/__fixtures__/perplexity-tasks");

const random = mulberry32(20240607);
const below = (n: number) => Math.floor(random() * n);
const pick = <T>(items: readonly T[]): T => items[below(items.length)]!;

// Prose sentences of README.md: no code, tables, headings or links; plain ASCII words.
const readme = readFileSync(join(ROOT, "README.md"), "utf8")
  .replace(/```[\s\S]*?```/g, " ")
  .split("\n")
  .filter((line) => !/^\s*(#|\||<|!|-{3})/.test(line))
  .join(" ")
  .replace(/`[^`]*`/g, " ")
  .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
  .replace(/[*_]/g, "");
const sentences = readme
  .split(/(?<=[.!?])\s+/)
  .map((s) => s.replace(/\s+/g, " ").trim())
  .filter((s) => /^[A-Z][^"_\x00-\x1f\x7f-\uffff]+[.]$/.test(s))
  .map((s) => s.split(" "))
  .filter((words) => words.length >= 8 && words.length <= 40);
if (sentences.length < 40) throw new Error(`only ${sentences.length} usable sentences in README.md`);
const words = [...new Set(sentences.flat().map((w) => w.replace(/[^A-Za-z]/g, "")).filter((w) => w.length >= 4))];

const phrase = (min: number, max: number): string => {
  const sentence = pick(sentences);
  const length = Math.min(sentence.length, min + below(max - min + 1));
  const start = below(sentence.length - length + 1);
  return sentence.slice(start, start + length).join(" ");
};

// HellaSwag: context, gold index, four endings.
const hellaswag: string[] = [];
for (let task = 0; task < 48; task++) {
  const sentence = pick(sentences);
  const cut = 4 + below(sentence.length - 6);
  const label = pick(["Software", "Reading a manual", "Models", "Running a server", "Quantization"]);
  const endings = [sentence.slice(cut).join(" "), phrase(3, 9), phrase(3, 9), phrase(3, 9)];
  if (task === 7) endings[3] = endings[1]!; // two identical endings: an exact tie, the first wins
  const gold = below(4);
  [endings[0], endings[gold]] = [endings[gold]!, endings[0]!];
  hellaswag.push(`${label}: ${sentence.slice(0, cut).join(" ")}`, String(gold), ...endings);
}

// WinoGrande: index,sentence,choice1,choice2,answer; one word of a sentence becomes '_'.
const winogrande = ["index,sentence,option1,option2,answer"];
for (let task = 0; task < 121; task++) {
  const sentence = [...pick(sentences)];
  const candidates = sentence.map((w, i) => (/^[A-Za-z]{4,}$/.test(w) ? i : -1)).filter((i) => i >= 1);
  // now and then a blank near the end, so that few tokens follow the choice
  const at = task % 9 === 4 ? candidates.at(-1)! : pick(candidates);
  const right = sentence[at]!;
  let wrong = pick(words);
  while (wrong === right) wrong = pick(words);
  sentence[at] = "_";
  let text = sentence.join(" ");
  if (text.includes(",")) text = `"${text}"`; // quoted, as a CSV writer quotes a field with commas
  const answer = 1 + below(2);
  const choices = answer === 1 ? [right, wrong] : [wrong, right];
  winogrande.push(`${task},${text},${choices[0]},${choices[1]},${answer}`);
}

// Multiple choice: llama.cpp's binary format, little-endian.
const encoder = new TextEncoder();
const u32 = (value: number) => {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value, true);
  return bytes;
};
const str = (text: string) => {
  const bytes = encoder.encode(text);
  return [u32(bytes.length), bytes];
};
const answerSet = (answers: string[], right: number) => [u32(answers.length), ...answers.flatMap(str), ...answers.map((_, i) => u32(i === right ? 1 : 0))];
const taskBytes: Uint8Array[] = [];
for (let task = 0; task < 40; task++) {
  const sentence = pick(sentences);
  const cut = 4 + below(sentence.length - 6);
  const count = 2 + below(3);
  const answers = [sentence.slice(cut).join(" "), ...Array.from({ length: count - 1 }, () => phrase(2, 8))];
  if (task % 5 === 2) answers[1] = `${answers[0]!.split(" ")[0]} ${phrase(2, 5)}`; // shares its first word with another answer
  const right = below(count);
  [answers[0], answers[right]] = [answers[right]!, answers[0]!];
  const mc2 = [phrase(2, 6), phrase(2, 6)];
  const parts = [...str(sentence.slice(0, cut).join(" ")), ...answerSet(answers, right), ...answerSet(mc2, below(2))];
  taskBytes.push(Buffer.concat(parts));
}
let offset = 4 + 4 * taskBytes.length;
const positions = taskBytes.map((bytes) => {
  const at = offset;
  offset += bytes.length;
  return u32(at);
});
const multipleChoice = Buffer.concat([u32(taskBytes.length), ...positions, ...taskBytes]);

mkdirSync(OUTPUT, { recursive: true });
writeFileSync(join(OUTPUT, "hellaswag.txt"), `${hellaswag.join("\n")}\n`);
writeFileSync(join(OUTPUT, "winogrande.csv"), `${winogrande.join("\n")}\n`);
writeFileSync(join(OUTPUT, "multiple-choice.bin"), multipleChoice);
console.log(`wrote ${OUTPUT}: hellaswag.txt (${hellaswag.length / 6} tasks), winogrande.csv (${winogrande.length - 1} lines), multiple-choice.bin (${taskBytes.length} tasks, ${multipleChoice.length} bytes)`);
