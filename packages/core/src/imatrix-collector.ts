/**
 * The importance-matrix collector of llama.cpp's llama-imatrix (tools/imatrix/imatrix.cpp,
 * IMatrixCollector::collect_imatrix), as a Backend that delegates to another one: every weight
 * matmul's input is read back, and each input column's sum of squares added to the weight's entry.
 *
 * The model reaches every weight through matmul, matmuls or expertMatmul only when the backend has
 * none of the fused ops that take a weight (rmsNormMatmuls, attentionMatmul,
 * qkNormRopeAttentionMatmul, swigluMatmul, rmsNormSwigluMatmul, moeExperts) nor records graphs
 * (captureGraph): the wrapper offers none of them, so the model runs its unfused path; the other
 * optional ops (norms, RoPE, KV writes, readInto, the LM head's row reductions) pass through.
 *
 * What is collected, as collect_imatrix does:
 * - a dense matmul (MUL_MAT) only when the forward step has at least 16 rows (llama.cpp skips
 *   src1->ne[1] < 16) and the weight's name starts with "blk." (or is "output.weight" with
 *   `processOutput`); one count per weight, increased by the rows. The router ffn_gate_inp is one.
 *   A tied LM head is token_embd.weight: never collected, as in llama.cpp.
 * - a routed-experts matmul (MUL_MAT_ID) always, whatever the rows: per expert, its sums and the
 *   count of the tokens routed to it.
 * Sums are accumulated in f32, row after row, as llama.cpp adds them; a non-finite sum is an error.
 *
 * Given data to start from (llama-imatrix's --in-file, combined), it adds to it as collect_imatrix
 * adds to loaded data: a dense entry with several equal counts keeps one, an expert entry with one
 * count (from a legacy file) has it repeated for every expert. With a chunk size it keeps
 * llama-imatrix's m_last_chunk (the largest count over the chunk size, raised as each weight's
 * count passes a chunk) and, with a save frequency, calls onSave whenever that passes a multiple of
 * it, at that weight, as llama-imatrix saves its `.at_N` copies: in the middle of a forward step,
 * with the weights after it not yet added to. (A MoE layer's experts are added one at a time here,
 * where llama-imatrix adds all experts of one weight in one call, so a copy taken inside one can
 * differ from llama-imatrix's in which experts it has.)
 */
import { type GGUFTensorInfo, type Imatrix, type ImatrixEntry, imatrixNameOrder } from "@memra/gguf";
import type { Backend, DeviceBuffer, WeightHandle } from "./backend";

/** llama-imatrix's collect_imatrix skips dense matmuls of fewer rows ("why are small batches ignored (<16 tokens)?"). */
export const IMATRIX_MIN_DENSE_ROWS = 16;

export interface ImatrixCollectorOptions {
  /** Collect the LM head (`output.weight`) too: llama-imatrix's --process-output. */
  readonly processOutput?: boolean;
  /** Data to add to (GGUF data, not legacy: combineImatrices turns legacy data into it). */
  readonly initial?: Imatrix;
  /** Tokens a chunk: needed for the chunk count (lastChunk) and onSave. */
  readonly chunkSize?: number;
  /** Call onSave every this many chunks (llama-imatrix --save-frequency); 0 or absent: never. */
  readonly saveFrequency?: number;
  /** Called with lastChunk when a copy is due (see saveFrequency). */
  readonly onSave?: (chunk: number) => void;
  /**
   * Call onOutput every this many chunks (llama-imatrix --output-frequency: it rewrites its output
   * file then, so that a run cut short keeps what it collected), before onSave when both are due, at
   * the same point of the step; 0 or absent: never.
   */
  readonly outputFrequency?: number;
  /** Called with lastChunk when the output is due (see outputFrequency). */
  readonly onOutput?: (chunk: number) => void;
}

interface CollectedEntry {
  readonly sums: Float32Array; // [matrices, columns]
  counts: number[]; // [matrices]
}

