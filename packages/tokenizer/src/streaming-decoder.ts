/**
 * Turns tokens into text one at a time, holding back the bytes of a UTF-8 character that a token
 * splits until the token that completes it arrives. The concatenation of everything it returns
 * equals decoding all the tokens at once.
 */
export class StreamingDecoder {
  private readonly pieceOf: (id: number) => Uint8Array;
  private decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  /** @param pieceOf the bytes of one token (e.g. `(id) => tokenizer.tokenPiece(id)`). */
  constructor(pieceOf: (id: number) => Uint8Array) {
    this.pieceOf = pieceOf;
  }

  /** The text that becomes complete with this token (may be ""). */
  push(id: number): string {
    return this.decoder.decode(this.pieceOf(id), { stream: true });
  }

  /** The text that becomes complete with these tokens. */
  pushMany(ids: Iterable<number>): string {
    let text = "";
    for (const id of ids) text += this.push(id);
    return text;
  }

  /** Ends the stream: bytes of an unfinished character come out as U+FFFD. Resets the decoder. */
  flush(): string {
    const rest = this.decoder.decode();
    this.decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    return rest;
  }
}
