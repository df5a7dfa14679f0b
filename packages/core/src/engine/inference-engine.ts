/**
 * The engine: many sequences over one model and one paged KV pool, run together in batched steps
 * (continuous batching, as vLLM's scheduler). Every caller drives its own sequence — it asks for
 * tokens to be evaluated and samples from the logits it gets back — and the engine runs whatever
 * work is pending as one forward step at a time: decode tokens first, then prompt chunks (chunked
 * prefill) in the step's remaining token budget. Sequences join and leave between steps. A
 * sequence is admitted when the pool has the blocks its prompt needs (after reusing cached prefix
 * blocks); when blocks run out mid-generation, the most recently admitted sequence is preempted:
 * its blocks are released and its tokens recomputed when it is admitted again.
 */
import { type KVType, TOP_K_ROWS_MAX } from "../backend";
import { KVBlocksExhaustedError, KVCacheFullError } from "../kv-cache";
import type { BatchEntry, TopCandidates, Transformer } from "../models/qwen3";
import { KVBlockPool, type PagedKVCache } from "../paged-kv-cache";

export interface InferenceEngineOptions {
  /** Blocks in the shared KV pool. */
  readonly blocks: number;
  readonly blockTokens?: number;
  readonly kvType?: KVType;
  /** Most sequences in one step. Default 16. */
  readonly maxSequences?: number;
  /** Most tokens in one step (at most the transformer's maxBatchTokens). */
  readonly maxBatchTokens?: number;
  /** Reuse cached blocks of earlier sequences' prompts. Default true. */
  readonly prefixCaching?: boolean;
}

/** Counters for metrics (monotonic unless noted). */
export interface EngineStatistics {
  steps: number;
  /** Tokens evaluated by forward steps (prompt chunks and decode tokens). */
  evaluatedTokens: number;
  /** Prompt tokens found in the prefix cache instead of being evaluated. */
  reusedTokens: number;
  preemptions: number;
  /** Milliseconds spent in forward steps. */
  busyMs: number;
}

interface Work {
  /** Most tokens of this sequence per step (chunked prefill). */
  readonly chunkTokens: number;
  /** Resolve with the greedy token (into EngineSequence.greedy) instead of the logits. */
  readonly greedy: boolean;
  /** Resolve with the best `top` candidates (into EngineSequence.top) instead of the logits; 0: not. */
  readonly top: number;
  /** With `top`: also the row's log Σ exp (EngineSequence.top.logSumExp). */
  readonly logSumExp: boolean;
  /** Resolve with the last row's hidden state after the final norm (into EngineSequence.hidden) instead of the logits. */
  readonly hidden: boolean;
  /**
   * 0: the last token's output alone (as above). More: the outputs of the last `rows` tokens given,
   * into EngineSequence.rowLogits ([rows, vocabulary]), with `top` into EngineSequence.rowTops, with
   * `hidden` into EngineSequence.rowHidden ([rows, embedding]).
   */
  readonly rows: number;
  /** With the logits, or undefined (aborted, released); a greedy evaluation reads its token from EngineSequence.greedy. */
  readonly resolve: (logits: Float32Array | undefined) => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal | undefined;
}

