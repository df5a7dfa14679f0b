import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadQwen3Vocabulary } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { qwen3TokenPieces } from "./__fixtures__/qwen3-token-pieces";
import { GrammarAutomaton, MAX_STACKS_PER_STATE } from "./grammar-automaton";
import { GrammarError } from "./grammar-error";
import { GrammarMatcher } from "./grammar-matcher";
import { parseGbnf } from "./parse-gbnf";

const fixtures = join(import.meta.dirname, "__fixtures__");
const encoder = new TextEncoder();

/** The allowed set checked token by token (each token's bytes walked alone): what the trie walk must equal. */
function bruteForce(matcher: GrammarMatcher): number[] {
  const allowed: number[] = [];
  for (let id = 0; id < matcher.trie.vocabularySize; id++) if (!matcher.trie.isEndOfGeneration(id) && matcher.accepts(id)) allowed.push(id);
  return allowed;
}

function sorted(tokens: Int32Array): number[] {
  return [...tokens].sort((a, b) => a - b);
}

describe("TokenTrie", () => {
  it("holds every Qwen3 token with text, once, and no control or unused token", () => {
    const { trie, pieces } = qwen3TokenPieces();
    const vocabulary = loadQwen3Vocabulary();
    expect(trie.vocabularySize).toBe(151936);
    const withText = pieces.filter((piece, id) => piece && piece.length > 0 && !trie.isEndOfGeneration(id)).length;
    expect(trie.tokenOrder.length).toBe(withText);
    expect(new Set(trie.tokenOrder).size).toBe(withText);
    expect(trie.tokenOrder).not.toContain(vocabulary.tokens.indexOf("<|im_start|>"));
    expect(trie.tokenOrder).not.toContain(151700); // [PAD151700], unused
    // Shared prefixes: far fewer nodes than bytes.
    const bytes = pieces.reduce((sum, piece) => sum + (piece?.length ?? 0), 0);
    expect(trie.nodeCount).toBeLessThan(bytes * 0.5);
  });
});

describe("GrammarMatcher over the Qwen3 vocabulary", () => {
  const { trie } = qwen3TokenPieces();
  const vocabulary = loadQwen3Vocabulary();
  const read = (name: string) => readFileSync(join(fixtures, name), "utf8");

  it("allows exactly the tokens that the grammar accepts one by one, in many states", () => {
    const cases: Array<[string, string]> = [
      [read("json.gbnf"), ""],
      [read("json.gbnf"), '{"ke'],
      [read("json.gbnf"), '{"key": [1, tr'],
      [read("json.gbnf"), '{"key": "caf\\u00'],
      [read("chess.gbnf"), "1. e4 "],
      [read("japanese.gbnf"), "こんに"],
      [read("english.gbnf"), "Hello, "],
      [read("arithmetic.gbnf"), "(x1 "],
    ];
    for (const [gbnf, prefix] of cases) {
      const matcher = GrammarMatcher.create(parseGbnf(gbnf), trie);
      matcher.acceptText(prefix);
      const allowed = matcher.allowedTokens();
      expect(sorted(allowed.tokens), JSON.stringify(prefix)).toEqual(bruteForce(matcher));
      expect(allowed.tokens.length, JSON.stringify(prefix)).toBeGreaterThan(0);
    }
  }, 60_000);

  it("handles a token that ends inside a UTF-8 character, and the token that finishes it", () => {
    const matcher = GrammarMatcher.create(parseGbnf(read("japanese.gbnf")), trie);
    const character = encoder.encode("鿿"); // U+9FFF: the last of the cjk class
    const partial = matcher.advanceBytes(character.subarray(0, 2))!;
    expect(partial.partialRemaining).toBe(1);
    expect(matcher.advanceBytes(character.subarray(2), partial)).toBeDefined();
    expect(matcher.advanceBytes(Uint8Array.of(0xbf), matcher.advanceBytes(Uint8Array.of(0xe9, 0xbf))!)).toBeDefined();
    expect(matcher.advanceBytes(Uint8Array.of(0xe9, 0xc0))).toBeUndefined(); // not a continuation byte
    expect(matcher.advanceBytes(encoder.encode("é"))).toBeUndefined(); // U+00E9 is in no class
    // A state in the middle of a character: the mask is still exact.
    matcher.acceptText("こ");
    const byteToken = trie.tokenOrder.find((id) => {
      const piece = trie.piece(id);
      return piece.length === 1 && piece[0] === 0xe3;
    })!;
    expect(matcher.accepts(byteToken)).toBe(true);
    matcher.accept(byteToken);
    expect(matcher.current.partialRemaining).toBe(2);
    expect(sorted(matcher.allowedTokens().tokens)).toEqual(bruteForce(matcher));
    expect(matcher.isAccepting).toBe(false);
  }, 30_000);

  it("allows end of generation only when the grammar is complete, and never a control token", () => {
    const matcher = GrammarMatcher.create(parseGbnf('root ::= "yes" | "yes!"'), trie);
    const eos = vocabulary.eosTokenId;
    expect(matcher.allowedTokens().endOfGeneration).toBe(false);
    expect(matcher.accepts(eos)).toBe(false);
    matcher.acceptText("yes");
    expect(matcher.isAccepting).toBe(true);
    expect(matcher.isFinished).toBe(false);
    expect(matcher.allowedTokens().endOfGeneration).toBe(true);
    expect(matcher.accepts(eos)).toBe(true);
    expect(matcher.accepts(vocabulary.tokens.indexOf("<|im_start|>"))).toBe(false);
    matcher.acceptText("!");
    expect(matcher.isFinished).toBe(true);
    expect(matcher.allowedTokens().tokens.length).toBe(0);
    matcher.accept(eos);
    expect(matcher.accepts(eos)).toBe(false);
    expect(() => matcher.accept(eos)).toThrow(GrammarError);
  });

  it("lets a token cross a grammar boundary (a closing quote and a comma in one token)", () => {
    const matcher = GrammarMatcher.create(parseGbnf('root ::= "\\"" [a-z]* "\\"" "," " " [0-9]'), trie);
    matcher.acceptText('"abc');
    const crossing = vocabulary.tokens.indexOf('",');
    expect(crossing).toBeGreaterThan(0);
    expect(matcher.accepts(crossing)).toBe(true);
    expect(sorted(matcher.allowedTokens().tokens)).toContain(crossing);
  });

  it("caches a mask per state: a state seen again costs nothing", () => {
    const matcher = GrammarMatcher.create(parseGbnf(read("json.gbnf")), trie);
    matcher.acceptText('{"a');
    const first = matcher.allowedTokens();
    matcher.acceptText("b");
    expect(matcher.allowedTokens()).toBe(first);
  });

  it("names a grammar too ambiguous to track instead of growing without bound", () => {
    const alternatives = Array.from({ length: MAX_STACKS_PER_STATE + 1 }, (_, i) => `"a" "${i}"`).join(" | ");
    expect(() => new GrammarAutomaton(parseGbnf(`root ::= ${alternatives}`))).toThrow(/too ambiguous/);
    // Just below the limit it works.
    const fewer = Array.from({ length: 100 }, (_, i) => `"a" "${i}"`).join(" | ");
    const automaton = new GrammarAutomaton(parseGbnf(`root ::= ${fewer}`));
    expect(automaton.stackCount(automaton.initialState)).toBe(100);
  });
});