export class ImatrixCollector {
  readonly processOutput: boolean;
  /** Rows of the forward step being run (see beginStep); undefined: each call's own rows. */
  private stepRows: number | undefined;
  private readonly collected = new Map<string, CollectedEntry>();
  private readonly names = new WeakMap<WeightHandle, string>();
  private readonly chunkSize: number | undefined;
  private readonly saveFrequency: number;
  private readonly onSave: ((chunk: number) => void) | undefined;
  private readonly outputFrequency: number;
  private readonly onOutput: ((chunk: number) => void) | undefined;
  /** llama-imatrix's m_last_chunk: chunks the largest count has passed (with a chunk size). */
  private last = 0;

  constructor(options: ImatrixCollectorOptions = {}) {
    this.processOutput = options.processOutput ?? false;
    this.chunkSize = options.chunkSize;
    this.saveFrequency = options.saveFrequency ?? 0;
    this.onSave = options.onSave;
    this.outputFrequency = options.outputFrequency ?? 0;
    this.onOutput = options.onOutput;
    if (this.chunkSize !== undefined && (!Number.isInteger(this.chunkSize) || this.chunkSize < 1)) throw new RangeError(`chunkSize must be a positive integer, got ${this.chunkSize}`);
    if (!Number.isInteger(this.saveFrequency) || this.saveFrequency < 0) throw new RangeError(`saveFrequency must be a non-negative integer, got ${this.saveFrequency}`);
    if (this.saveFrequency > 0 && this.chunkSize === undefined) throw new RangeError("a save frequency needs a chunk size");
    if (!Number.isInteger(this.outputFrequency) || this.outputFrequency < 0) throw new RangeError(`outputFrequency must be a non-negative integer, got ${this.outputFrequency}`);
    if (this.outputFrequency > 0 && this.chunkSize === undefined) throw new RangeError("an output frequency needs a chunk size");
    if (options.initial) {
      if (options.initial.legacy) throw new RangeError("legacy imatrix data holds normalised sums: combine it first (combineImatrices)");
      let largest = 0;
      for (const [name, entry] of options.initial.entries) {
        this.collected.set(name, { sums: entry.sums.slice(), counts: [...entry.counts] });
        for (const count of entry.counts) largest = Math.max(largest, count);
      }
      if (this.chunkSize !== undefined) this.last = Math.floor(largest / this.chunkSize);
    }
  }

  /** llama-imatrix's m_last_chunk: the chunks the largest count has passed (0 without a chunk size). */
  get lastChunk(): number {
    return this.last;
  }

  /**
   * The rows of the forward step about to run: llama.cpp's src1->ne[1] of every weight matmul of a
   * ubatch, which decides the 16-row rule. Needed because the model runs its LM head in pieces of
   * 32 rows (a step of 40 rows would otherwise leave a piece of 8 out of output.weight).
   */
  beginStep(rows: number): void {
    this.stepRows = rows;
  }

