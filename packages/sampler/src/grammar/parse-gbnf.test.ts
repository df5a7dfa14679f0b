import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GrammarError, GrammarSyntaxError } from "./grammar-error";
import { MAX_REPETITION, parseGbnf } from "./parse-gbnf";
import { grammarMatches } from "./__fixtures__/grammar-matches";

const fixtures = join(import.meta.dirname, "__fixtures__");

const matches = grammarMatches;

function syntaxError(gbnf: string): GrammarSyntaxError {
  try {
    parseGbnf(gbnf);
  } catch (error) {
    if (error instanceof GrammarSyntaxError) return error;
    throw error;
  }
  throw new Error("expected a GrammarSyntaxError");
}

describe("parseGbnf", () => {
  it("parses every example grammar of llama.cpp", () => {
    const names = readdirSync(fixtures).filter((name) => name.endsWith(".gbnf"));
    expect(names.length).toBeGreaterThanOrEqual(8);
    for (const name of names) {
      const grammar = parseGbnf(readFileSync(join(fixtures, name), "utf8"));
      expect(grammar.ruleNames[grammar.root], name).toBe("root");
    }
  });

  it("matches what the example grammars describe, and nothing else", () => {
    const read = (name: string) => readFileSync(join(fixtures, name), "utf8");
    expect(matches(read("chess.gbnf"), "1. e4 e5\n2. Nf3 Nc6\n3. O-O-O Qxd8#\n")).toBe(true);
    expect(matches(read("chess.gbnf"), "1. e4 e5\n")).toBe(false); // needs a second move line
    expect(matches(read("chess.gbnf"), "1. e9 e5\n2. a3 a6\n")).toBe(false);
    expect(matches(read("json.gbnf"), '{"a": [1, -2, {"b": "x\\u00e9y"}], "c": true}')).toBe(true);
    expect(matches(read("json.gbnf"), '{"a": 1,}')).toBe(false);
    expect(matches(read("arithmetic.gbnf"), "x1+(y*3) = 4\n")).toBe(true);
    expect(matches(read("japanese.gbnf"), "こんにちは 世界")).toBe(true);
    expect(matches(read("japanese.gbnf"), "hello")).toBe(false);
    expect(matches(read("list.gbnf"), "- one\n- two\n")).toBe(true);
    expect(matches(read("c.gbnf"), "int main(){x = 1;return x;}")).toBe(true);
    expect(matches(read("english.gbnf"), "Hello, world!")).toBe(true);
  });

  it("expands repetitions with llama.cpp's meaning", () => {
    const grammar = 'root ::= "ab"{2,3} [0-9]{0,2} "x"? "y"* "z"+';
    expect(matches(grammar, "ababz")).toBe(true);
    expect(matches(grammar, "ababab12xyyzz")).toBe(true);
    expect(matches(grammar, "abz")).toBe(false);
    expect(matches(grammar, "abababababz")).toBe(false);
    expect(matches(grammar, "abab123z")).toBe(false);
    expect(matches('root ::= [a-c]{3}', "abc")).toBe(true);
    expect(matches('root ::= [a-c]{3,}', "abcabc")).toBe(true);
    expect(matches('root ::= [a-c]{3,}', "ab")).toBe(false);
  });

  it("decodes escapes, negated classes and any-character", () => {
    expect(matches('root ::= "\\x41\\u00e9\\U0001F600\\t\\"\\\\"', 'Aé😀\t"\\')).toBe(true);
    expect(matches("root ::= [^a-z]+", "ABC")).toBe(true);
    expect(matches("root ::= [^a-z]+", "AbC")).toBe(false);
    expect(matches("root ::= . .", "é😀")).toBe(true);
    expect(matches("root ::= [-+*/]", "-")).toBe(true);
  });

  it("continues a rule after | at the end of a line and inside parentheses, not elsewhere", () => {
    expect(matches('root ::= "a" |\n  "b"', "b")).toBe(true);
    expect(matches('root ::= (\n  "a"\n  "b"\n)', "ab")).toBe(true);
    expect(syntaxError('root ::= "a"\n  "b"\n').message).toMatch(/expecting a rule name.* at 2:3/);
  });

  it("reports syntax errors with line and column", () => {
    expect(syntaxError('root ::= "abc').message).toBe('unterminated literal (missing closing ") at 1:10');
    expect(syntaxError('root ::= foo\n').message).toBe('undefined rule "foo" at 1:10');
    expect(syntaxError('root ::= "a"\nroot ::= "b"').message).toMatch(/rule "root" is defined twice \(first at 1:1\) at 2:1/);
    expect(syntaxError('item ::= "a"').message).toMatch(/the grammar has no "root" rule/);
    expect(syntaxError('root ::= [a-').message).toMatch(/unterminated character class.* at 1:10/);
    expect(syntaxError('root ::= "a" (\n"b"').message).toMatch(/expecting "\)" to close the group opened at 1:14/);
    expect(syntaxError('root ::= "\\q"').message).toBe('unknown escape "\\q" at 1:11');
    expect(syntaxError('root ::= "\\x4"').message).toMatch(/expecting 2 hex digits/);
    expect(syntaxError('root ::= * "a"').message).toMatch(/"\*" has nothing before it to repeat at 1:10/);
    expect(syntaxError('root = "a"').message).toMatch(/expecting "::=" after rule name "root"/);
    expect(syntaxError('root ::= "a"{3,2}').message).toMatch(/maximum below its minimum/);
    expect(syntaxError('root ::= [z-a]').message).toMatch(/reversed/);
    expect(syntaxError("root ::= <think>").message).toMatch(/token references/);
    const error = syntaxError('a ::= "x"\n\nroot ::= a b');
    expect([error.line, error.column]).toEqual([3, 12]);
  });

  it("refuses repetitions that would allocate without bound", () => {
    expect(syntaxError(`root ::= "a"{${MAX_REPETITION + 1}}`).message).toMatch(/above the limit/);
    expect(syntaxError('root ::= ("abcdefghij"{100000}){100000}').message).toMatch(/expands to more than/);
  });

  it("rejects left recursion, direct, indirect and through nullable rules", () => {
    expect(() => parseGbnf('root ::= root "a" | "b"')).toThrow(/left recursion: root -> root/);
    expect(() => parseGbnf('root ::= a\na ::= b "x"\nb ::= root | "y"')).toThrow(/left recursion: root -> a -> b -> root/);
    expect(() => parseGbnf('root ::= ws root "a" | "b"\nws ::= " "*')).toThrow(GrammarError);
    expect(() => parseGbnf('root ::= ("a"?)*')).toThrow(/left recursion/);
    // Right recursion and recursion after a character are fine.
    expect(matches('root ::= "(" root ")" | ""', "((()))")).toBe(true);
  });

  it("uses another start rule when asked", () => {
    const grammar = parseGbnf('start ::= "x"', { root: "start" });
    expect(grammar.ruleNames[grammar.root]).toBe("start");
  });
});