/** The prefix cache key salt of sequences running with these LoRA scales: the scales' bits. */
export function loraPrefixSalt(scales: Float64Array): bigint {
  let salt = 0xcbf29ce484222325n;
  for (const bits of new Uint32Array(scales.buffer, scales.byteOffset, scales.length * 2)) salt = BigInt.asUintN(64, (salt ^ BigInt(bits)) * 0x100000001b3n);
  return salt;
}

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One sequence of the engine: the tokens it has been given and, while admitted, its KV cache. */
export class EngineSequence {
  /** Every token given to the sequence, in order; the cache holds a prefix of them. */
  readonly tokens: number[] = [];
  /** The KV cache while admitted (undefined while waiting or after preemption). */
  cache: PagedKVCache | undefined;
  work: Work | undefined;
  /** Tokens found in the prefix cache when the sequence was admitted. */
  reusedTokens = 0;
  /** Tokens discarded by context shifts (see shift). */
  shiftedTokens = 0;
  admittedAt = 0;
  released = false;
  /** The logits every evaluation of this sequence resolves with (see evaluate). */
  logits: Float32Array | undefined;
  /** Where a greedy evaluation's token is written (see evaluateGreedy). */
  readonly greedy = new Int32Array(1);
  /** Where a top-candidates evaluation's candidates are written (see evaluateTop); sized to the last k asked. */
  top: TopCandidates | undefined;
  /** Where a hidden-state evaluation's row is written (see evaluateHidden). */
  hidden: Float32Array | undefined;
  /** Where evaluateRows writes its rows' logits ([rows, vocabulary]; a view of a buffer grown to the most rows asked). */
  rowLogits: Float32Array | undefined;
  /** Where evaluateRows with `top` writes its rows' best candidates (one per row). */
  rowTops: TopCandidates[] | undefined;
  /** Where evaluateHidden of several rows writes them ([rows, embedding]; a view of a buffer grown to the most rows asked). */
  rowHidden: Float32Array | undefined;

  constructor(
    private readonly engine: InferenceEngine,
    /** Most tokens the sequence may hold. */
    readonly capacity: number,
    /** The LoRA adapters' scales the sequence runs with (BatchEntry.loraScales); undefined: the model's. */
    readonly loraScales?: Float64Array,
  ) {}

  /** The prefix cache key salt of the sequence's blocks: its LoRA scales' bits (undefined without scales of its own). */
  get prefixSalt(): bigint | undefined {
    return this.loraScales && loraPrefixSalt(this.loraScales);
  }

  /** Tokens whose keys and values are in the cache. */
  get cachedTokens(): number {
    return this.cache?.length ?? 0;
  }

  /**
   * Appends `tokens` and resolves with the logits after the last of them once every known token is
   * in the cache ([vocabulary]); resolves with undefined when `signal` aborts first. The array is
   * the sequence's own: the next evaluation overwrites it (copy what must outlive it).
   */
  evaluate(tokens: readonly number[], signal?: AbortSignal, chunkTokens = Number.POSITIVE_INFINITY): Promise<Float32Array | undefined> {
    return this.engine.evaluate(this, tokens, signal, chunkTokens);
  }

  /**
   * evaluate, resolving with the greedy next token instead of the logits (the sampler's argmax of
   * them), picked on the backend where it can (Transformer.forwardGreedy): a greedy decode reads
   * one int back per step instead of the vocabulary's logits. Undefined when `signal` aborts first.
   */
  async evaluateGreedy(tokens: readonly number[], signal?: AbortSignal, chunkTokens = Number.POSITIVE_INFINITY): Promise<number | undefined> {
    const logits = await this.engine.evaluate(this, tokens, signal, chunkTokens, true);
    return logits === undefined ? undefined : this.greedy[0]!;
  }

  /**
   * evaluate, resolving with the k best candidates of the logits instead of the logits (ids and
   * logits in descending order, equal logits by ascending id, as the sampler's top-k leaves them:
   * see the sampler's topCandidatesSuffice and sampleTop), picked on the backend where it can
   * (Backend.topKRows): a sampled decode step reads 2k numbers back instead of the vocabulary's
   * logits. k from 1 to min(vocabulary, TOP_K_ROWS_MAX). `logSumExp`: also log Σ exp of the whole
   * row (in the result's logSumExp[0]; see TopCandidates), for log-probabilities. The arrays are the
   * sequence's own (the next evaluation overwrites them). Undefined when `signal` aborts first.
   */
  async evaluateTop(
    tokens: readonly number[],
    k: number,
    signal?: AbortSignal,
    chunkTokens = Number.POSITIVE_INFINITY,
    options: { readonly logSumExp?: boolean } = {},
  ): Promise<TopCandidates | undefined> {
    if (!(k >= 1)) throw new RangeError(`top candidates: k must be an integer from 1 to ${Math.min(this.engine.transformer.dimensions.vocabulary, TOP_K_ROWS_MAX)}, got ${k}`);
    const logits = await this.engine.evaluate(this, tokens, signal, chunkTokens, false, k, options.logSumExp === true);
    return logits === undefined ? undefined : this.top;
  }

