/**
 * llama-quantize: a model file rewritten with its weights in another type, tensor by tensor and in
 * slabs of rows, so that a model larger than memory can be converted. The tensor types follow
 * llama.cpp's rules (planQuantization) and the bytes follow ggml's reference quantizers, so the
 * file is the one llama-quantize writes from the same input, byte for byte.
 */
import { renameSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import type { GGUFFile } from "../gguf-file";
import { dequantize, quantize } from "../quant";
import { openGGUFModel, splitPath } from "../split-gguf";
import { type GGUFTensorToWrite, sameFile, writeGGUFFile } from "../write-gguf";
import { type PlannedTensor, type QuantizationOptions, type QuantizationPlan, QuantizationError, planQuantization, splitKeys } from "./plan";

/**
 * A faster quantizer for some types (e.g. native code): writes `values` quantized to `type` into
 * `out` (sized for them) and returns true, or returns false to leave the type to the TypeScript
 * reference quantizers. It must give their bytes. With `importance` (one row's column weights),
 * `values` are whole rows of `importance.length` values, quantized as `quantize(type, values, importance)`.
 */
export type RowQuantizer = (type: GGMLType, values: Float32Array, out: Uint8Array, importance?: Float32Array) => boolean;

/**
 * A faster reader for some source types: writes `count` values of `type` from `bytes` as float32
 * into `out` (of length `count`) and returns true, or returns false to leave the type to
 * @memra/gguf's `dequantize`. It must give its values, bit for bit.
 */
export type RowDequantizer = (type: GGMLType, bytes: Uint8Array, count: number, out: Float32Array) => boolean;

export interface QuantizeModelOptions extends QuantizationOptions {
  readonly quantizer?: RowQuantizer;
  readonly dequantizer?: RowDequantizer;
  /** Called after each tensor is written, in file order. */
  readonly onTensor?: (progress: { readonly index: number; readonly count: number; readonly tensor: PlannedTensor; readonly seconds: number }) => void;
  /** Values converted at a time (default 4 M: 16 MiB of float32, plus the slab's output bytes). */
  readonly slabValues?: number;
}

export interface QuantizationReport extends QuantizationPlan {
  /** The output file (the first shard's with `keepSplit`). */
  readonly path: string;
  /** Every output file, in shard order. */
  readonly paths: readonly string[];
  /** Bytes of the whole output (every shard). */
  readonly fileBytes: number;
  readonly seconds: number;
}

/**
 * Quantizes the model at `input` (a file, or the first shard of a split model) into a new file at
 * `output` (llama-quantize INPUT OUTPUT TYPE). With `keepSplit`, `output` is the shards' prefix, a
 * trailing `.gguf` dropped as llama-quantize drops it: OUT.gguf gives OUT-00001-of-0000N.gguf, ...
 * Each file is written beside its name under a temporary one and all are renamed once every one is
 * complete: on any error nothing is left at the output paths and existing files there are untouched.
 *
 * @throws QuantizationError (see planQuantization), or when an output path is an input file.
 */
export async function quantizeModel(input: string | GGUFFile, output: string, options: QuantizeModelOptions): Promise<QuantizationReport> {
  const file = typeof input === "string" ? openGGUFModel(input) : input;
  const plan = planQuantization(file, { ...options, dryRun: false });
  const targets = quantizedPaths(output, options.keepSplit === true, plan.shardCount);
  for (const target of targets) {
    for (const path of file.paths) {
      if (path !== "" && sameFile(path, target)) throw new QuantizationError(`the output ${target} is the input file: write the quantized model elsewhere`);
    }
  }
  const started = performance.now();
  const slabValues = Math.max(1, Math.floor(options.slabValues ?? 4 * 1024 * 1024));
  const sources = new Map(file.tensors.map((t) => [t.name, t]));
  // One float32 slab and one output slab for the whole file: JavaScriptCore collects large typed
  // arrays late, and a new pair per slab grew a 1.2 GB conversion to 3.4 GB of memory.
  const buffers: Buffers = { floats: new Float32Array(0), out: new Uint8Array(0) };
  const count = plan.tensors.length;
  function* reported(pieces: Iterable<Uint8Array>, tensor: PlannedTensor, index: number): Generator<Uint8Array> {
    const tensorStarted = performance.now();
    yield* pieces;
    // the writer asks for the next piece once the last one is written: the tensor is on disk
    options.onTensor?.({ index, count, tensor, seconds: (performance.now() - tensorStarted) / 1000 });
  }
  const shards = targets.map((): GGUFTensorToWrite[] => []);
  plan.tensors.forEach((planned, index) =>
    shards[planned.shard]!.push({
      name: planned.name,
      type: planned.to,
      shape: trimmedShape(planned.shape),
      data: () => reported(convert(file.tensorData(sources.get(planned.sourceName)!), planned, slabValues, options, buffers), planned, index),
    }),
  );
  // the first shard has the model's metadata; the others only the split keys (gguf_init_empty in llama.cpp)
  const metadata = (shard: number) => (shard === 0 ? plan.metadata : new Map(splitKeys(shard, plan.shardCount, plan.tensors.length)));
  const temporary = targets.map((target) => `${target}.partial-${process.pid}-${Date.now()}`);
  let fileBytes = 0;
  try {
    for (const [shard, tensors] of shards.entries()) fileBytes += await writeGGUFFile(temporary[shard]!, { version: 3, metadata: metadata(shard), tensors });
    targets.forEach((target, shard) => renameSync(temporary[shard]!, target));
  } catch (error) {
    for (const path of temporary) rmSync(path, { force: true });
    throw error;
  }
  return { ...plan, path: targets[0]!, paths: targets, fileBytes, seconds: (performance.now() - started) / 1000 };
}

/** The output files: `output`, or with `keepSplit` llama_split_path's names from its prefix. */
function quantizedPaths(output: string, keepSplit: boolean, shardCount: number): string[] {
  if (!keepSplit) return [resolve(output)];
  const prefix = resolve(output.endsWith(".gguf") ? output.slice(0, -".gguf".length) : output);
  return Array.from({ length: shardCount }, (_, shard) => splitPath(prefix, shard, shardCount));
}

/** gguf writes ggml_n_dims dimensions: trailing 1s dropped, at least one. */
function trimmedShape(shape: readonly number[]): number[] {
  let n = shape.length;
  while (n > 1 && shape[n - 1] === 1) n--;
  return shape.slice(0, n);
}

interface Buffers {
  floats: Float32Array;
  out: Uint8Array;
}

/**
 * The tensor's output bytes in slabs of whole rows: copied when its type stays, else read to float32
 * and quantized. Each slab is a view of `buffers`, overwritten by the next: the writer has written
 * a piece before it asks for the next one.
 */
function* convert(source: Uint8Array, planned: PlannedTensor, slabValues: number, options: QuantizeModelOptions, buffers: Buffers): Generator<Uint8Array> {
  const columns = planned.shape[0]!;
  const rows = planned.shape.slice(1).reduce((a, b) => a * b, 1);
  const fromInfo = ggmlTypeInfo(planned.from)!;
  const toInfo = ggmlTypeInfo(planned.to)!;
  const rowBytesIn = (columns / fromInfo.blockSize) * fromInfo.bytesPerBlock;
  const rowBytesOut = (columns / toInfo.blockSize) * toInfo.bytesPerBlock;
  const slabRows = Math.max(1, Math.min(rows, Math.floor(slabValues / columns)));
  if (planned.from === planned.to) {
    // copied in slabs of at most 64 MiB (the mapped file's pages, not a copy)
    const copyRows = Math.max(1, Math.min(rows, Math.floor((64 << 20) / rowBytesIn)));
    for (let row = 0; row < rows; row += copyRows) yield source.subarray(row * rowBytesIn, Math.min(rows, row + copyRows) * rowBytesIn);
    return;
  }
  if (buffers.floats.length < slabRows * columns) buffers.floats = new Float32Array(slabRows * columns);
  if (buffers.out.length < slabRows * rowBytesOut) buffers.out = new Uint8Array(slabRows * rowBytesOut);
  for (let row = 0; row < rows; row += slabRows) {
    const count = Math.min(slabRows, rows - row);
    const values = count * columns;
    const bytes = source.subarray(row * rowBytesIn, (row + count) * rowBytesIn);
    const scratch = buffers.floats.subarray(0, values);
    let floats: Float32Array;
    if (planned.from === GGMLType.F32 && bytes.byteOffset % 4 === 0) floats = new Float32Array(bytes.buffer, bytes.byteOffset, values);
    else if (planned.from === GGMLType.F32) floats = copyF32(bytes, scratch, values);
    else if (options.dequantizer?.(planned.from, bytes, values, scratch)) floats = scratch;
    else floats = dequantize(planned.from, bytes, values, scratch).subarray(0, values);
    const out = buffers.out.subarray(0, count * rowBytesOut);
    const importance = toInfo.blockSize > 1 ? planned.importance : undefined;
    if (importance === undefined) {
      if (!options.quantizer?.(planned.to, floats, out)) out.set(quantize(planned.to, floats));
    } else {
      // each matrix (expert) has its own importance: quantize the slab in runs of one matrix's rows
      const rowsPerMatrix = planned.shape[1] ?? 1;
      for (let first = row; first < row + count; ) {
        const matrix = Math.floor(first / rowsPerMatrix);
        const end = Math.min(row + count, (matrix + 1) * rowsPerMatrix);
        const values = floats.subarray((first - row) * columns, (end - row) * columns);
        const target = out.subarray((first - row) * rowBytesOut, (end - row) * rowBytesOut);
        const weights = importance.subarray(matrix * columns, (matrix + 1) * columns);
        if (!options.quantizer?.(planned.to, values, target, weights)) target.set(quantize(planned.to, values, weights));
        first = end;
      }
    }
    yield out;
  }
}

function copyF32(bytes: Uint8Array, out: Float32Array, count: number): Float32Array {
  new Uint8Array(out.buffer, out.byteOffset, count * 4).set(bytes.subarray(0, count * 4));
  return out.subarray(0, count);
}
