/**
 * llama.cpp's `n_indent` rule for code completion: every line after the first must start with at
 * least `minIndent` spaces or tabs. Text is pushed as it is released; the first character of a
 * line that breaks the rule (anything but a space or tab, a newline included, as in llama.cpp)
 * ends the output, which keeps the line's newline and indentation but nothing after.
 */
export class IndentLimit {
  /** Whether the last character released was a newline or a line's indentation. */
  private atLineStart = false;
  private indent = 0;
  private ended = false;

  constructor(private readonly minIndent: number) {}

  /** The part of `text` that stays, and whether the rule ended the output within it. */
  push(text: string): { readonly text: string; readonly stopped: boolean } {
    if (this.ended) return { text: "", stopped: true };
    for (let i = 0; i < text.length; i++) {
      const c = text[i]!;
      if (this.atLineStart) {
        if (c === " " || c === "\t") {
          this.indent++;
          continue;
        }
        if (this.indent < this.minIndent) {
          this.ended = true;
          return { text: text.slice(0, i), stopped: true };
        }
        this.atLineStart = false;
      }
      if (c === "\n") {
        this.atLineStart = true;
        this.indent = 0;
      }
    }
    return { text, stopped: false };
  }
}