  /**
   * evaluate, resolving with the hidden state of the last token after the final norm ([embedding])
   * instead of the logits: what llama.cpp pools into a last-token embedding or a reranker's score.
   * The LM head does not run for it. `rows` > 0: the hidden states of the last `rows` tokens given
   * instead ([rows, embedding]: what mean pooling averages; they are evaluated, not taken from the
   * prefix cache). The array is the sequence's own (the next evaluation overwrites it). Undefined
   * when `signal` aborts first.
   */
  evaluateHidden(tokens: readonly number[], signal?: AbortSignal, chunkTokens = Number.POSITIVE_INFINITY, rows = 0): Promise<Float32Array | undefined> {
    if (!Number.isInteger(rows) || rows < 0 || rows > tokens.length) throw new RangeError(`rows must be an integer from 0 to the ${tokens.length} tokens given, got ${rows}`);
    return this.engine.evaluate(this, tokens, signal, chunkTokens, false, 0, false, true, rows);
  }

  /**
   * evaluate, resolving with the outputs of the last `rows` of the given tokens instead of the last
   * one's alone: what speculative decoding's verification needs (the model's pick after each draft
   * token, in one forward step). Without `top`: their logits, [rows, vocabulary]; with `top` (k from
   * 1 to min(vocabulary, TOP_K_ROWS_MAX)): each row's k best candidates, as evaluateTop gives them,
   * with its log Σ exp when `logSumExp`. `rows` from 1 to tokens.length. The arrays are the
   * sequence's own (the next evaluation overwrites them). Undefined when `signal` aborts first.
   */
  async evaluateRows(
    tokens: readonly number[],
    rows: number,
    options: { readonly top?: number; readonly logSumExp?: boolean; readonly signal?: AbortSignal; readonly chunkTokens?: number } = {},
  ): Promise<{ readonly logits: Float32Array } | { readonly tops: readonly TopCandidates[] } | undefined> {
    if (!Number.isInteger(rows) || rows < 1 || rows > tokens.length) throw new RangeError(`rows must be an integer from 1 to the ${tokens.length} tokens given, got ${rows}`);
    const top = options.top ?? 0;
    const logits = await this.engine.evaluate(this, tokens, options.signal, options.chunkTokens ?? Number.POSITIVE_INFINITY, false, top, options.logSumExp === true, false, rows);
    if (logits === undefined) return undefined;
    return top > 0 ? { tops: this.rowTops!.slice(0, rows) } : { logits };
  }

  /** Forgets tokens from `length` on (their cache rows too): to continue from a shorter history. */
  rewind(length: number): void {
    if (this.work) throw new Error("cannot rewind a sequence while it is being evaluated");
    if (!Number.isInteger(length) || length < 0 || length > this.tokens.length) throw new RangeError(`cannot rewind a sequence of ${this.tokens.length} tokens to ${length}`);
    this.tokens.length = length;
    if (this.cache && this.cache.length > length) this.cache.trim(length);
    this.reusedTokens = 0;
  }