  /** A backend that runs everything on `inner` and collects into this collector. Disposing it disposes `inner`. */
  wrap(inner: Backend): Backend {
    const collect = (x: DeviceBuffer, weights: readonly WeightHandle[], rows: number) => this.collectDense(inner, x, weights, rows);
    return {
      contractVersion: inner.contractVersion,
      name: inner.name,
      supportsOp: (op, weightType) => inner.supportsOp(op, weightType),
      uploadWeight: (info: GGUFTensorInfo, data: Uint8Array) => {
        const weight = inner.uploadWeight(info, data);
        this.names.set(weight, info.name);
        return weight;
      },
      weightBytes: (weight) => inner.weightBytes(weight),
      allocate: (length) => inner.allocate(length),
      write: (buffer, data, offset) => inner.write(buffer, data, offset),
      read: (buffer, offset, length) => inner.read(buffer, offset, length),
      copy: (out, outOffset, source, sourceOffset, length) => inner.copy(out, outOffset, source, sourceOffset, length),
      embedding: (out, table, tokens) => inner.embedding(out, table, tokens),
      rmsNorm: (out, x, weight, rows, eps) => inner.rmsNorm(out, x, weight, rows, eps),
      matmul: (out, x, weight, rows) => {
        collect(x, [weight], rows);
        inner.matmul(out, x, weight, rows);
      },
      matmuls: (outs, x, weights, rows) => {
        collect(x, weights, rows);
        if (inner.matmuls) inner.matmuls(outs, x, weights, rows);
        else for (let i = 0; i < outs.length; i++) inner.matmul(outs[i]!, x, weights[i]!, rows);
      },
      expertMatmul: (out, x, weight, expert, rows) => {
        this.collectExpert(inner, x, weight, expert, rows);
        inner.expertMatmul(out, x, weight, expert, rows);
      },
      ropeNeox: (x, positions, heads, headDim, freqBase) => inner.ropeNeox(x, positions, heads, headDim, freqBase),
      allocateKV: (type, rows, width) => inner.allocateKV(type, rows, width),
      writeKV: (storage, slots, source) => inner.writeKV(storage, slots, source),
      copyKV: (storage, targetSlot, sourceSlot, rows) => inner.copyKV(storage, targetSlot, sourceSlot, rows),
      readKVRows: (storage, firstSlot, rows) => inner.readKVRows(storage, firstSlot, rows),
      writeKVRows: (storage, firstSlot, bytes) => inner.writeKVRows(storage, firstSlot, bytes),
      attention: (out, q, kv, shape) => inner.attention(out, q, kv, shape),
      swiglu: (out, gate, up, length) => inner.swiglu(out, gate, up, length),
      add: (out, a, b, length) => inner.add(out, a, b, length),
      moeRoute: (logits, rows, experts, k) => inner.moeRoute(logits, rows, experts, k),
      gatherRows: (out, x, rows, width) => inner.gatherRows(out, x, rows, width),
      scatterAddRows: (out, x, rows, scales, width) => inner.scatterAddRows(out, x, rows, scales, width),
      dispose: () => inner.dispose(),
      // optional ops that take no weight: as the inner backend has them
      ...(inner.readInto && { readInto: inner.readInto.bind(inner) }),
      ...(inner.argmaxRows && { argmaxRows: inner.argmaxRows.bind(inner) }),
      ...(inner.topKRows && { topKRows: inner.topKRows.bind(inner) }),
      ...(inner.logSoftmaxAt && { logSoftmaxAt: inner.logSoftmaxAt.bind(inner) }),
      ...(inner.addRmsNorm && { addRmsNorm: inner.addRmsNorm.bind(inner) }),
      ...(inner.ropeNeoxScaled && { ropeNeoxScaled: inner.ropeNeoxScaled.bind(inner) }),
      ...(inner.qkNormRope && { qkNormRope: inner.qkNormRope.bind(inner) }),
      ...(inner.qkNormRopeWriteKV && { qkNormRopeWriteKV: inner.qkNormRopeWriteKV.bind(inner) }),
      ...(inner.writeKVPair && { writeKVPair: inner.writeKVPair.bind(inner) }),
      ...(inner.rotateKV && { rotateKV: inner.rotateKV.bind(inner) }),
    };
  }

  /** The weight names collected so far. */
  get weightNames(): string[] {
    return [...this.collected.keys()];
  }

  /**
   * What has been collected, as llama-imatrix saves it: entries by name, `chunkSize` tokens a
   * chunk (the collector's when absent), chunkCount its m_last_chunk (the largest count over
   * chunkSize, but inside an expert step).
   */
  toImatrix(options: { readonly chunkSize?: number; readonly datasets?: readonly string[] } = {}): Imatrix {
    const chunkSize = options.chunkSize ?? this.chunkSize;
    if (chunkSize === undefined) throw new RangeError("toImatrix needs a chunk size");
    const entries = new Map<string, ImatrixEntry>();
    let largest = 0;
    for (const name of [...this.collected.keys()].sort(imatrixNameOrder)) {
      const entry = this.collected.get(name)!;
      entries.set(name, { sums: entry.sums.slice(), counts: [...entry.counts] });
      for (const count of entry.counts) largest = Math.max(largest, count);
    }
    const chunkCount = this.chunkSize === chunkSize ? this.last : Math.floor(largest / chunkSize);
    return { entries, datasets: [...(options.datasets ?? [])], chunkCount, chunkSize, legacy: false };
  }

  private wanted(name: string): boolean {
    return name.startsWith("blk.") || (this.processOutput && name === "output.weight");
  }

