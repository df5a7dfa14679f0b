/** A GBNF text that does not parse; `line` and `column` (1-based) point at the offending character. */
export class GrammarSyntaxError extends Error {
  override readonly name = "GrammarSyntaxError";
  constructor(
    readonly line: number,
    readonly column: number,
    readonly reason: string,
  ) {
    super(`${reason} at ${line}:${column}`);
  }
}

/**
 * A grammar that parses but cannot be used: left recursion, a rule that is never defined, a parse
 * too ambiguous to track, no token able to continue it. `rule` names the rule concerned, when one is.
 */
export class GrammarError extends Error {
  override readonly name = "GrammarError";
  constructor(
    message: string,
    readonly rule?: string,
  ) {
    super(message);
  }
}

/** A JSON schema that cannot be turned into a grammar; `pointer` is the JSON pointer of the offending part ("" for the root). */
export class JsonSchemaError extends Error {
  override readonly name = "JsonSchemaError";
  constructor(
    readonly pointer: string,
    readonly reason: string,
  ) {
    super(`${reason} (at ${pointer === "" ? "the schema root" : pointer})`);
  }
}
