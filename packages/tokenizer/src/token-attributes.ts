import { TokenType } from "@memra/gguf";
import type { TokenizerVocabulary } from "./tokenizer-vocabulary";

export { TokenType };

/** llama.cpp's `llama_token_attr` bits, which the tokenizer actually works with. */
export const TokenAttribute = {
  UNDEFINED: 0,
  UNKNOWN: 1 << 0,
  UNUSED: 1 << 1,
  NORMAL: 1 << 2,
  CONTROL: 1 << 3,
  USER_DEFINED: 1 << 4,
  BYTE: 1 << 5,
  NORMALIZED: 1 << 6,
  LSTRIP: 1 << 7,
  RSTRIP: 1 << 8,
  SINGLE_WORD: 1 << 9,
} as const;

const ATTRIBUTE_OF_TYPE: Record<number, number> = {
  [TokenType.NORMAL]: TokenAttribute.NORMAL,
  [TokenType.UNKNOWN]: TokenAttribute.UNKNOWN,
  [TokenType.CONTROL]: TokenAttribute.CONTROL,
  [TokenType.USER_DEFINED]: TokenAttribute.USER_DEFINED,
  [TokenType.UNUSED]: TokenAttribute.UNUSED,
  [TokenType.BYTE]: TokenAttribute.BYTE,
};

// Token texts llama.cpp recognises when the metadata does not name these ids (llama-vocab.cpp load()).
const EOT_TEXTS = [
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
  "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
];
const EOM_TEXTS = ["<|eom_id|>"];
const FIM_PREFIX_TEXTS = ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"];
const FIM_SUFFIX_TEXTS = ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"];
const FIM_MIDDLE_TEXTS = ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"];
const FIM_PAD_TEXTS = ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REPO_TEXTS = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEPARATOR_TEXTS = ["<|file_sep|>"];
const END_OF_GENERATION_TEXTS = [
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
  "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
  "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
];
// gpt-oss: llama.cpp always renders these.
const ALWAYS_RENDERED_TEXTS = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/** llama.cpp's defaults for a "gpt2" vocabulary when the metadata names no BOS/EOS. */
const GPT2_DEFAULT_BOS_EOS = 11;

export interface ResolvedTokenAttributes {
  /** One `TokenAttribute` bit set per token. */
  readonly attributes: Uint16Array;
  readonly bosTokenId: number | undefined;
  readonly eosTokenId: number | undefined;
  readonly eotTokenId: number | undefined;
  readonly eomTokenId: number | undefined;
  readonly unknownTokenId: number | undefined;
  readonly separatorTokenId: number | undefined;
  readonly paddingTokenId: number | undefined;
  readonly fimPrefixTokenId: number | undefined;
  readonly fimSuffixTokenId: number | undefined;
  readonly fimMiddleTokenId: number | undefined;
  readonly fimPadTokenId: number | undefined;
  readonly fimRepoTokenId: number | undefined;
  readonly fimSeparatorTokenId: number | undefined;
  /** Tokens that end generation (llama.cpp `special_eog_ids`). */
  readonly endOfGenerationTokenIds: ReadonlySet<number>;
}

/**
 * Token attributes and special token ids as llama.cpp derives them while loading a vocabulary:
 * token types become attribute bits, then tokens are found by their text where the metadata does not
 * name them (EOT, FIM), and such tokens are forced to CONTROL.
 *
 * llama.cpp finds EOT by iterating an unordered map, so when several candidate texts exist the one
 * it picks depends on hashing; here the first text in its list wins ("<|im_end|>" before
 * "<|endoftext|>"), which is what llama.cpp picks for the Qwen vocabulary.
 */
