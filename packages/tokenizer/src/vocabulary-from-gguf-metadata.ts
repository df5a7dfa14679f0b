import { TokenizerError } from "./tokenizer-error";
import type { TokenizerVocabulary } from "./tokenizer-vocabulary";

/** Reads one metadata value by key (e.g. `(key) => ggufFile.get(key)`); undefined when absent. */
export type MetadataGetter = (key: string) => unknown;

function optionalNumber(get: MetadataGetter, key: string): number | undefined {
  const value = get(key);
  if (value === undefined || value === null) return undefined;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "number") return value;
  throw new TokenizerError(`${key}: expected an integer, found ${typeof value}`);
}

function optionalBoolean(get: MetadataGetter, key: string): boolean | undefined {
  const value = get(key);
  if (value === undefined || value === null) return undefined;
  if (typeof value === "boolean") return value;
  throw new TokenizerError(`${key}: expected a boolean, found ${typeof value}`);
}

function optionalString(get: MetadataGetter, key: string): string | undefined {
  const value = get(key);
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  throw new TokenizerError(`${key}: expected a string, found ${typeof value}`);
}

function stringArray(get: MetadataGetter, key: string, required: boolean): string[] | undefined {
  const value = get(key);
  if (value === undefined || value === null) {
    if (required) throw new TokenizerError(`${key}: missing`);
    return undefined;
  }
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) {
    throw new TokenizerError(`${key}: expected an array of strings`);
  }
  return value as string[];
}

function integerArray(get: MetadataGetter, key: string): ArrayLike<number> | undefined {
  const value = get(key);
  if (value === undefined || value === null) return undefined;
  if (ArrayBuffer.isView(value) && !(value instanceof DataView) && !(value instanceof BigInt64Array) && !(value instanceof BigUint64Array)) {
    return value as unknown as ArrayLike<number>;
  }
  if (Array.isArray(value) && value.every((item) => typeof item === "number")) return value as number[];
  throw new TokenizerError(`${key}: expected an array of integers`);
}

/**
 * The tokenizer vocabulary of a GGUF file, from its `tokenizer.ggml.*` and `tokenizer.chat_template`
 * metadata. Works with any reader: pass a getter returning plain values (strings, numbers or
 * bigints, booleans, arrays or typed arrays), e.g. `vocabularyFromGGUFMetadata((key) => file.get(key))`.
 */
export function vocabularyFromGGUFMetadata(get: MetadataGetter): TokenizerVocabulary {
  const model = optionalString(get, "tokenizer.ggml.model");
  if (model === undefined) throw new TokenizerError("tokenizer.ggml.model: missing");
  if (model !== "gpt2") {
    throw new TokenizerError(`tokenizer.ggml.model: unsupported tokenizer model "${model}" (only "gpt2" byte-level BPE)`);
  }
  const tokens = stringArray(get, "tokenizer.ggml.tokens", true) ?? [];
  const tokenTypes = integerArray(get, "tokenizer.ggml.token_type");
  if (tokenTypes && tokenTypes.length < tokens.length) {
    throw new TokenizerError(`tokenizer.ggml.token_type: ${tokenTypes.length} types for ${tokens.length} tokens`);
  }
  const merges = stringArray(get, "tokenizer.ggml.merges", true) ?? [];
  const vocabulary: TokenizerVocabulary = {
    model,
    tokens,
    merges,
    // llama.cpp: a missing pre-tokenizer means "default", which this package does not implement.
    preTokenizer: optionalString(get, "tokenizer.ggml.pre") ?? "default",
    ...(tokenTypes ? { tokenTypes } : {}),
    ...defined("bosTokenId", optionalNumber(get, "tokenizer.ggml.bos_token_id")),
    ...defined("eosTokenId", optionalNumber(get, "tokenizer.ggml.eos_token_id")),
    ...defined("eotTokenId", optionalNumber(get, "tokenizer.ggml.eot_token_id")),
    ...defined("eomTokenId", optionalNumber(get, "tokenizer.ggml.eom_token_id")),
    ...defined("unknownTokenId", optionalNumber(get, "tokenizer.ggml.unknown_token_id")),
    ...defined("separatorTokenId", optionalNumber(get, "tokenizer.ggml.seperator_token_id")),
    ...defined("paddingTokenId", optionalNumber(get, "tokenizer.ggml.padding_token_id")),
    // llama.cpp's keys; the older prefix/suffix/middle names are read where the fim_ ones are absent.
    ...defined("fimPrefixTokenId", optionalNumber(get, "tokenizer.ggml.fim_pre_token_id") ?? optionalNumber(get, "tokenizer.ggml.prefix_token_id")),
    ...defined("fimSuffixTokenId", optionalNumber(get, "tokenizer.ggml.fim_suf_token_id") ?? optionalNumber(get, "tokenizer.ggml.suffix_token_id")),
    ...defined("fimMiddleTokenId", optionalNumber(get, "tokenizer.ggml.fim_mid_token_id") ?? optionalNumber(get, "tokenizer.ggml.middle_token_id")),
    ...defined("fimPadTokenId", optionalNumber(get, "tokenizer.ggml.fim_pad_token_id")),
    ...defined("fimRepoTokenId", optionalNumber(get, "tokenizer.ggml.fim_rep_token_id")),
    ...defined("fimSeparatorTokenId", optionalNumber(get, "tokenizer.ggml.fim_sep_token_id")),
    ...defined("addBos", optionalBoolean(get, "tokenizer.ggml.add_bos_token")),
    ...defined("addEos", optionalBoolean(get, "tokenizer.ggml.add_eos_token")),
    ...defined("chatTemplate", optionalString(get, "tokenizer.chat_template")),
  };
  return vocabulary;
}

function defined<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
