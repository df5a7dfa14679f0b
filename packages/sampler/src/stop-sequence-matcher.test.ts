import { describe, expect, it } from "vitest";
import { testRandom } from "./__fixtures__/candidates-from";
import { StopSequenceMatcher } from "./stop-sequence-matcher";

/** Pushes every piece; returns what was emitted (pieces and flush), and the stop. */
function stream(stops: string[], pieces: string[]): { emitted: string[]; stop?: string } {
  const matcher = new StopSequenceMatcher(stops);
  const emitted: string[] = [];
  for (const piece of pieces) {
    const step = matcher.push(piece);
    emitted.push(step.text);
    if (step.stopped) return { emitted, stop: step.stop! };
  }
  emitted.push(matcher.flush());
  return { emitted };
}

describe("StopSequenceMatcher", () => {
  it("holds back a possible start of a stop string and stops across a token boundary", () => {
    const matcher = new StopSequenceMatcher(["</s>"]);
    expect(matcher.push("Hello <")).toEqual({ text: "Hello ", stopped: false });
    expect(matcher.push("/")).toEqual({ text: "", stopped: false });
    expect(matcher.push("s> more")).toEqual({ text: "", stopped: true, stop: "</s>" });
    expect(matcher.push("after")).toEqual({ text: "", stopped: true, stop: "</s>" });
    expect(matcher.flush()).toBe("");
  });

  it("releases held text once it can no longer start the stop string", () => {
    const matcher = new StopSequenceMatcher(["</s>"]);
    expect(matcher.push("a <")).toEqual({ text: "a ", stopped: false });
    expect(matcher.push("b")).toEqual({ text: "<b", stopped: false });
    expect(matcher.push("</")).toEqual({ text: "", stopped: false });
    expect(matcher.flush()).toBe("</"); // the end of generation: held text is final
  });

  it("handles stop strings that share a prefix", () => {
    // "ab" could start "abc" or "abd": held; "d" completes "abd".
    const matcher = new StopSequenceMatcher(["abc", "abd"]);
    expect(matcher.push("xab")).toEqual({ text: "x", stopped: false });
    expect(matcher.push("d!")).toEqual({ text: "", stopped: true, stop: "abd" });
    // "ab" then "x": neither; everything released.
    expect(stream(["abc", "abd"], ["ab", "x"]).emitted.join("")).toBe("abx");
  });

  it("finds a stop string inside a repeated prefix (aababc with stop abc)", () => {
    const { emitted, stop } = stream(["abc"], [..."aababc"]);
    expect(emitted.join("")).toBe("aab");
    expect(stop).toBe("abc");
  });

  it("stops at the stop string completed first, however the text is cut", () => {
    expect(stream(["world", "o w"], ["hello world"])).toEqual({ emitted: ["hell"], stop: "o w" });
    // "b" is complete before "abc" is: the same stop whether "bc" comes in one piece or two.
    expect(stream(["abc", "b"], ["xa", "bc"])).toEqual({ emitted: ["x", "a"], stop: "b" });
    expect(stream(["abc", "b"], ["xa", "b", "c"])).toEqual({ emitted: ["x", "a"], stop: "b" });
    // Ending together: the longer ("xab" starts first), then the first listed.
    expect(stream(["ab", "xab"], ["xab"])).toEqual({ emitted: [""], stop: "xab" });
    expect(stream(["ab", "ab"], ["xab"])).toEqual({ emitted: ["x"], stop: "ab" });
  });

  it("passes text through without stop strings and refuses an empty one", () => {
    expect(stream([], ["a", "b"]).emitted).toEqual(["a", "b", ""]);
    expect(() => new StopSequenceMatcher(["ok", ""])).toThrow(/must not be empty/);
  });

  it("works with non-Latin text", () => {
    expect(stream(["。\n"], ["你好", "。", "\n再见"])).toEqual({ emitted: ["你好", "", ""], stop: "。\n" });
  });

  it("never emits a partial stop string: random texts cut at random places", () => {
    const random = testRandom(5);
    const stops = ["aab", "ba", "abab"];
    for (let trial = 0; trial < 500; trial++) {
      const text = Array.from({ length: Math.floor(random() * 12) }, () => (random() < 0.5 ? "a" : "b")).join("");
      // Expected: the text before the stop string that ends first (on a tie, the one starting first).
      let at = -1;
      let end = Infinity;
      let expectedStop: string | undefined;
      for (const stop of stops) {
        const found = text.indexOf(stop);
        if (found >= 0 && (found + stop.length < end || (found + stop.length === end && found < at))) [at, end, expectedStop] = [found, found + stop.length, stop];
      }
      const expected = at < 0 ? text : text.slice(0, at);
      const pieces: string[] = [];
      for (let i = 0; i < text.length; ) {
        const size = 1 + Math.floor(random() * 3);
        pieces.push(text.slice(i, i + size));
        i += size;
      }
      const { emitted, stop } = stream(stops, pieces);
      let sofar = "";
      for (const piece of emitted) {
        sofar += piece;
        expect(expected.startsWith(sofar)).toBe(true); // nothing beyond the stop's start, ever
      }
      expect(sofar).toBe(expected);
      expect(stop).toBe(expectedStop);
    }
  });
});
