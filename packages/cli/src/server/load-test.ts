/**
 * A bounded load test of an OpenAI-compatible server: `clients` concurrent streaming clients for
 * `durationMs`, each sending chat requests of mixed prompt and completion lengths back to back,
 * a fraction of them cancelled mid-stream. Checks that every request that was not cancelled
 * completed (a finish reason and `[DONE]`), and reports throughput and latency percentiles.
 */

export interface LoadTestOptions {
  /** The server's base URL (http://host:port). */
  readonly url: string;
  readonly clients: number;
  readonly durationMs: number;
  /** Fraction of requests cancelled after a few chunks. Default 0.1. */
  readonly cancelFraction?: number;
  /** Seed of the request mix. */
  readonly seed?: number;
  /** Completion lengths to pick from. Default [8, 32, 96]. */
  readonly maxTokens?: readonly number[];
  /** Prompt lengths in words to pick from. Default [4, 40, 200]. */
  readonly promptWords?: readonly number[];
}

export interface LoadTestReport {
  readonly requests: number;
  readonly completed: number;
  readonly cancelled: number;
  /** Requests that failed: an HTTP error, a broken stream, or a stream that ended without finishing. */
  readonly errors: number;
  readonly errorMessages: readonly string[];
  readonly completionTokens: number;
  readonly elapsedMs: number;
  readonly tokensPerSecond: number;
  /** Milliseconds, over completed requests. */
  readonly timeToFirstToken: Percentiles;
  readonly latency: Percentiles;
}

export interface Percentiles {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

function percentiles(values: number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted.length === 0 ? 0 : sorted[sorted.length - 1]! };
}

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ["river", "stone", "light", "window", "garden", "music", "paper", "silver", "cloud", "forest", "engine", "harbor"];

type Outcome = { kind: "completed"; tokens: number; firstMs: number; totalMs: number } | { kind: "cancelled" } | { kind: "error"; message: string };

/** One streaming request; cancelled after `cancelAfter` chunks when given. */
async function streamRequest(url: string, body: object, cancelAfter: number | undefined): Promise<Outcome> {
  const started = performance.now();
  const abort = new AbortController();
  let response: Response;
  try {
    response = await fetch(`${url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" }, signal: abort.signal });
  } catch (error) {
    return { kind: "error", message: `fetch: ${(error as Error).message}` };
  }
  if (!response.ok || !response.body) return { kind: "error", message: `HTTP ${response.status}: ${await response.text()}` };
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  let chunks = 0;
  let first = 0;
  let finish: string | null = null;
  let done = false;
  let completionTokens = -1;
  try {
    while (true) {
      const { value, done: ended } = await reader.read();
      if (ended) break;
      pending += decoder.decode(value, { stream: true });
      let boundary = pending.indexOf("\n\n");
      while (boundary >= 0) {
        const event = pending.slice(0, boundary);
        pending = pending.slice(boundary + 2);
        boundary = pending.indexOf("\n\n");
        if (!event.startsWith("data: ")) continue;
        const data = event.slice(6);
        if (data === "[DONE]") {
          done = true;
          continue;
        }
        const parsed = JSON.parse(data) as {
          error?: { message: string };
          usage?: { completion_tokens: number };
          choices: { delta: { content?: string }; finish_reason: string | null }[];
        };
        if (parsed.error) return { kind: "error", message: `stream error: ${parsed.error.message}` };
        if (parsed.usage) completionTokens = parsed.usage.completion_tokens;
        const choice = parsed.choices[0];
        if (!choice) continue;
        if (choice.delta.content) {
          chunks++;
          if (first === 0) first = performance.now() - started;
        }
        finish = choice.finish_reason ?? finish;
        if (cancelAfter !== undefined && chunks >= cancelAfter) {
          abort.abort();
          await reader.cancel().catch(() => {});
          return { kind: "cancelled" };
        }
      }
    }
  } catch (error) {
    return { kind: "error", message: `read: ${(error as Error).message}` };
  }
  if (!done || finish === null || completionTokens < 0) return { kind: "error", message: `stream ended without ${done ? "a finish reason or usage" : "[DONE]"}` };
  return { kind: "completed", tokens: completionTokens, firstMs: first, totalMs: performance.now() - started };
}

export async function runLoadTest(options: LoadTestOptions): Promise<LoadTestReport> {
  const random = mulberry32(options.seed ?? 1);
  const cancelFraction = options.cancelFraction ?? 0.1;
  const maxTokensChoices = options.maxTokens ?? [8, 32, 96];
  const promptChoices = options.promptWords ?? [4, 40, 200];
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const outcomes: Outcome[] = [];
  const started = performance.now();
  const deadline = started + options.durationMs;

  const client = async (index: number) => {
    while (performance.now() < deadline) {
      const words = Array.from({ length: pick(promptChoices) }, () => pick(WORDS)).join(" ");
      const cancel = random() < cancelFraction;
      const body = {
        model: "memra",
        messages: [{ role: "user", content: `Client ${index}: ${words}` }],
        max_tokens: pick(maxTokensChoices),
        temperature: 0.8,
        seed: Math.floor(random() * 1e9),
        stream: true,
        stream_options: { include_usage: true },
      };
      outcomes.push(await streamRequest(options.url, body, cancel ? 1 + Math.floor(random() * 4) : undefined));
    }
  };
  await Promise.all(Array.from({ length: options.clients }, (_, i) => client(i)));
  const elapsedMs = performance.now() - started;

  const completed = outcomes.filter((o): o is Extract<Outcome, { kind: "completed" }> => o.kind === "completed");
  const errors = outcomes.filter((o): o is Extract<Outcome, { kind: "error" }> => o.kind === "error");
  const completionTokens = completed.reduce((sum, o) => sum + o.tokens, 0);
  return {
    requests: outcomes.length,
    completed: completed.length,
    cancelled: outcomes.filter((o) => o.kind === "cancelled").length,
    errors: errors.length,
    errorMessages: [...new Set(errors.map((e) => e.message))].slice(0, 5),
    completionTokens,
    elapsedMs,
    tokensPerSecond: (completionTokens / elapsedMs) * 1000,
    timeToFirstToken: percentiles(completed.map((o) => o.firstMs)),
    latency: percentiles(completed.map((o) => o.totalMs)),
  };
}
