/**
 * The server's counters and gauges in Prometheus text format (GET /metrics): requests by
 * endpoint and outcome, tokens, queue depth, KV blocks used / free / cached, and the generation
 * rate over the last ten seconds.
 */
import type { Model } from "@memra/core";

const RATE_WINDOW_MS = 10_000;

export class ServerMetrics {
  private readonly requests = new Map<string, number>();
  private promptTokens = 0;
  private generatedTokens = 0;
  private active = 0;
  /** (time, tokens) of finished requests' completions, for the recent rate. */
  private readonly recent: { time: number; tokens: number }[] = [];

  constructor(private readonly model: Model) {}

  requestStarted(promptTokens: number): void {
    this.active++;
    this.promptTokens += promptTokens;
  }

  requestFinished(endpoint: "chat" | "completion" | "responses" | "messages", status: string, completionTokens: number): void {
    this.active--;
    this.generatedTokens += completionTokens;
    this.count(endpoint === "chat" ? "/v1/chat/completions" : endpoint === "responses" ? "/v1/responses" : endpoint === "messages" ? "/v1/messages" : "/v1/completions", status);
    const now = performance.now();
    this.recent.push({ time: now, tokens: completionTokens });
    while (this.recent.length > 0 && this.recent[0]!.time < now - RATE_WINDOW_MS) this.recent.shift();
  }

  requestRejected(path: string, status: number): void {
    this.count(path, String(status));
  }

  /** Requests being served now. */
  get activeRequests(): number {
    return this.active;
  }

  private count(path: string, status: string): void {
    const key = `endpoint="${path.replace(/["\\\n]/g, "_")}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  render(): string {
    const engine = this.model.engine;
    const pool = engine.pool;
    const statistics = engine.statistics;
    const now = performance.now();
    const recentTokens = this.recent.filter((entry) => entry.time >= now - RATE_WINDOW_MS).reduce((sum, entry) => sum + entry.tokens, 0);
    const lines: string[] = [];
    const metric = (name: string, type: "counter" | "gauge", help: string, samples: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) lines.push(`${name}${labels ? `{${labels}}` : ""} ${value}`);
    };
    metric("memra_requests_total", "counter", "Requests by endpoint and outcome.", [...this.requests.entries()]);
    metric("memra_requests_active", "gauge", "Requests being served.", [["", this.active]]);
    metric("memra_queue_running", "gauge", "Sequences admitted to the engine (holding KV blocks).", [["", engine.queue.running]]);
    metric("memra_queue_waiting", "gauge", "Sequences waiting for KV blocks (queue depth).", [["", engine.queue.waiting]]);
    metric("memra_prompt_tokens_total", "counter", "Prompt tokens received.", [["", this.promptTokens]]);
    metric("memra_generated_tokens_total", "counter", "Tokens generated.", [["", this.generatedTokens]]);
    metric("memra_evaluated_tokens_total", "counter", "Tokens run through forward steps.", [["", statistics.evaluatedTokens]]);
    metric("memra_prefix_cache_reused_tokens_total", "counter", "Prompt tokens found in the prefix cache.", [["", statistics.reusedTokens]]);
    metric("memra_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.", [["", statistics.preemptions]]);
    metric("memra_engine_steps_total", "counter", "Batched forward steps.", [["", statistics.steps]]);
    metric("memra_kv_blocks_used", "gauge", "KV blocks held by sequences.", [["", pool.usedBlocks]]);
    metric("memra_kv_blocks_free", "gauge", "KV blocks free (including cached prefixes).", [["", pool.freeBlocks]]);
    metric("memra_kv_blocks_cached", "gauge", "Free KV blocks that keep a reusable prefix.", [["", pool.cachedBlocks]]);
    metric("memra_kv_cache_bytes", "gauge", "Bytes of the KV pool.", [["", pool.bytes]]);
    metric("memra_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s (finished requests).", [
      ["", recentTokens / (RATE_WINDOW_MS / 1000)],
    ]);
    return `${lines.join("\n")}\n`;
  }
}
