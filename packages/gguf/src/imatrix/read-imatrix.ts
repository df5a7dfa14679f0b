/**
 * Reads an importance matrix in either of llama.cpp's formats, as common/imatrix-loader.cpp does:
 * GGUF (what llama-imatrix writes by default) or the legacy `.dat` format (`--output-format dat`),
 * told apart by the GGUF magic. Stricter than the loader where it would read garbage: every length
 * is checked against the bytes that remain before anything is allocated, and a file llama-quantize
 * would refuse (a GGUF without the imatrix metadata) is refused here.
 */
import { readFileSync } from "node:fs";
import { GGMLType, ggmlTypeName } from "../ggml-type";
import { GGUFError } from "../gguf-error";
import type { GGUFFile, GGUFTensorInfo } from "../gguf-file";
import { GGUF_MAGIC, readGGUF } from "../read-gguf";
import { IMATRIX_COUNTS_SUFFIX, IMATRIX_GENERAL_TYPE, IMATRIX_KEYS, IMATRIX_SUMS_SUFFIX, type Imatrix, type ImatrixEntry, imatrixNameOrder } from "./imatrix";
import { ImatrixError } from "./imatrix-error";

/**
 * The importance matrix in the file at `path` (GGUF or legacy).
 * @throws ImatrixError naming the file, the field and its byte offset.
 */
