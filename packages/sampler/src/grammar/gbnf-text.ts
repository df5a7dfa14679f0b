/** Pieces of GBNF text shared by the grammar writers (JSON schema, integer and number ranges, patterns). */

/** A GBNF literal for `text` (quotes, backslashes and control characters escaped). */
export function gbnfLiteral(text: string): string {
  let out = '"';
  for (const character of text) {
    const code = character.codePointAt(0)!;
    if (character === '"' || character === "\\") out += `\\${character}`;
    else if (character === "\n") out += "\\n";
    else if (character === "\r") out += "\\r";
    else if (character === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += character;
  }
  return `${out}"`;
}

/** A GBNF symbol for one digit from `low` to `high`. */
export function digitClass(low: number, high: number): string {
  return low === high ? `"${low}"` : `[${low}-${high}]`;
}

/** Symbols in sequence, empty ones left out. */
export function join(...parts: string[]): string {
  return parts.filter((part) => part !== "").join(" ");
}

/** One of the options, parenthesized when there are several; "" for none. */
export function alternatives(options: readonly string[]): string {
  if (options.length === 0) return "";
  return options.length === 1 ? options[0]! : `( ${options.join(" | ")} )`;
}
