import { createHash } from "node:crypto";
import { QWEN3_VOCAB_SIZE, loadQwen3Vocabulary } from "@memra/synthetic";
import type { TokenizerVocabulary } from "../tokenizer-vocabulary";

/** Qwen3's config.json `vocab_size`: the converter pads the vocabulary to it with UNUSED tokens. */
export const QWEN3_VOCABULARY_SIZE = QWEN3_VOCAB_SIZE;

let cached: TokenizerVocabulary | undefined;

/**
 * The vocabulary llama.cpp's convert_hf_to_gguf.py writes for Qwen3, as the synthetic model
 * generator lays it out (the same data its GGUF files carry).
 */
export function qwen3Vocabulary(): TokenizerVocabulary {
  if (cached) return cached;
  const vocabulary = loadQwen3Vocabulary();
  cached = {
    model: "gpt2",
    tokens: vocabulary.tokens,
    tokenTypes: vocabulary.tokenTypes,
    merges: vocabulary.merges,
    preTokenizer: "qwen2",
    bosTokenId: vocabulary.bosTokenId,
    eosTokenId: vocabulary.eosTokenId,
    paddingTokenId: vocabulary.paddingTokenId,
    addBos: false,
    chatTemplate: vocabulary.chatTemplate,
  };
  return cached;
}

/** A hash of the tokens, types and merges, to check that two builds of the vocabulary agree. */
export function vocabularyFingerprint(vocabulary: TokenizerVocabulary): string {
  const hash = createHash("sha256");
  hash.update(vocabulary.tokens.join("\n"));
  hash.update("\u0000");
  hash.update(Array.from(vocabulary.tokenTypes ?? []).join(","));
  hash.update("\u0000");
  hash.update(vocabulary.merges.join("\n"));
  return hash.digest("hex");
}
