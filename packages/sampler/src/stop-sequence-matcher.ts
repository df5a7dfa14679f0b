import { SamplerError } from "./sampler-error";

export interface StopSequenceStep {
  /** Text that can be emitted now: it cannot be part of a stop string. */
  text: string;
  /** True once a stop string has matched; `text` then ends right before it. */
  stopped: boolean;
  /** The stop string that matched. */
  stop?: string;
}

/**
 * Finds stop strings in streamed text. `push` returns the text that is safe to emit: it holds back
 * the longest end of the text that could still be the start of a stop string, so a stop string
 * split over any number of pushes is found and no part of it is ever emitted. When several stop
 * strings match, the one completed first wins (the one that ends first in the text, so the result
 * does not depend on how the text is cut into pushes; among those ending together the longest,
 * then the first listed), as generation stops at the first stop string it produces. After a stop,
 * pushes return no text.
 */
export class StopSequenceMatcher {
  private readonly stops: readonly string[];
  private readonly longest: number;
  private held = "";
  private stopString: string | undefined;

  constructor(stops: readonly string[]) {
    if (stops.some((stop) => stop.length === 0)) throw new SamplerError("stop strings must not be empty");
    this.stops = [...stops];
    this.longest = this.stops.reduce((longest, stop) => Math.max(longest, stop.length), 0);
  }

  get stopped(): boolean {
    return this.stopString !== undefined;
  }

  push(textDelta: string): StopSequenceStep {
    if (this.stopString !== undefined) return { text: "", stopped: true, stop: this.stopString };
    if (this.stops.length === 0) return { text: textDelta, stopped: false };
    const text = this.held + textDelta;
    // A match can only start in the held-back part or later: anything before it was emitted because
    // no stop string could start there. The stop string that is complete first (ends first) wins,
    // as if the text had come one character at a time; then the longer; then the first listed.
    let matchAt = -1;
    let matchEnd = Infinity;
    let matched: string | undefined;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at < 0) continue;
      const end = at + stop.length;
      if (end < matchEnd || (end === matchEnd && at < matchAt)) {
        matchAt = at;
        matchEnd = end;
        matched = stop;
      }
    }
    if (matched !== undefined) {
      this.held = "";
      this.stopString = matched;
      return { text: text.slice(0, matchAt), stopped: true, stop: matched };
    }
    const hold = this.partialStopLength(text);
    this.held = text.slice(text.length - hold);
    return { text: text.slice(0, text.length - hold), stopped: false };
  }

  /** The text still held back (called at the end of generation); empty after a stop. */
  flush(): string {
    const text = this.held;
    this.held = "";
    return text;
  }

  /** Length of the longest end of `text` that is a proper start of some stop string. */
  private partialStopLength(text: string): number {
    for (let length = Math.min(this.longest - 1, text.length); length > 0; length--) {
      const start = text.length - length;
      for (const stop of this.stops) if (stop.length > length && text.startsWith(stop.slice(0, length), start)) return length;
    }
    return 0;
  }
}
