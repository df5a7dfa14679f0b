/**
 * KV state files: the keys and values of a token sequence saved to disk, so that a later process
 * skips evaluating them (llama.cpp's session files: llama-cli's `--prompt-cache`,
 * `llama_state_seq_save_file`). Loading one puts its whole blocks into the engine's prefix cache, so
 * every generation whose prompt starts with the saved tokens reuses them, as it reuses the prompts
 * of earlier generations.
 *
 * Layout: the magic "MEMRAKVS", a u32 format version, a u32 header length, the header (JSON:
 * KVStateHeader), zero padding to a multiple of 8, then per layer its keys' rows and its values'
 * rows, one row per token in Backend.readKVRows's form (independent of the backend and of the
 * block size that stored them).
 */
import { closeSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { GGMLType, type GGUFFile, dequantize, quantize } from "@memra/gguf";
import { z } from "zod";
import { type KVType, kvRowBytes } from "./backend";

const MAGIC = "MEMRAKVS";
const FORMAT_VERSION = 1;
/** The header is small (tokens and metadata); a longer length field is a damaged file. */
const MAX_HEADER_BYTES = 64 * 1024 * 1024;

/** A state file that cannot be read, or was saved by another model: names the file and what is wrong. */
export class KVStateError extends Error {
  override readonly name = "KVStateError";
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`KV state ${path}: ${reason}`);
  }
}

const headerSchema = z.object({
  /** The model's fingerprint (Model.fingerprint): the weights the keys and values were computed with. */
  model: z.string(),
  architecture: z.string(),
  layers: z.number().int().positive(),
  kvWidth: z.number().int().positive(),
  kvType: z.enum(["f32", "f16", "q8_0"]),
  tokens: z.array(z.number().int().nonnegative()),
  /** The LoRA adapters the keys and values were computed with: file names and scales, when a scale is not 0. */
  lora: z.array(z.object({ name: z.string(), scale: z.number() })).optional(),
  /** What the saver kept beside the state (a chat session's messages). */
  metadata: z.unknown().optional(),
});

export type KVStateHeader = z.infer<typeof headerSchema>;

/** A state file opened for loading: its header, and its rows (memory-mapped). */
export interface KVStateFile {
  readonly path: string;
  readonly header: KVStateHeader;
  /** Rows [first, first + count) of a layer's keys (values: false) or values, in `kvType` (converted from the file's). */
  rows(layer: number, values: boolean, first: number, count: number, kvType: KVType): Uint8Array;
}

function headerPrefix(header: KVStateHeader): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const start = 16 + json.byteLength;
  const out = new Uint8Array(Math.ceil(start / 8) * 8);
  out.set(new TextEncoder().encode(MAGIC));
  const view = new DataView(out.buffer);
  view.setUint32(8, FORMAT_VERSION, true);
  view.setUint32(12, json.byteLength, true);
  out.set(json, 16);
  return out;
}

/**
 * Writes a state file: the header, then each layer's keys and values from `rows(layer, values)`
 * (all the header's tokens, in the header's kvType). Written to a temporary file beside `path`
 * and renamed over it, so that a failure leaves an earlier file as it was.
 */
export function writeKVStateFile(path: string, header: KVStateHeader, rows: (layer: number, values: boolean) => Uint8Array): number {
  const rowBytes = kvRowBytes(header.kvType, header.kvWidth);
  const temporary = `${path}.${process.pid}.tmp`;
  let descriptor: number | undefined;
  try {
    descriptor = openSync(temporary, "w");
    let written = writeSync(descriptor, headerPrefix(header));
    for (let layer = 0; layer < header.layers; layer++) {
      for (const values of [false, true]) {
        const bytes = rows(layer, values);
        if (bytes.byteLength !== header.tokens.length * rowBytes) throw new Error(`layer ${layer} ${values ? "values" : "keys"}: ${bytes.byteLength} bytes for ${header.tokens.length} rows of ${rowBytes}`);
        for (let offset = 0; offset < bytes.byteLength; ) offset += writeSync(descriptor, bytes, offset);
        written += bytes.byteLength;
      }
    }
    closeSync(descriptor);
    descriptor = undefined;
    renameSync(temporary, path);
    return written;
  } catch (error) {
    if (descriptor !== undefined) closeSync(descriptor);
    rmSync(temporary, { force: true });
    throw error;
  }
}