  /**
   * Context shift (llama.cpp's --context-shift: llama_memory_seq_rm of [keep, keep + discard), then
   * seq_add of -discard to the positions after): forgets tokens [keep, keep + discard) and moves the
   * later ones down, their cached keys rotated to their new positions (Transformer.shiftCache), so
   * that the sequence can go on past its capacity without evaluating the kept tokens again. As in
   * llama.cpp, the kept tokens' keys and values stay those computed while the discarded tokens
   * were before them. Tokens the cache does not hold (a preempted sequence's) are evaluated again
   * at their new positions when the sequence next runs: their values then come from the kept tokens alone.
   */
  shift(keep: number, discard: number): void {
    if (this.work) throw new Error("cannot shift a sequence while it is being evaluated");
    if (this.released) throw new Error("the sequence was released");
    if (!Number.isInteger(keep) || keep < 0) throw new RangeError(`keep must be a non-negative integer, got ${keep}`);
    if (!Number.isInteger(discard) || discard < 1) throw new RangeError(`discard must be a positive integer, got ${discard}`);
    if (keep + discard > this.tokens.length) throw new RangeError(`cannot discard tokens ${keep} to ${keep + discard} of a sequence of ${this.tokens.length}`);
    const cache = this.cache;
    if (cache && cache.length >= keep + discard) this.engine.transformer.shiftCache(cache, keep, discard);
    else if (cache && cache.length > keep) cache.trim(keep);
    this.tokens.splice(keep, discard);
    this.shiftedTokens += discard;
  }

  /** Releases the sequence's blocks (full ones stay in the prefix cache) and leaves the engine. */
  release(): void {
    this.engine.release(this);
  }
}

export class InferenceEngine {
  readonly pool: KVBlockPool;
  readonly maxSequences: number;
  readonly maxBatchTokens: number;
  readonly statistics: EngineStatistics = { steps: 0, evaluatedTokens: 0, reusedTokens: 0, preemptions: 0, busyMs: 0 };
  private readonly prefixCaching: boolean;
  /** Admitted sequences, in order of admission. */
  private readonly running: EngineSequence[] = [];
  /** Sequences with work and no cache, first come first served (preempted ones go first). */
  private readonly waiting: EngineSequence[] = [];
  private stepScheduled = false;
  private admissions = 0;
  private lastStep = new Set<EngineSequence>();

  constructor(
    readonly transformer: Transformer,
    options: InferenceEngineOptions,
  ) {
    const d = transformer.dimensions;
    this.pool = new KVBlockPool(transformer.backend, {
      layers: d.layers,
      kvWidth: d.kvWidth,
      blocks: options.blocks,
      ...(options.blockTokens === undefined ? {} : { blockTokens: options.blockTokens }),
      ...(options.kvType === undefined ? {} : { type: options.kvType }),
      layerBackends: transformer.layerBackends,
    });
    this.maxSequences = options.maxSequences ?? 16;
    this.maxBatchTokens = Math.min(options.maxBatchTokens ?? transformer.maxBatchTokens, transformer.maxBatchTokens);
    this.prefixCaching = options.prefixCaching ?? true;
    if (!Number.isInteger(this.maxSequences) || this.maxSequences < 1) throw new RangeError(`maxSequences must be a positive integer, got ${this.maxSequences}`);
  }

  /**
   * A new sequence of up to `capacity` tokens. `loraScales`: the scales of the model's LoRA adapters
   * for this sequence (one per adapter; see Transformer.loraAdapters); without them the sequence
   * runs with the model's scales as they are when it is created. Its cached prefixes are shared
   * only with sequences of the same scales.
   */
  createSequence(capacity: number, options: { readonly loraScales?: readonly number[] } = {}): EngineSequence {
    const blocks = Math.ceil(capacity / this.pool.blockTokens);
    if (blocks > this.pool.blocks) {
      throw new KVCacheFullError(capacity, this.pool.blocks * this.pool.blockTokens, "KV pool size");
    }
    if (options.loraScales) this.transformer.checkLoraScales(options.loraScales);
    return new EngineSequence(this, capacity, this.sequenceScales(options.loraScales));
  }

