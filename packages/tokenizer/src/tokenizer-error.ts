/** A vocabulary or input the tokenizer cannot work with; the message names the field or value. */
export class TokenizerError extends Error {
  override readonly name = "TokenizerError";
}