  private collectDense(inner: Backend, x: DeviceBuffer, weights: readonly WeightHandle[], rows: number): void {
    if ((this.stepRows ?? rows) < IMATRIX_MIN_DENSE_ROWS) return;
    let input: Float32Array | undefined;
    for (const weight of weights) {
      const name = this.nameOf(weight);
      if (!this.wanted(name)) continue;
      const columns = weight.shape[0]!;
      const matrices = weight.shape.slice(2).reduce((p, v) => p * v, 1);
      if (matrices !== 1) throw new Error(`imatrix: dense matmul of "${name}" with ${matrices} matrices`);
      input ??= inner.read(x, 0, rows * columns);
      const entry = this.entry(name, columns, 1);
      // one count per dense weight (loaded data may have several; llama.cpp keeps one if they are equal)
      if (entry.counts.length > 1 && entry.counts.every((count) => count === entry.counts[0])) entry.counts = [entry.counts[0]!];
      accumulate(entry.sums, 0, input, rows, columns);
      checkFinite(name, entry.sums, 0, columns);
      for (let i = 0; i < entry.counts.length; i++) {
        entry.counts[i] = entry.counts[i]! + rows;
        this.advance(entry.counts[i]!);
      }
    }
  }

  private collectExpert(inner: Backend, x: DeviceBuffer, weight: WeightHandle, expert: number, rows: number): void {
    const name = this.nameOf(weight);
    const columns = weight.shape[0]!;
    const experts = weight.shape[2] ?? 1;
    if (!Number.isInteger(expert) || expert < 0 || expert >= experts) throw new RangeError(`imatrix: expert ${expert} of "${name}", which has ${experts}`);
    if (rows === 0) return;
    const input = inner.read(x, 0, rows * columns);
    const entry = this.entry(name, columns, experts);
    // a legacy file's single count, repeated for every expert (llama.cpp's "broadcast, when loading an old imatrix")
    if (entry.counts.length === 1 && experts > 1) entry.counts = new Array<number>(experts).fill(entry.counts[0]!);
    if (entry.counts.length !== experts) throw new Error(`imatrix: inconsistent expert count for ${name} (${entry.counts.length} vs ${experts})`);
    accumulate(entry.sums, expert * columns, input, rows, columns);
    entry.counts[expert] = entry.counts[expert]! + rows;
    checkFinite(name, entry.sums, expert * columns, columns);
    this.advance(entry.counts[expert]!);
  }

  /** llama-imatrix's check after a count grows: m_last_chunk raised, and a copy when it passes a multiple of the save frequency. */
  private advance(count: number): void {
    if (this.chunkSize === undefined) return;
    const chunk = Math.floor(count / this.chunkSize);
    if (chunk <= this.last) return;
    const step = chunk - this.last;
    this.last = chunk;
    // llama-imatrix: the output first, then the copy
    if (this.outputFrequency > 0 && Math.floor((chunk % this.outputFrequency) / step) === 0) this.onOutput?.(chunk);
    if (this.saveFrequency > 0 && Math.floor((chunk % this.saveFrequency) / step) === 0) this.onSave?.(chunk);
  }

  private nameOf(weight: WeightHandle): string {
    return this.names.get(weight) ?? weight.name;
  }

  private entry(name: string, columns: number, matrices: number): CollectedEntry {
    let entry = this.collected.get(name);
    if (!entry) {
      entry = { sums: new Float32Array(columns * matrices), counts: new Array<number>(matrices).fill(0) };
      this.collected.set(name, entry);
    } else if (entry.sums.length !== columns * matrices) {
      throw new Error(`imatrix: inconsistent size for ${name} (${entry.sums.length} vs ${columns * matrices})`);
    }
    return entry;
  }
}

/** sums[start + c] += x[r, c]² for every row r, in f32 as llama.cpp adds them (acc[j] += x[j] * x[j]). */
function accumulate(sums: Float32Array, start: number, x: Float32Array, rows: number, columns: number): void {
  for (let r = 0; r < rows; r++) {
    const row = r * columns;
    for (let c = 0; c < columns; c++) {
      const value = x[row + c]!;
      sums[start + c] = sums[start + c]! + Math.fround(value * value);
    }
  }
}

function checkFinite(name: string, sums: Float32Array, start: number, columns: number): void {
  for (let c = start; c < start + columns; c++) {
    if (!Number.isFinite(sums[c]!)) throw new Error(`imatrix: non-finite values detected in ${name}`);
  }
}