  /**
   * The LoRA scales a sequence created with `loraScales` runs with: those, or with adapters the
   * model's as they are now (every sequence keeps the scales it starts with, so that a later
   * setLoraScales changes neither its remaining steps nor which cached prefixes it may take).
   */
  private sequenceScales(loraScales: readonly number[] | undefined): Float64Array | undefined {
    const adapters = this.transformer.loraAdapters;
    const scales = loraScales ?? (adapters.length > 0 ? adapters.map((adapter) => adapter.scale) : undefined);
    return scales && Float64Array.from(scales);
  }

  /** The prefix salt of sequences created with `loraScales` (see createSequence and EngineSequence.prefixSalt). */
  private prefixSaltOf(loraScales: readonly number[] | undefined): bigint | undefined {
    const scales = this.sequenceScales(loraScales);
    return scales && loraPrefixSalt(scales);
  }

  /**
   * Forgets the cached keys and values of `tokens` (whole blocks; for sequences of `loraScales`,
   * as createSequence takes them) that no sequence holds, so that their memory is free and a later
   * prompt starting with them is evaluated again: llama.cpp server's slot erase. Blocks that also
   * hold a prefix of one of `keep` stay. Returns the tokens forgotten.
   */
  forgetPrefix(
    tokens: readonly number[],
    options: { readonly loraScales?: readonly number[]; readonly keep?: readonly { readonly tokens: readonly number[]; readonly loraScales?: readonly number[] }[] } = {},
  ): number {
    const keep = new Set((options.keep ?? []).flatMap((other) => this.pool.prefixKeys(other.tokens, this.prefixSaltOf(other.loraScales))));
    return this.pool.evictPrefix(tokens, this.prefixSaltOf(options.loraScales), keep) * this.pool.blockTokens;
  }

  /** Sequences admitted (holding blocks) and waiting for blocks. */
  get queue(): { readonly running: number; readonly waiting: number } {
    return { running: this.running.length, waiting: this.waiting.length };
  }

  /**
   * See EngineSequence.evaluate; `greedy`: EngineSequence.evaluateGreedy (resolves with an empty
   * array, the token in sequence.greedy); `top` > 0: EngineSequence.evaluateTop (resolves with an
   * empty array, the candidates in sequence.top), with the row's log Σ exp when `logSumExp`;
   * `hidden`: EngineSequence.evaluateHidden (resolves with sequence.hidden); `rows` > 0:
   * EngineSequence.evaluateRows (resolves with the rows' logits, or an empty array with `top`).
   */
  evaluate(
    sequence: EngineSequence,
    tokens: readonly number[],
    signal: AbortSignal | undefined,
    chunkTokens: number,
    greedy = false,
    top = 0,
    logSumExp = false,
    hidden = false,
    rows = 0,
  ): Promise<Float32Array | undefined> {
    if (!(chunkTokens >= 1)) throw new RangeError(`chunkTokens must be at least 1, got ${chunkTokens}`);
    const most = Math.min(this.transformer.dimensions.vocabulary, TOP_K_ROWS_MAX);
    if (!Number.isInteger(top) || top < 0 || top > most) throw new RangeError(`top candidates: k must be an integer from 1 to ${most}, got ${top}`);
    if (Number(greedy) + Number(top > 0) + Number(hidden) > 1) throw new Error("an evaluation is greedy, asks for top candidates or for the hidden state: one of them");
    if (rows > 0 && greedy) throw new Error("an evaluation of several rows gives their logits, top candidates or hidden states");
    if (!Number.isInteger(rows) || rows < 0 || rows > Math.max(tokens.length, 1)) throw new RangeError(`rows must be an integer from 0 to the ${tokens.length} tokens given, got ${rows}`);
    if (sequence.released) throw new Error("the sequence was released");
    if (sequence.work) throw new Error("the sequence is already being evaluated");
    if (tokens.length === 0 && sequence.cachedTokens === sequence.tokens.length) throw new RangeError("nothing to evaluate");
    const vocabulary = this.transformer.dimensions.vocabulary;
    for (const token of tokens) {
      if (!Number.isInteger(token) || token < 0 || token >= vocabulary) throw new RangeError(`token id ${token} is outside the vocabulary (0..${vocabulary - 1})`);
    }
    if (sequence.tokens.length + tokens.length > sequence.capacity) throw new KVCacheFullError(sequence.tokens.length + tokens.length, sequence.capacity);
    for (const token of tokens) sequence.tokens.push(token);
    return new Promise((resolve, reject) => {
      if (top > 0 && (sequence.top?.ids.length !== top || (sequence.top.logSumExp !== undefined) !== logSumExp)) {
        sequence.top = { ids: new Int32Array(top), logits: new Float32Array(top), ...(logSumExp ? { logSumExp: new Float64Array(1) } : {}) };
      }
      if (hidden) sequence.hidden ??= new Float32Array(this.transformer.dimensions.embedding);
      if (rows > 0) prepareRows(sequence, rows, top, logSumExp, hidden ? this.transformer.dimensions.embedding : this.transformer.dimensions.vocabulary, hidden);
      sequence.work = { resolve, reject, signal, chunkTokens, greedy, top, logSumExp: top > 0 && logSumExp, hidden, rows };
      if (!sequence.cache && !this.waiting.includes(sequence)) this.waiting.push(sequence);
      this.scheduleStep();
    });
  }

