/**
 * Models split over several GGUF files, as llama.cpp's gguf-split writes them and its loader reads
 * them: `PREFIX-00001-of-00003.gguf` ... `PREFIX-00003-of-00003.gguf`, each with `split.no`,
 * `split.count` and `split.tensors.count`; the first holds the model's metadata, every one some of
 * its tensors.
 */
import { renameSync, rmSync } from "node:fs";
import { GGUFError } from "./gguf-error";
import { GGUFFile, type GGUFTensorInfo } from "./gguf-file";
import type { GGUFValue } from "./gguf-value";
import { openGGUF } from "./read-gguf";
import { type GGUFTensorToWrite, sameFile, writeGGUFFile, writeGGUFFileComplete } from "./write-gguf";

export const SPLIT_KEYS = { index: "split.no", count: "split.count", tensors: "split.tensors.count" } as const;

/** llama_split_path: the path of shard `index` (0-based) of `count`: PREFIX-0000(index+1)-of-0000count.gguf. */
export function splitPath(prefix: string, index: number, count: number): string {
  return `${prefix}-${String(index + 1).padStart(5, "0")}-of-${String(count).padStart(5, "0")}.gguf`;
}

/** llama_split_prefix: the prefix of shard `index` of `count` named as splitPath names it, else undefined. */
export function splitPrefix(path: string, index: number, count: number): string | undefined {
  const postfix = `-${String(index + 1).padStart(5, "0")}-of-${String(count).padStart(5, "0")}.gguf`;
  return path.length > postfix.length && path.endsWith(postfix) ? path.slice(0, -postfix.length) : undefined;
}

/** `split.no` / `split.count` of a file, or undefined when it is not a shard of a split model (no count, or a count of 1). */
export function splitInfo(file: GGUFFile): { index: number; count: number; tensors: number | undefined } | undefined {
  const count = file.getNumber(SPLIT_KEYS.count);
  if (count === undefined || count <= 1) return undefined;
  return { index: file.getNumber(SPLIT_KEYS.index) ?? 0, count, tensors: file.getNumber(SPLIT_KEYS.tensors) };
}

/**
 * A model whose tensors live in several files: the first shard's metadata, every shard's tensors
 * (each tensor's `offset` is in its own shard), `tensorData` reading from the right one.
 */
export class GGUFSplitFile extends GGUFFile {
  /** The shards, in order; `this` reads its metadata from the first. */
  readonly shards: readonly GGUFFile[];
  private readonly shardByTensor: Map<string, GGUFFile>;

  constructor(shards: readonly GGUFFile[], tensors: readonly GGUFTensorInfo[], shardByTensor: Map<string, GGUFFile>) {
    const first = shards[0]!;
    super({ version: first.version, alignment: first.alignment, metadata: first.metadata, tensors, dataOffset: first.dataOffset, header: first.header, contents: first.contents, path: first.path });
    this.shards = shards;
    this.shardByTensor = shardByTensor;
  }

  override tensorData(tensor: string | GGUFTensorInfo): Uint8Array {
    const name = typeof tensor === "string" ? tensor : tensor.name;
    const shard = this.shardByTensor.get(name);
    if (!shard) throw new GGUFError("tensor_infos", 0, `no tensor named "${name}"`);
    return shard.tensorData(name);
  }

  override get fileBytes(): number {
    return this.shards.reduce((sum, shard) => sum + shard.fileBytes, 0);
  }

  override get paths(): readonly string[] {
    return this.shards.map((shard) => shard.path ?? "");
  }
}

/**
 * Opens a model as llama.cpp's loader does: one GGUF file, or, when it is the first shard of a split
 * model (split.count > 1), every shard, found by their names (PREFIX-0000i-of-0000n.gguf) and checked:
 * each one's split.no, no tensor in two shards, and split.tensors.count tensors in all.
 *
 * @throws GGUFError naming the file and the problem: a later shard given instead of the first, a shard
 *   missing or misnumbered, a duplicated tensor, a tensor count that does not add up.
 */
