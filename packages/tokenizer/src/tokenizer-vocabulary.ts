/**
 * Everything the tokenizer needs, as plain data: what the `tokenizer.ggml.*` metadata of a GGUF
 * file holds, independent of how the file was read.
 */
export interface TokenizerVocabulary {
  /** `tokenizer.ggml.model`; only "gpt2" (byte-level BPE) is supported. Defaults to "gpt2". */
  readonly model?: string;
  /** `tokenizer.ggml.tokens`: token texts, byte-level encoded for normal tokens ("Ġthe"). */
  readonly tokens: readonly string[];
  /** `tokenizer.ggml.token_type`: one `TokenType` per token; all NORMAL when absent. */
  readonly tokenTypes?: ArrayLike<number>;
  /** `tokenizer.ggml.merges`: "left right" pairs, rank = index. */
  readonly merges: readonly string[];
  /** `tokenizer.ggml.pre`: the pre-tokenizer name, e.g. "qwen2". */
  readonly preTokenizer: string;
  readonly bosTokenId?: number;
  readonly eosTokenId?: number;
  readonly eotTokenId?: number;
  readonly eomTokenId?: number;
  readonly unknownTokenId?: number;
  readonly separatorTokenId?: number;
  readonly paddingTokenId?: number;
  /** `tokenizer.ggml.fim_*_token_id`: fill-in-the-middle tokens; found by their text when absent. */
  readonly fimPrefixTokenId?: number;
  readonly fimSuffixTokenId?: number;
  readonly fimMiddleTokenId?: number;
  readonly fimPadTokenId?: number;
  readonly fimRepoTokenId?: number;
  readonly fimSeparatorTokenId?: number;
  /** `tokenizer.ggml.add_bos_token`; when absent, the pre-tokenizer's default (llama3: true). */
  readonly addBos?: boolean;
  /** `tokenizer.ggml.add_eos_token`; false when absent. */
  readonly addEos?: boolean;
  /** `tokenizer.chat_template` (Jinja). */
  readonly chatTemplate?: string;
}