  release(sequence: EngineSequence): void {
    if (sequence.released) return;
    sequence.released = true;
    sequence.work?.resolve(undefined);
    sequence.work = undefined;
    this.drop(sequence);
  }

  private drop(sequence: EngineSequence): void {
    sequence.cache?.dispose();
    sequence.cache = undefined;
    remove(this.running, sequence);
    remove(this.waiting, sequence);
  }

  private scheduleStep(): void {
    if (this.stepScheduled) return;
    this.stepScheduled = true;
    void this.runSteps();
  }

  /** Runs steps while there is work; yields to the event loop between them so callers can submit. */
  private async runSteps(): Promise<void> {
    try {
      let deferred = false;
      while (true) {
        await nextTick();
        this.cancelAborted();
        if (!this.hasWork()) break;
        // Give sequences of the last step one more turn of the event loop to submit their next token.
        const late = [...this.lastStep].some((sequence) => !sequence.released && !sequence.work && sequence.cache);
        if (late && !deferred) {
          deferred = true;
          continue;
        }
        deferred = false;
        this.step();
      }
    } finally {
      this.stepScheduled = false;
      if (this.hasWork()) this.scheduleStep();
    }
  }

  private hasWork(): boolean {
    return this.running.some((sequence) => sequence.work) || this.waiting.length > 0;
  }

  private cancelAborted(): void {
    for (const sequence of [...this.running, ...this.waiting]) {
      if (sequence.work?.signal?.aborted) {
        sequence.work.resolve(undefined);
        sequence.work = undefined;
        remove(this.waiting, sequence);
      }
    }
  }

  /** Admits waiting sequences, first come first served, while sequences and blocks allow. */
  private admit(): void {
    while (this.waiting.length > 0 && this.running.length < this.maxSequences) {
      const sequence = this.waiting[0]!;
      const cache = this.pool.createSequence(sequence.capacity, { prefixSalt: sequence.prefixSalt });
      // An evaluation of several rows needs each of them evaluated: the prefix cache may give the tokens before them.
      const rows = sequence.work?.rows ?? 0;
      const reused = this.prefixCaching ? cache.reusePrefix(rows > 1 ? sequence.tokens.slice(0, sequence.tokens.length - rows + 1) : sequence.tokens) : 0;
      // Blocks for the rest of the known tokens plus one token of decode.
      const needed = cache.blocksNeeded(sequence.tokens.length - reused + 1);
      if (needed > this.pool.freeBlocks && !this.preemptIdle(needed)) {
        cache.dispose();
        if (this.running.length === 0) {
          this.waiting.shift();
          sequence.work?.reject(new KVBlocksExhaustedError(needed, this.pool.freeBlocks));
          sequence.work = undefined;
          continue;
        }
        return;
      }
      this.waiting.shift();
      sequence.cache = cache;
      sequence.reusedTokens += reused;
      this.statistics.reusedTokens += reused;
      sequence.admittedAt = ++this.admissions;
      this.running.push(sequence);
    }
  }

