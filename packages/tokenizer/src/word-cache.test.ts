import { describe, expect, it } from "vitest";
import { WordCache } from "./word-cache";

const codepoints = (text: string): Uint32Array => Uint32Array.from(Array.from(text, (c) => c.codePointAt(0) ?? 0));

function lookup(cache: WordCache, text: string): number[] | undefined {
  const word = codepoints(text);
  const out: number[] = [];
  return cache.appendTokens(word, 0, word.length, WordCache.hash(word, 0, word.length), out) ? out : undefined;
}

function store(cache: WordCache, text: string, tokens: number[]): void {
  const word = codepoints(text);
  cache.set(word, 0, word.length, WordCache.hash(word, 0, word.length), tokens);
}

describe("WordCache", () => {
  it("returns the tokens stored for a word, by its code points", () => {
    const cache = new WordCache();
    store(cache, "hello", [1, 2]);
    store(cache, " world", [3]);
    expect(lookup(cache, "hello")).toEqual([1, 2]);
    expect(lookup(cache, " world")).toEqual([3]);
    expect(lookup(cache, "hell")).toBeUndefined();
    expect(cache.size).toBe(2);
  });

  it("looks up a word inside a longer code point array", () => {
    const cache = new WordCache();
    store(cache, "lo", [7]);
    const text = codepoints("hello");
    const out = [0];
    expect(cache.appendTokens(text, 3, 5, WordCache.hash(text, 3, 5), out)).toBe(true);
    expect(out).toEqual([0, 7]);
  });

  it("keeps every word through growth, tells apart words with equal hashes, and empties itself when full", () => {
    const cache = new WordCache(5000);
    for (let i = 0; i < 4000; i++) store(cache, `w${i}`, [i, i + 1]);
    for (let i = 0; i < 4000; i++) expect(lookup(cache, `w${i}`)).toEqual([i, i + 1]);
    // Same hash, different words: stored under a forged hash, each still finds only itself.
    const a = codepoints("a");
    const b = codepoints("b");
    const collide = new WordCache();
    collide.set(a, 0, 1, 42, [1]);
    collide.set(b, 0, 1, 42, [2]);
    const out: number[] = [];
    collide.appendTokens(b, 0, 1, 42, out);
    collide.appendTokens(a, 0, 1, 42, out);
    expect(out).toEqual([2, 1]);
    for (let i = 4000; i < 5001; i++) store(cache, `w${i}`, [i]);
    expect(cache.size).toBe(1);
    expect(lookup(cache, "w0")).toBeUndefined();
    expect(lookup(cache, "w5000")).toEqual([5000]);
  });
});