export function readImatrix(path: string): Imatrix {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new ImatrixError(path, "file", -1, `cannot read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseImatrix(bytes, path);
}

/** readImatrix of a file held in memory; `path` names it in errors. */
export function parseImatrix(bytes: Uint8Array, path = "<memory>"): Imatrix {
  const isGGUF = bytes.byteLength >= 4 && new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === GGUF_MAGIC;
  return isGGUF ? parseGGUFImatrix(bytes, path) : parseLegacyImatrix(bytes, path);
}

// ---- GGUF ----

function parseGGUFImatrix(bytes: Uint8Array, path: string): Imatrix {
  let file: GGUFFile;
  try {
    file = readGGUF(bytes, { path });
  } catch (error) {
    if (!(error instanceof GGUFError)) throw error;
    const prefix = `${error.field} at byte ${error.offset}: `;
    throw new ImatrixError(path, error.field, error.offset, error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message);
  }
  const fail = (field: string, offset: number, problem: string): never => {
    throw new ImatrixError(path, field, offset, problem);
  };
  const keyOffset = (key: string) => headerOffsetOf(file, key);

  const generalType = file.metadata.get(IMATRIX_KEYS.type);
  if (generalType !== undefined && (generalType.type !== "string" || generalType.value !== IMATRIX_GENERAL_TYPE)) {
    fail(`kv["${IMATRIX_KEYS.type}"]`, keyOffset(IMATRIX_KEYS.type), `not an imatrix file (general.type is ${generalType.type === "string" ? `"${generalType.value}"` : `a ${generalType.type}`})`);
  }
  // llama-quantize's load_imatrix refuses a GGUF imatrix without these three
  const datasetsValue = file.metadata.get(IMATRIX_KEYS.datasets);
  const chunkCountValue = file.metadata.get(IMATRIX_KEYS.chunkCount);
  const chunkSizeValue = file.metadata.get(IMATRIX_KEYS.chunkSize);
  for (const [key, value] of [[IMATRIX_KEYS.datasets, datasetsValue], [IMATRIX_KEYS.chunkCount, chunkCountValue], [IMATRIX_KEYS.chunkSize, chunkSizeValue]] as const) {
    if (value === undefined) fail(`kv["${key}"]`, -1, "missing (llama-quantize refuses an imatrix file without its metadata)");
  }
  if (datasetsValue!.type !== "array" || datasetsValue!.itemType !== "string") {
    fail(`kv["${IMATRIX_KEYS.datasets}"]`, keyOffset(IMATRIX_KEYS.datasets), `must be an array of strings, found ${describeType(datasetsValue!)}`);
  }
  const unsigned = (key: string, value: NonNullable<typeof chunkCountValue>): number => {
    if (value.type !== "uint32") return fail(`kv["${key}"]`, keyOffset(key), `must be uint32, found ${describeType(value)}`);
    return value.value;
  };
  const chunkCount = unsigned(IMATRIX_KEYS.chunkCount, chunkCountValue!);
  const chunkSize = unsigned(IMATRIX_KEYS.chunkSize, chunkSizeValue!);
  if (file.tensors.length === 0) fail("tensor_count", 8, "no data (the file has no tensors)");

  const pairs = new Map<string, { sums?: GGUFTensorInfo; counts?: GGUFTensorInfo }>();
  for (const tensor of file.tensors) {
    const suffix = tensor.name.endsWith(IMATRIX_SUMS_SUFFIX) ? IMATRIX_SUMS_SUFFIX : tensor.name.endsWith(IMATRIX_COUNTS_SUFFIX) ? IMATRIX_COUNTS_SUFFIX : undefined;
    if (suffix === undefined || tensor.name.length === suffix.length) continue; // the loader skips other tensors
    const name = tensor.name.slice(0, -suffix.length);
    const pair = pairs.get(name) ?? {};
    if (suffix === IMATRIX_SUMS_SUFFIX) pair.sums = tensor;
    else pair.counts = tensor;
    pairs.set(name, pair);
  }

  const entries = new Map<string, ImatrixEntry>();
  for (const name of [...pairs.keys()].sort(imatrixNameOrder)) {
    const { sums, counts } = pairs.get(name)!;
    if (!sums || !counts) {
      const present = (sums ?? counts)!;
      fail(`tensor "${present.name}"`, headerOffsetOf(file, present.name), `has no ${sums ? "counts" : "sums"} tensor "${name}${sums ? IMATRIX_COUNTS_SUFFIX : IMATRIX_SUMS_SUFFIX}" beside it`);
    }
    for (const tensor of [sums!, counts!]) {
      if (tensor.type !== GGMLType.F32) fail(`tensor "${tensor.name}".type`, headerOffsetOf(file, tensor.name), `must be f32, found ${ggmlTypeName(tensor.type)}`);
    }
    // counts: [1, matrices]; sums: [columns, matrices] (ggml drops trailing dimensions of 1 when it writes)
    const matrices = counts!.elementCount;
    const countsShape = counts!.shape;
    if (matrices === 0 || (countsShape[0] ?? 1) !== 1 || product(countsShape.slice(2)) !== 1) {
      fail(`tensor "${counts!.name}".dimensions`, headerOffsetOf(file, counts!.name), `shape [${countsShape.join(", ")}] is not [1, matrices]`);
    }
    const sumsShape = sums!.shape;
    const columns = sumsShape[0] ?? 1;
    if (sums!.elementCount === 0 || (sumsShape[1] ?? 1) !== matrices || product(sumsShape.slice(2)) !== 1) {
      fail(
        `tensor "${sums!.name}".dimensions`,
        headerOffsetOf(file, sums!.name),
        `shape [${sumsShape.join(", ")}] is not [columns, ${matrices}] (${matrices} count${matrices === 1 ? "" : "s"} in "${counts!.name}")`,
      );
    }
    const countsData = floats(file.tensorData(counts!));
    const countsStart = file.dataOffset + counts!.offset;
    const countValues: number[] = [];
    for (let j = 0; j < matrices; j++) {
      const value = countsData[j]!;
      if (!Number.isFinite(value) || value < 0) fail(`tensor "${counts!.name}".data[${j}]`, countsStart + 4 * j, `count ${value} is not a non-negative number`);
      countValues.push(Math.round(value)); // std::lround of a non-negative value
    }
    const sumsData = floats(file.tensorData(sums!));
    const sumsStart = file.dataOffset + sums!.offset;
    for (let i = 0; i < sumsData.length; i++) {
      if (!Number.isFinite(sumsData[i]!)) fail(`tensor "${sums!.name}".data[${i}]`, sumsStart + 4 * i, `sum ${sumsData[i]} is not finite (column ${i % columns} of matrix ${Math.floor(i / columns)})`);
    }
    entries.set(name, { sums: sumsData, counts: countValues });
  }
  const datasets = [...((datasetsValue as { items: string[] }).items)];
  return { entries, datasets, chunkCount, chunkSize, legacy: false };
}

/** A copy of f32 little-endian tensor bytes. */
function floats(bytes: Uint8Array): Float32Array {
  const out = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

function product(values: readonly number[]): number {
  return values.reduce((p, v) => p * v, 1);
}

function describeType(value: { type: string; itemType?: string }): string {
  return value.type === "array" ? `an array of ${value.itemType}` : value.type;
}

/**
 * Where a key or tensor info starts in the header: the first occurrence of the name as GGUF
 * stores it (uint64 length, then the bytes) before the data section; -1 when not found.
 */
function headerOffsetOf(file: GGUFFile, name: string): number {
  const text = Buffer.from(name, "utf8");
  const pattern = Buffer.alloc(8 + text.byteLength);
  pattern.writeBigUInt64LE(BigInt(text.byteLength), 0);
  text.copy(pattern, 8);
  const header = Buffer.from(file.header.buffer, file.header.byteOffset, Math.min(file.dataOffset, file.header.byteLength));
  return header.indexOf(pattern);
}

// ---- legacy .dat ----

/**
 * llama-imatrix's `--output-format dat` (save_imatrix_legacy): int32 entry count; per entry int32
 * name length, the name, int32 ncall, int32 nval, nval f32 (sum / count * ncall); then, optionally,
 * int32 chunk count, int32 dataset name length and the name. All little-endian.
 */
function parseLegacyImatrix(bytes: Uint8Array, path: string): Imatrix {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const fail = (field: string, offset: number, problem: string): never => {
    throw new ImatrixError(path, field, offset, problem);
  };
  const remaining = () => bytes.byteLength - at;
  const int32 = (field: string): number => {
    if (remaining() < 4) fail(field, at, `file is truncated (needs 4 bytes, ${remaining()} remain)`);
    const value = view.getInt32(at, true);
    at += 4;
    return value;
  };
  if (bytes.byteLength < 4) fail("magic", 0, "neither a GGUF file nor a legacy imatrix (too short)");
  const countOffset = at;
  const entryCount = int32("n_entries");
  // the smallest entry: name length, an empty name, ncall, nval and one float
  if (entryCount < 1) fail("n_entries", countOffset, `${entryCount} entries: no data (or not an imatrix file)`);
  if (entryCount * 16 > remaining()) fail("n_entries", countOffset, `${entryCount} entries cannot fit in the ${remaining()} bytes that remain (not an imatrix file?)`);
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const entries = new Map<string, ImatrixEntry>();
  for (let i = 0; i < entryCount; i++) {
    const field = `entries[${i}]`;
    const lengthOffset = at;
    const length = int32(`${field}.name_length`);
    if (length < 0 || length > remaining()) fail(`${field}.name_length`, lengthOffset, `name length ${length} exceeds the ${remaining()} bytes that remain`);
    let name: string;
    try {
      name = decoder.decode(bytes.subarray(at, at + length)).split("\0")[0]!;
    } catch {
      return fail(`${field}.name`, at, "name is not valid UTF-8");
    }
    at += length;
    if (entries.has(name)) fail(`${field}.name`, lengthOffset, `duplicate entry "${name}"`);
    const ncall = int32(`${field}.ncall`);
    const valuesOffset = at;
    const count = int32(`${field}.nval`);
    if (count < 1) fail(`${field}.nval`, valuesOffset, `${count} values ("${name}")`);
    if (count * 4 > remaining()) fail(`${field}.nval`, valuesOffset, `${count} values need ${count * 4} bytes, ${remaining()} remain ("${name}")`);
    const sums = floats(bytes.subarray(at, at + count * 4));
    for (let j = 0; j < count; j++) {
      if (!Number.isFinite(sums[j]!)) fail(`${field}.values[${j}]`, at + 4 * j, `value ${sums[j]} is not finite ("${name}")`);
    }
    at += count * 4;
    entries.set(name, { sums, counts: [ncall] });
  }
  // the trailing chunk count and dataset name are optional
  let chunkCount = 0;
  const datasets: string[] = [];
  if (remaining() > 0) {
    chunkCount = int32("chunk_count");
    if (remaining() > 0) {
      const lengthOffset = at;
      const length = int32("dataset_length");
      if (length < 0 || length > remaining()) fail("dataset_length", lengthOffset, `dataset name length ${length} exceeds the ${remaining()} bytes that remain`);
      if (length > 0) {
        try {
          datasets.push(decoder.decode(bytes.subarray(at, at + length)).split("\0")[0]!);
        } catch {
          fail("dataset", at, "dataset name is not valid UTF-8");
        }
        at += length;
      }
      if (remaining() > 0) fail("dataset", at, `${remaining()} unexpected bytes after the dataset name`);
    }
  }
  const sorted = new Map([...entries].sort(([a], [b]) => imatrixNameOrder(a, b)));
  return { entries: sorted, datasets, chunkCount, chunkSize: 0, legacy: true };
}