  /** Frees blocks of admitted sequences without work (an idle chat session), newest first. */
  private preemptIdle(needed: number): boolean {
    for (let i = this.running.length - 1; i >= 0 && this.pool.freeBlocks < needed; i--) {
      const sequence = this.running[i]!;
      if (!sequence.work) this.preempt(sequence);
    }
    return this.pool.freeBlocks >= needed;
  }

  private preempt(sequence: EngineSequence): void {
    this.statistics.preemptions++;
    sequence.cache?.dispose();
    sequence.cache = undefined;
    remove(this.running, sequence);
    if (sequence.work) this.waiting.unshift(sequence);
  }

  private step(): void {
    this.admit();
    const candidates = this.running.filter((sequence) => sequence.work);
    // Decode first (one token each), then prompt chunks, oldest first.
    candidates.sort((a, b) => remaining(a) - remaining(b) || a.admittedAt - b.admittedAt);
    let budget = this.maxBatchTokens;
    let reserved = 0;
    const batch: { sequence: EngineSequence; count: number }[] = [];
    for (const sequence of candidates) {
      if (budget === 0) break;
      if (!sequence.cache) continue; // preempted for an earlier one of this step
      const count = Math.min(remaining(sequence), budget, sequence.work!.chunkTokens);
      // Blocks are taken when the forward prepares each cache: count what this step already claimed.
      const needed = sequence.cache.blocksNeeded(count);
      while (needed > this.pool.freeBlocks - reserved) {
        const victim = this.newestPreemptible(batch);
        if (!victim) break;
        this.preempt(victim);
      }
      if (!sequence.cache) continue; // it was the newest, and preempted itself
      if (needed > this.pool.freeBlocks - reserved) continue;
      batch.push({ sequence, count });
      budget -= count;
      reserved += needed;
    }
    if (batch.length === 0) {
      // Nothing could run: with nothing else holding blocks, the work can never fit.
      for (const sequence of candidates) {
        if (sequence.cache && this.running.length === 1) {
          sequence.work?.reject(new KVBlocksExhaustedError(sequence.cache.blocksNeeded(remaining(sequence)), this.pool.freeBlocks));
          sequence.work = undefined;
        }
      }
      return;
    }

    const entries: BatchEntry[] = batch.map(({ sequence, count }) => {
      const entry = this.entryOf(sequence, count);
      return sequence.loraScales ? { ...entry, loraScales: sequence.loraScales } : entry;
    });
    const started = performance.now();
    let logits: Float32Array[];
    try {
      logits = this.transformer.forwardBatch(entries);
    } catch (error) {
      for (const { sequence } of batch) {
        sequence.work?.reject(error);
        sequence.work = undefined;
        this.drop(sequence);
      }
      return;
    } finally {
      this.statistics.busyMs += performance.now() - started;
    }
    this.statistics.steps++;
    this.lastStep = new Set();
    for (let i = 0; i < batch.length; i++) {
      const { sequence, count } = batch[i]!;
      this.statistics.evaluatedTokens += count;
      if (remaining(sequence) === 0) {
        const work = sequence.work!;
        sequence.work = undefined;
        this.lastStep.add(sequence);
        work.resolve(work.rows > 0 ? (work.hidden ? sequence.rowHidden! : work.top > 0 ? new Float32Array(0) : sequence.rowLogits!) : work.hidden ? sequence.hidden! : logits[i]!);
      }
    }
  }

