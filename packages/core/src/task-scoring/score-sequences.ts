/**
 * Log-probabilities of chosen tokens in groups of sequences that share their leading tokens (a
 * question and its possible answers): the shared tokens are evaluated once, into a KV sequence that
 * each answer's own sequence forks from (copy-on-write blocks of the paged KV cache), and several
 * groups run together, their sequences as entries of one batched forward step.
 */
import type { BatchEntry } from "../models/qwen3";
import type { Model } from "../load-model";
import { DEFAULT_BLOCK_TOKENS, type PagedKVCache } from "../paged-kv-cache";

/** log p(target | the sequence's tokens up to and including `position`). */
export interface ScoringProbe {
  readonly sequence: number;
  readonly position: number;
  readonly target: number;
}

export interface ScoringGroup {
  readonly sequences: readonly (readonly number[])[];
  /** How many leading tokens all sequences share: evaluated once (at least 1). */
  readonly shared: number;
  readonly probes: readonly ScoringProbe[];
}

/** Tokens a group evaluates: the shared ones once, and each sequence's own. */
export function groupTokens(group: ScoringGroup): number {
  return group.shared + group.sequences.reduce((sum, tokens) => sum + tokens.length - group.shared, 0);
}

interface PendingEntry {
  readonly tokens: Int32Array;
  readonly cache: PagedKVCache;
  /** Rows of `tokens` to score, their targets, and where each result goes. */
  readonly rows: number[];
  readonly targets: number[];
  readonly results: Array<{ readonly out: Float64Array; readonly at: number }>;
}

/**
 * Each group's probe log-probabilities (Float64Array in probe order), group after group in their
 * order; groups are evaluated together while their tokens add up to at most `tokensPerStep`
 * (at least one group at a time).
 */
export function* scoreSequenceGroups(model: Model, groups: readonly ScoringGroup[], tokensPerStep: number): Generator<Float64Array> {
  groups.forEach(checkGroup);
  for (let first = 0; first < groups.length; ) {
    let end = first + 1;
    let tokens = groupTokens(groups[first]!);
    while (end < groups.length && tokens + groupTokens(groups[end]!) <= tokensPerStep) tokens += groupTokens(groups[end++]!);
    yield* scoreTogether(model, groups.slice(first, end));
    first = end;
  }
}

function checkGroup(group: ScoringGroup, index: number): void {
  const { sequences, shared } = group;
  if (sequences.length === 0) throw new RangeError(`scoring group ${index} has no sequences`);
  if (!Number.isInteger(shared) || shared < 1 || sequences.some((tokens) => tokens.length < shared)) {
    throw new RangeError(`scoring group ${index}: ${shared} shared tokens must be at least 1 and at most the shortest sequence`);
  }
  for (let i = 0; i < shared; i++) {
    if (sequences.some((tokens) => tokens[i] !== sequences[0]![i])) throw new RangeError(`scoring group ${index}: the sequences differ at token ${i}, before ${shared}`);
  }
  for (const probe of group.probes) {
    const tokens = sequences[probe.sequence];
    if (!tokens || !Number.isInteger(probe.position) || probe.position < 0 || probe.position >= tokens.length) {
      throw new RangeError(`scoring group ${index}: no token at position ${probe.position} of sequence ${probe.sequence}`);
    }
  }
}

function scoreTogether(model: Model, groups: readonly ScoringGroup[]): Float64Array[] {
  const blockTokens = DEFAULT_BLOCK_TOKENS;
  const blocksOf = (tokens: number) => Math.ceil(tokens / blockTokens);
  // each group's shared blocks; each sequence's own, and a copy of a shared block it writes into
  const blocks = groups.reduce((sum, g) => sum + blocksOf(g.shared) + g.sequences.reduce((s, tokens) => s + blocksOf(tokens.length - g.shared) + 1, 0), 0);
  const pool = model.createKVPool(blocks, { blockTokens });
  const caches: PagedKVCache[] = [];
  const results = groups.map((group) => new Float64Array(group.probes.length));
  try {
    const prefixes = groups.map((group, g) => {
      const cache = pool.createSequence(Math.max(...group.sequences.map((tokens) => tokens.length)));
      caches.push(cache);
      const entry: PendingEntry = { tokens: Int32Array.from(group.sequences[0]!.slice(0, group.shared)), cache, rows: [], targets: [], results: [] };
      group.probes.forEach((probe, i) => {
        if (probe.position >= group.shared) return;
        entry.rows.push(probe.position);
        entry.targets.push(probe.target);
        entry.results.push({ out: results[g]!, at: i });
      });
      return entry;
    });
    runEntries(model, prefixes);
    const own: PendingEntry[] = [];
    groups.forEach((group, g) => {
      group.sequences.forEach((tokens, s) => {
        if (tokens.length === group.shared) return;
        const cache = prefixes[g]!.cache.fork(tokens.length);
        caches.push(cache);
        const entry: PendingEntry = { tokens: Int32Array.from(tokens.slice(group.shared)), cache, rows: [], targets: [], results: [] };
        group.probes.forEach((probe, i) => {
          if (probe.sequence !== s || probe.position < group.shared) return;
          entry.rows.push(probe.position - group.shared);
          entry.targets.push(probe.target);
          entry.results.push({ out: results[g]!, at: i });
        });
        own.push(entry);
      });
    });
    runEntries(model, own);
  } finally {
    for (const cache of caches) cache.dispose();
    pool.dispose();
  }
  return results;
}

/**
 * Runs entries in forward steps of at most the model's maxBatchTokens rows: each step takes the
 * next piece of as many entries as fit (one piece of an entry per step, so that its pieces run in
 * order).
 */
function runEntries(model: Model, entries: readonly PendingEntry[]): void {
  const transformer = model.transformer;
  const done = entries.map(() => 0);
  for (;;) {
    let room = transformer.maxBatchTokens;
    const step: Array<{ entry: PendingEntry; start: number; end: number }> = [];
    entries.forEach((entry, i) => {
      if (room === 0 || done[i]! === entry.tokens.length) return;
      const start = done[i]!;
      const end = Math.min(entry.tokens.length, start + room);
      step.push({ entry, start, end });
      room -= end - start;
      done[i] = end;
    });
    if (step.length === 0) return;
    const pieces = step.map(({ entry, start, end }) => {
      const scored = entry.rows.flatMap((row, i) => (row >= start && row < end ? [i] : []));
      return { entry, scored, out: new Float64Array(scored.length), tokens: entry.tokens.subarray(start, end), start };
    });
    transformer.forwardBatch(
      pieces.map(({ entry, scored, out, tokens, start }): BatchEntry => ({
        tokens,
        cache: entry.cache,
        logits: scored.map((i) => entry.rows[i]! - start),
        ...(scored.length > 0 ? { logprobs: { targets: Int32Array.from(scored, (i) => entry.targets[i]!), out } } : {}),
      })),
    );
    for (const { entry, scored, out } of pieces) {
      scored.forEach((i, k) => {
        const { out: into, at } = entry.results[i]!;
        into[at] = out[k]!;
      });
    }
  }
}
