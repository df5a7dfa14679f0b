/**
 * GGUF metadata keys as llama.cpp names them (llama-arch.cpp, gguf-py constants.py). Per-architecture
 * keys are templates with `{arch}`; resolve them with `architectureKey`.
 */
export const GENERAL_KEYS = {
  architecture: "general.architecture",
  name: "general.name",
  alignment: "general.alignment",
  fileType: "general.file_type",
  quantizationVersion: "general.quantization_version",
} as const;

export const ARCHITECTURE_KEYS = {
  vocabSize: "{arch}.vocab_size",
  contextLength: "{arch}.context_length",
  embeddingLength: "{arch}.embedding_length",
  blockCount: "{arch}.block_count",
  feedForwardLength: "{arch}.feed_forward_length",
  expertFeedForwardLength: "{arch}.expert_feed_forward_length",
  expertCount: "{arch}.expert_count",
  expertUsedCount: "{arch}.expert_used_count",
  headCount: "{arch}.attention.head_count",
  headCountKv: "{arch}.attention.head_count_kv",
  keyLength: "{arch}.attention.key_length",
  valueLength: "{arch}.attention.value_length",
  layerNormRmsEpsilon: "{arch}.attention.layer_norm_rms_epsilon",
  ropeFreqBase: "{arch}.rope.freq_base",
  ropeDimensionCount: "{arch}.rope.dimension_count",
  ropeScalingType: "{arch}.rope.scaling.type",
  ropeScalingFactor: "{arch}.rope.scaling.factor",
  ropeScalingOriginalContextLength: "{arch}.rope.scaling.original_context_length",
  /** Embedding models: how token rows pool into one vector (llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank). */
  poolingType: "{arch}.pooling_type",
  /** Rerankers and classifiers: the labels of the classification head's outputs (Qwen3-Reranker: ["yes", "no"]). */
  classifierOutputLabels: "{arch}.classifier.output_labels",
} as const;

export const TOKENIZER_KEYS = {
  model: "tokenizer.ggml.model",
  pre: "tokenizer.ggml.pre",
  tokens: "tokenizer.ggml.tokens",
  tokenType: "tokenizer.ggml.token_type",
  scores: "tokenizer.ggml.scores",
  merges: "tokenizer.ggml.merges",
  bosTokenId: "tokenizer.ggml.bos_token_id",
  eosTokenId: "tokenizer.ggml.eos_token_id",
  eotTokenId: "tokenizer.ggml.eot_token_id",
  unknownTokenId: "tokenizer.ggml.unknown_token_id",
  paddingTokenId: "tokenizer.ggml.padding_token_id",
  addBosToken: "tokenizer.ggml.add_bos_token",
  addEosToken: "tokenizer.ggml.add_eos_token",
  chatTemplate: "tokenizer.chat_template",
  /** A reranker's prompt, with `{query}` and `{document}` (llama.cpp's converter writes Qwen3-Reranker's). */
  rerankChatTemplate: "tokenizer.chat_template.rerank",
} as const;

export type ArchitectureKeyTemplate = (typeof ARCHITECTURE_KEYS)[keyof typeof ARCHITECTURE_KEYS];

/** `architectureKey("{arch}.block_count", "qwen3")` → `"qwen3.block_count"`. */
export function architectureKey(template: ArchitectureKeyTemplate | string, architecture: string): string {
  return template.replace("{arch}", architecture);
}

/** `tokenizer.ggml.token_type` values (gguf-py `TokenType`, llama.cpp `llama_token_type`). */
export const TokenType = {
  UNDEFINED: 0,
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;