export function openGGUFModel(path: string): GGUFFile {
  const first = openGGUF(path);
  const split = splitInfo(first);
  if (split === undefined) return first;
  if (split.index !== 0) {
    throw new GGUFError(SPLIT_KEYS.index, -1, `${path} is shard ${split.index + 1} of ${split.count} of a split model: open the first shard (${describeFirst(path, split.index, split.count)})`);
  }
  const prefix = splitPrefix(path, 0, split.count);
  if (prefix === undefined) {
    throw new GGUFError(SPLIT_KEYS.count, -1, `${path} is the first of ${split.count} shards but is not named as one (…${splitPath("", 0, split.count)}), so the others cannot be found`);
  }
  const shards: GGUFFile[] = [first];
  for (let index = 1; index < split.count; index++) {
    const shardPath = splitPath(prefix, index, split.count);
    let shard: GGUFFile;
    try {
      shard = openGGUF(shardPath);
    } catch (error) {
      throw new GGUFError(SPLIT_KEYS.count, -1, `shard ${index + 1} of ${split.count}: ${(error as Error).message}`);
    }
    const number = shard.getNumber(SPLIT_KEYS.index);
    if (number === undefined) throw new GGUFError(SPLIT_KEYS.index, -1, `${shardPath} has no ${SPLIT_KEYS.index}: it is not a shard of this model`);
    if (number !== index) throw new GGUFError(SPLIT_KEYS.index, -1, `${shardPath} says it is shard ${number + 1}, expected ${index + 1}`);
    shards.push(shard);
  }
  const tensors: GGUFTensorInfo[] = [];
  const shardByTensor = new Map<string, GGUFFile>();
  for (const shard of shards) {
    for (const tensor of shard.tensors) {
      if (shardByTensor.has(tensor.name)) throw new GGUFError("tensor_infos", -1, `tensor "${tensor.name}" is in two shards (${shardByTensor.get(tensor.name)!.path} and ${shard.path})`);
      shardByTensor.set(tensor.name, shard);
      tensors.push(tensor);
    }
  }
  if (split.tensors !== undefined && split.tensors !== tensors.length) {
    throw new GGUFError(SPLIT_KEYS.tensors, -1, `${path}: ${SPLIT_KEYS.tensors} is ${split.tensors} but the ${split.count} shards hold ${tensors.length} tensors`);
  }
  return new GGUFSplitFile(shards, tensors, shardByTensor);
}

function describeFirst(path: string, index: number, count: number): string {
  const prefix = splitPrefix(path, index, count);
  return prefix === undefined ? `its split.no is ${index}` : splitPath(prefix, 0, count);
}

export interface SplitOptions {
  /** Tensors per shard (gguf-split --split-max-tensors; its default is 128). */
  readonly maxTensors?: number;
  /** Bytes of tensor data per shard (gguf-split --split-max-size), each tensor counted padded to 32 bytes; a tensor larger than this gets a shard of its own. */
  readonly maxBytes?: number;
  /** The first shard holds the metadata alone (gguf-split --no-tensor-first-split). */
  readonly noTensorFirstSplit?: boolean;
}

export interface SplitPlan {
  /** The shards' paths and the names of their tensors, in order. */
  readonly shards: ReadonlyArray<{ readonly path: string; readonly tensors: readonly string[]; readonly bytes: number }>;
}

const PADDING = 32;
const padded = (bytes: number) => Math.ceil(bytes / PADDING) * PADDING;

/**
 * Which tensors go in which shard when `file` is split with `options` (gguf-split's split_strategy:
 * tensors in file order; a new shard when the count reaches maxTensors or the padded size would pass
 * maxBytes), the shards named PREFIX-0000i-of-0000n.gguf.
 *
 * @throws RangeError for no limit or a limit below 1, or a shard that would hold no tensor.
 */