export function resolveTokenAttributes(vocabulary: TokenizerVocabulary): ResolvedTokenAttributes {
  const { tokens, tokenTypes } = vocabulary;
  const count = tokens.length;
  const attributes = new Uint16Array(count);
  for (let id = 0; id < count; id++) {
    attributes[id] = tokenTypes ? (ATTRIBUTE_OF_TYPE[tokenTypes[id] ?? 0] ?? TokenAttribute.UNDEFINED) : TokenAttribute.NORMAL;
  }

  const textToId = new Map<string, number>();
  for (let id = 0; id < count; id++) textToId.set(tokens[id] ?? "", id);

  const inRange = (id: number | undefined): number | undefined =>
    id !== undefined && Number.isInteger(id) && id >= 0 && id < count ? id : undefined;
  const fromMetadata = (id: number | undefined, fallback: number | undefined): number | undefined =>
    inRange(id) ?? inRange(fallback);
  const forceControl = (id: number): void => {
    attributes[id] = (attributes[id] ?? 0) | TokenAttribute.CONTROL;
  };
  const findByText = (id: number | undefined, texts: readonly string[]): number | undefined => {
    if (id !== undefined) return id;
    for (const text of texts) {
      const found = textToId.get(text);
      if (found !== undefined) {
        forceControl(found);
        return found;
      }
    }
    return undefined;
  };

  const bosTokenId = fromMetadata(vocabulary.bosTokenId, GPT2_DEFAULT_BOS_EOS);
  const eosTokenId = fromMetadata(vocabulary.eosTokenId, GPT2_DEFAULT_BOS_EOS);
  const eotTokenId = findByText(inRange(vocabulary.eotTokenId), EOT_TEXTS);
  const eomTokenId = findByText(inRange(vocabulary.eomTokenId), EOM_TEXTS);
  const fimPrefixTokenId = findByText(inRange(vocabulary.fimPrefixTokenId), FIM_PREFIX_TEXTS);
  const fimSuffixTokenId = findByText(inRange(vocabulary.fimSuffixTokenId), FIM_SUFFIX_TEXTS);
  const fimMiddleTokenId = findByText(inRange(vocabulary.fimMiddleTokenId), FIM_MIDDLE_TEXTS);
  const fimPadTokenId = findByText(inRange(vocabulary.fimPadTokenId), FIM_PAD_TEXTS);
  const fimRepoTokenId = findByText(inRange(vocabulary.fimRepoTokenId), FIM_REPO_TEXTS);
  const fimSeparatorTokenId = findByText(inRange(vocabulary.fimSeparatorTokenId), FIM_SEPARATOR_TEXTS);

  // Control tokens whose text says "unused" are unused.
  for (const [text, id] of textToId) {
    const attribute = attributes[id] ?? 0;
    if (attribute & TokenAttribute.CONTROL && text.includes("unused")) attributes[id] = attribute | TokenAttribute.UNUSED;
  }

  const endOfGeneration = new Set<number>();
  for (const id of [fimPadTokenId, fimRepoTokenId, fimSeparatorTokenId]) if (id !== undefined) endOfGeneration.add(id);
  for (const text of END_OF_GENERATION_TEXTS) {
    const id = textToId.get(text);
    if (id === undefined) continue;
    endOfGeneration.add(id);
    forceControl(id);
  }
  for (const text of ALWAYS_RENDERED_TEXTS) {
    const id = textToId.get(text);
    if (id !== undefined) attributes[id] = TokenAttribute.USER_DEFINED;
  }
  for (const id of [eosTokenId, eotTokenId, eomTokenId]) if (id !== undefined) endOfGeneration.add(id);

  // o200k_harmony / solar-open: "<|end|>" does not end generation when "<|return|>"+"<|call|>" exist.
  const eogText = (text: string): boolean => [...endOfGeneration].some((id) => tokens[id] === text);
  if ((eogText("<|return|>") && eogText("<|call|>")) || (eogText("<|calls|>") && eogText("<|flush|>"))) {
    for (const id of [...endOfGeneration]) {
      if (tokens[id] === "<|end|>") {
        endOfGeneration.delete(id);
        attributes[id] = TokenAttribute.USER_DEFINED;
      }
    }
  }
  // gemma4 / paddleocr: "</s>" does not end generation when "<|tool_response>" exists.
  if (eogText("<|tool_response>")) {
    for (const id of [...endOfGeneration]) {
      if (tokens[id] === "</s>") {
        endOfGeneration.delete(id);
        attributes[id] = TokenAttribute.NORMAL;
      }
    }
  }

  return {
    attributes,
    bosTokenId,
    eosTokenId,
    eotTokenId,
    eomTokenId,
    unknownTokenId: inRange(vocabulary.unknownTokenId),
    separatorTokenId: inRange(vocabulary.separatorTokenId),
    paddingTokenId: inRange(vocabulary.paddingTokenId),
    fimPrefixTokenId,
    fimSuffixTokenId,
    fimMiddleTokenId,
    fimPadTokenId,
    fimRepoTokenId,
    fimSeparatorTokenId,
    endOfGenerationTokenIds: endOfGeneration,
  };
}