const GGML_KV_TYPES: Record<KVType, GGMLType> = { f32: GGMLType.F32, f16: GGMLType.F16, q8_0: GGMLType.Q8_0 };

/** Rows of `width` values from one KV type to another (through f32). */
export function convertKVRows(bytes: Uint8Array, from: KVType, to: KVType, width: number): Uint8Array {
  if (from === to) return bytes;
  const count = bytes.byteLength / kvRowBytes(from, width);
  const values = new Float32Array(count * width);
  if (from === "f32") values.set(new Float32Array(bytes.slice().buffer));
  else dequantize(GGML_KV_TYPES[from], bytes, values.length, values);
  return to === "f32" ? new Uint8Array(values.buffer) : quantize(GGML_KV_TYPES[to], values);
}

/** Opens a state file: checks its magic, version, header and size; the rows are read on demand. */
export function openKVStateFile(path: string): KVStateFile {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (error) {
    throw new KVStateError(path, `cannot be read (${(error as Error).message})`);
  }
  if (size < 16) throw new KVStateError(path, `${size} bytes: too short for a state file`);
  const bytes = Bun.mmap(path, { shared: false });
  if (new TextDecoder().decode(bytes.subarray(0, 8)) !== MAGIC) throw new KVStateError(path, `not a Memra KV state file (no "${MAGIC}" at byte 0)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint32(8, true);
  if (version !== FORMAT_VERSION) throw new KVStateError(path, `format version ${version} at byte 8; this build reads version ${FORMAT_VERSION}`);
  const headerBytes = view.getUint32(12, true);
  if (headerBytes > MAX_HEADER_BYTES || 16 + headerBytes > size) throw new KVStateError(path, `header of ${headerBytes} bytes (byte 12) runs past the file's ${size} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(16, 16 + headerBytes)));
  } catch (error) {
    throw new KVStateError(path, `header at byte 16 is not JSON (${(error as Error).message})`);
  }
  const parsed = headerSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new KVStateError(path, `header field ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  const header = parsed.data;
  const dataOffset = Math.ceil((16 + headerBytes) / 8) * 8;
  const rowBytes = kvRowBytes(header.kvType, header.kvWidth);
  const layerBytes = header.tokens.length * rowBytes;
  const expected = dataOffset + header.layers * 2 * layerBytes;
  if (size !== expected) throw new KVStateError(path, `${size} bytes; its header (${header.tokens.length} tokens, ${header.layers} layers of ${header.kvType} rows of ${header.kvWidth}) needs ${expected}`);
  return {
    path,
    header,
    rows(layer, values, first, count, kvType) {
      if (layer < 0 || layer >= header.layers || first < 0 || first + count > header.tokens.length) throw new RangeError(`rows [${first}, ${first + count}) of layer ${layer} outside the state`);
      const start = dataOffset + (layer * 2 + (values ? 1 : 0)) * layerBytes + first * rowBytes;
      return convertKVRows(bytes.subarray(start, start + count * rowBytes), header.kvType, kvType, header.kvWidth);
    },
  };
}

/** Bytes hashed from each end of every tensor for a fingerprint. */
const FINGERPRINT_SAMPLE_BYTES = 4096;

/**
 * What the keys and values of a model depend on, as a 64-bit hash (hex): the tensors' names, types
 * and shapes, 4 KiB from each end of every tensor's data, and the attention's dimensions (RoPE and
 * its scaling among them). Two files of the same weights give the same fingerprint; a model with
 * other weights (another seed, another quantization) gives another.
 */
export function modelFingerprint(file: GGUFFile, dimensions: unknown): string {
  let hash = BigInt(Bun.hash.wyhash(JSON.stringify(dimensions)));
  const mix = (data: string | Uint8Array) => {
    hash = BigInt.asUintN(64, BigInt(Bun.hash.wyhash(data, hash)));
  };
  for (const tensor of file.tensors) {
    mix(JSON.stringify([tensor.name, tensor.type, tensor.shape, tensor.byteSize]));
    const data = file.tensorData(tensor);
    mix(data.subarray(0, FINGERPRINT_SAMPLE_BYTES));
    mix(data.subarray(Math.max(0, data.byteLength - FINGERPRINT_SAMPLE_BYTES)));
  }
  return hash.toString(16).padStart(16, "0");
}