  /** The batch entry of a sequence's next `count` tokens, for what its evaluation asks. */
  private entryOf(sequence: EngineSequence, count: number): BatchEntry {
    const cache = sequence.cache!;
    const tokens = Int32Array.from(sequence.tokens.slice(cache.length, cache.length + count));
    if (sequence.work!.rows > 0) return rowsEntry(sequence, tokens, sequence.work!.hidden ? this.transformer.dimensions.embedding : this.transformer.dimensions.vocabulary);
    if (cache.length + count !== sequence.tokens.length) return { tokens, cache, logits: [] };
    if (sequence.work!.greedy) return { tokens, cache, greedy: sequence.greedy };
    if (sequence.work!.hidden) return { tokens, cache, logits: [count - 1], hidden: sequence.hidden! };
    if (sequence.work!.top > 0) return { tokens, cache, top: sequence.top! };
    sequence.logits ??= new Float32Array(this.transformer.dimensions.vocabulary);
    return { tokens, cache, logits: "last", output: sequence.logits };
  }

  /** The most recently admitted running sequence not already in this step's batch. */
  private newestPreemptible(batch: readonly { sequence: EngineSequence }[]): EngineSequence | undefined {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const sequence = this.running[i]!;
      if (!batch.some((entry) => entry.sequence === sequence)) return sequence;
    }
    return undefined;
  }

  dispose(): void {
    for (const sequence of [...this.running, ...this.waiting]) this.release(sequence);
    this.pool.dispose();
  }
}

/** Sizes the sequence's row outputs for an evaluation of `rows` rows of `width` values (buffers grow, never shrink). */
function prepareRows(sequence: EngineSequence, rows: number, top: number, logSumExp: boolean, width: number, hidden: boolean): void {
  if (top > 0) {
    const tops = (sequence.rowTops ??= []);
    for (let i = 0; i < rows; i++) {
      const current = tops[i];
      if (current?.ids.length !== top || (current.logSumExp !== undefined) !== logSumExp) {
        tops[i] = { ids: new Int32Array(top), logits: new Float32Array(top), ...(logSumExp ? { logSumExp: new Float64Array(1) } : {}) };
      }
    }
    return;
  }
  const buffer = (hidden ? sequence.rowHidden : sequence.rowLogits)?.buffer as ArrayBuffer | undefined;
  const storage = buffer && buffer.byteLength >= rows * width * 4 ? buffer : new ArrayBuffer(rows * width * 4);
  if (hidden) sequence.rowHidden = new Float32Array(storage, 0, rows * width);
  else sequence.rowLogits = new Float32Array(storage, 0, rows * width);
}

/**
 * The batch entry of a chunk of an evaluation of several rows (evaluateRows, evaluateHidden): tokens [cache.length, cache.length + tokens.length)
 * of the sequence; those among its last `rows` tokens give their outputs, into the sequence's row
 * outputs at their place (a chunk before the last may hold some of them).
 */
function rowsEntry(sequence: EngineSequence, tokens: Int32Array, width: number): BatchEntry {
  const cache = sequence.cache!;
  const work = sequence.work!;
  const first = sequence.tokens.length - work.rows; // position of the first wanted row
  const start = cache.length;
  const end = start + tokens.length;
  const from = Math.max(first, start);
  if (from >= end) return { tokens, cache, logits: [] };
  const indices = Array.from({ length: end - from }, (_, i) => from - start + i);
  if (work.top > 0) return { tokens, cache, logits: indices, tops: sequence.rowTops!.slice(from - first, end - first) };
  if (work.hidden) return { tokens, cache, logits: indices, hidden: sequence.rowHidden!.subarray((from - first) * width, (end - first) * width) };
  return { tokens, cache, logits: indices, output: sequence.rowLogits!.subarray((from - first) * width, (end - first) * width) };
}

function remaining(sequence: EngineSequence): number {
  return sequence.tokens.length - (sequence.cache?.length ?? 0);
}

function remove<T>(list: T[], item: T): void {
  const index = list.indexOf(item);
  if (index >= 0) list.splice(index, 1);
}