export function planSplit(file: GGUFFile, prefix: string, options: SplitOptions): SplitPlan {
  if ((options.maxTensors === undefined) === (options.maxBytes === undefined)) throw new RangeError("split: give one of maxTensors and maxBytes");
  const limit = options.maxTensors ?? options.maxBytes!;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`split: ${options.maxTensors !== undefined ? "maxTensors" : "maxBytes"} must be a whole number of at least 1, got ${limit}`);
  const groups: Array<{ tensors: string[]; bytes: number }> = [{ tensors: [], bytes: 0 }];
  if (options.noTensorFirstSplit) groups.push({ tensors: [], bytes: 0 });
  let current = 0;
  file.tensors.forEach((tensor, i) => {
    const size = padded(tensor.byteSize);
    const next = current + size;
    const split = options.maxTensors !== undefined ? i > 0 && i % options.maxTensors === 0 : next > options.maxBytes!;
    if (split) {
      if (groups.at(-1)!.tensors.length === 0) throw new RangeError(`split: a shard would hold no tensor (maxBytes ${options.maxBytes} is below the first tensor's ${size} bytes)`);
      groups.push({ tensors: [], bytes: 0 });
      current = size;
    } else current = next;
    groups.at(-1)!.tensors.push(tensor.name);
    groups.at(-1)!.bytes += tensor.byteSize;
  });
  return { shards: groups.map((g, i) => ({ path: splitPath(prefix, i, groups.length), tensors: g.tensors, bytes: g.bytes })) };
}

/**
 * Writes `file` as shards PREFIX-0000i-of-0000n.gguf as llama.cpp's gguf-split --split does: the
 * first shard with all of the metadata, every shard with split.no, split.count and
 * split.tensors.count, the tensor bytes unchanged. Each shard is written under a temporary name and
 * renamed when complete. Returns the plan it wrote.
 */
export async function splitGGUF(file: GGUFFile, prefix: string, options: SplitOptions): Promise<SplitPlan> {
  const plan = planSplit(file, prefix, options);
  const count = plan.shards.length;
  const infos = new Map(file.tensors.map((t) => [t.name, t]));
  for (const shard of plan.shards) {
    if (file.path !== undefined && sameFile(file.path, shard.path)) throw new RangeError(`split: the shard ${shard.path} would overwrite the input`);
  }
  const written: string[] = [];
  try {
    for (const [index, shard] of plan.shards.entries()) {
      const metadata = new Map<string, GGUFValue>(index === 0 ? file.metadata : []);
      for (const [key, value] of [
        // in gguf-split's order: it sets split.count again last, which moves it after split.tensors.count
        [SPLIT_KEYS.index, { type: "uint16", value: index }],
        [SPLIT_KEYS.tensors, { type: "int32", value: file.tensors.length }],
        [SPLIT_KEYS.count, { type: "uint16", value: count }],
      ] as const) {
        metadata.delete(key);
        metadata.set(key, value);
      }
      const tensors: GGUFTensorToWrite[] = shard.tensors.map((name) => {
        const info = infos.get(name)!;
        return { name, type: info.type, shape: info.shape, data: () => file.tensorData(info) };
      });
      const temporary = `${shard.path}.partial-${process.pid}`;
      written.push(temporary);
      await writeGGUFFile(temporary, { version: 3, metadata, tensors });
    }
    plan.shards.forEach((shard, i) => renameSync(written[i]!, shard.path));
  } catch (error) {
    for (const path of written) rmSync(path, { force: true });
    throw error;
  }
  return plan;
}

/**
 * Writes the split model whose first shard is `first` as one file, as gguf-split --merge does: the
 * first shard's metadata with split.count set to 0, every shard's tensors in order.
 */
export async function mergeGGUF(first: string, output: string): Promise<GGUFFile> {
  const model = openGGUFModel(first);
  if (!(model instanceof GGUFSplitFile)) throw new GGUFError(SPLIT_KEYS.count, -1, `${first} is not a split model (no ${SPLIT_KEYS.count} above 1)`);
  for (const path of model.paths) if (sameFile(path, output)) throw new RangeError(`merge: the output ${output} is one of the shards`);
  const metadata = new Map(model.metadata);
  metadata.delete(SPLIT_KEYS.count);
  metadata.set(SPLIT_KEYS.count, { type: "uint16", value: 0 });
  const tensors: GGUFTensorToWrite[] = model.tensors.map((info) => ({ name: info.name, type: info.type, shape: info.shape, data: () => model.tensorData(info) }));
  await writeGGUFFileComplete(output, { version: 3, metadata, tensors });
  return model;
}
