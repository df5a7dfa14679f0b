/**
 * readImatrix on llama-imatrix's own files (packages/core/src/__fixtures__/imatrix, recorded by
 * tools/llamacpp/imatrix-goldens.ts), on the legacy .dat format, and on damaged files: every problem
 * is an ImatrixError naming the file, the field and its byte offset, never another exception.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GGMLType } from "../ggml-type";
import { type GGUFValue, ggufValue } from "../gguf-value";
import { type GGUFTensorToWrite, writeGGUF } from "../write-gguf";
import { ImatrixError } from "./imatrix-error";
import { parseImatrix, readImatrix } from "./read-imatrix";
import { encodeImatrix } from "./write-imatrix";

const GOLDENS = new URL("../../../core/src/__fixtures__/imatrix/", import.meta.url);
const golden = (file: string) => new URL(file, GOLDENS).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-imatrix-"));

/** An imatrix GGUF with the given metadata (the valid keys by default) and raw tensors. */
function imatrixFile(tensors: GGUFTensorToWrite[], metadata: Record<string, GGUFValue | undefined> = {}): Uint8Array {
  const keys: Record<string, GGUFValue | undefined> = {
    "general.type": ggufValue.string("imatrix"),
    "imatrix.datasets": ggufValue.stringArray(["calibration.txt"]),
    "imatrix.chunk_count": ggufValue.uint32(2),
    "imatrix.chunk_size": ggufValue.uint32(64),
    ...metadata,
  };
  return writeGGUF({ metadata: new Map(Object.entries(keys).filter((entry): entry is [string, GGUFValue] => entry[1] !== undefined)), tensors });
}

const f32 = (...values: number[]) => new Uint8Array(Float32Array.from(values).buffer);
const tensor = (name: string, shape: number[], values: number[], type = GGMLType.F32): GGUFTensorToWrite => ({ name, type, shape, data: f32(...values) });
const dense = (name = "blk.0.attn_q.weight", sums = [1, 2, 3, 4], count = 128) => [tensor(`${name}.in_sum2`, [sums.length], sums), tensor(`${name}.counts`, [1], [count])];

/** The ImatrixError `parse` throws (failing when it throws none or another). */
function imatrixError(parse: () => unknown): ImatrixError {
  try {
    parse();
  } catch (error) {
    if (error instanceof ImatrixError) return error;
    throw new Error(`expected an ImatrixError, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
  }
  throw new Error("expected an ImatrixError, nothing was thrown");
}

/** A legacy .dat file as save_imatrix_legacy writes it. */
function legacyFile(entries: Array<{ name: string; ncall: number; values: number[] }>, trailer?: { chunks: number; dataset?: string }): Uint8Array {
  const parts: Uint8Array[] = [];
  const int32 = (value: number) => new Uint8Array(Int32Array.of(value).buffer);
  parts.push(int32(entries.length));
  for (const entry of entries) {
    const name = new TextEncoder().encode(entry.name);
    parts.push(int32(name.length), name, int32(entry.ncall), int32(entry.values.length), f32(...entry.values));
  }
  if (trailer) {
    parts.push(int32(trailer.chunks));
    if (trailer.dataset !== undefined) {
      const dataset = new TextEncoder().encode(trailer.dataset);
      parts.push(int32(dataset.length), dataset);
    }
  }
  return Buffer.concat(parts);
}

describe("readImatrix on llama-imatrix's files", () => {
  it("reads a dense model's: every matmul weight of the blocks, one count each, the metadata", () => {
    const imatrix = readImatrix(golden("dense-f32-c64.gguf"));
    expect(imatrix.legacy).toBe(false);
    expect(imatrix.datasets).toEqual(["packages/core/src/__fixtures__/imatrix/calibration.txt"]);
    expect({ chunkCount: imatrix.chunkCount, chunkSize: imatrix.chunkSize }).toEqual({ chunkCount: 4, chunkSize: 64 });
    const names = ["attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up"];
    expect([...imatrix.entries.keys()]).toEqual([0, 1].flatMap((layer) => names.map((name) => `blk.${layer}.${name}.weight`)));
    for (const [name, entry] of imatrix.entries) {
      expect(entry.counts, name).toEqual([256]); // 4 chunks of 64 tokens
      expect(entry.sums.length, name).toBe(name.includes("ffn_down") ? 512 : 256);
      expect(entry.sums.every((sum) => sum >= 0 && Number.isFinite(sum)), name).toBe(true);
    }
  });

  it("reads a MoE model's: per-expert sums and counts (2 of 8 experts for each of 256 tokens), the router as a dense weight", () => {
    const imatrix = readImatrix(golden("moe-f32-c64.gguf"));
    const experts = imatrix.entries.get("blk.0.ffn_up_exps.weight")!;
    expect(experts.counts).toHaveLength(8);
    expect(experts.counts.reduce((sum, count) => sum + count, 0)).toBe(2 * 256);
    expect(experts.sums).toHaveLength(8 * 256);
    expect(imatrix.entries.get("blk.0.ffn_down_exps.weight")!.counts).toEqual(experts.counts);
    expect(imatrix.entries.get("blk.0.ffn_gate_inp.weight")!.counts).toEqual([256]);
  });

  it("reads output.weight of --process-output, and a file of experts only (chunks of 12 rows: no dense matmul counted)", () => {
    expect(readImatrix(golden("dense-untied-f32-c74-output.gguf")).entries.get("output.weight")!.counts).toEqual([296]);
    const small = readImatrix(golden("moe-f32-c12-chunks1.gguf"));
    expect([...small.entries.keys()].every((name) => name.includes("_exps"))).toBe(true);
    expect(small.chunkCount).toBe(0);
  });
});

describe("readImatrix on the legacy .dat format", () => {
  it("reads entries (ncall as the single count), the trailing chunk count and dataset; sorts the names", () => {
    const path = join(directory, "legacy.dat");
    writeFileSync(path, legacyFile([{ name: "blk.1.ffn_up.weight", ncall: 10, values: [0.5, 1.5] }, { name: "blk.0.attn_q.weight", ncall: 10, values: [2, 4, 8] }], { chunks: 10, dataset: "wiki.train.raw" }));
    const imatrix = readImatrix(path);
    expect(imatrix.legacy).toBe(true);
    expect([...imatrix.entries.keys()]).toEqual(["blk.0.attn_q.weight", "blk.1.ffn_up.weight"]);
    expect([...imatrix.entries.get("blk.0.attn_q.weight")!.sums]).toEqual([2, 4, 8]);
    expect(imatrix.entries.get("blk.0.attn_q.weight")!.counts).toEqual([10]);
    expect({ chunkCount: imatrix.chunkCount, chunkSize: imatrix.chunkSize, datasets: imatrix.datasets }).toEqual({ chunkCount: 10, chunkSize: 0, datasets: ["wiki.train.raw"] });
  });

  it("takes the trailer as optional, as llama.cpp's loader does", () => {
    const bare = parseImatrix(legacyFile([{ name: "blk.0.attn_q.weight", ncall: 3, values: [1] }]));
    expect({ chunkCount: bare.chunkCount, datasets: bare.datasets }).toEqual({ chunkCount: 0, datasets: [] });
    expect(parseImatrix(legacyFile([{ name: "blk.0.attn_q.weight", ncall: 3, values: [1] }], { chunks: 7 })).chunkCount).toBe(7);
  });

  it("names the field and offset of a damaged legacy file", () => {
    const good = legacyFile([{ name: "blk.0.attn_q.weight", ncall: 3, values: [1, 2] }], { chunks: 3, dataset: "x.txt" });
    expect(imatrixError(() => parseImatrix(good.subarray(0, 33), "cut.dat"))).toMatchObject({ path: "cut.dat", field: "entries[0].nval" });
    const noEntries = legacyFile([]);
    expect(imatrixError(() => parseImatrix(noEntries, "empty.dat")).message).toBe("empty.dat: n_entries at byte 0: 0 entries: no data (or not an imatrix file)");
    const huge = new Uint8Array(good);
    new DataView(huge.buffer).setInt32(4 + 4 + 19 + 4, 1 << 28, true); // nval
    expect(imatrixError(() => parseImatrix(huge))).toMatchObject({ field: "entries[0].nval", offset: 31 });
    const negativeName = new Uint8Array(good);
    new DataView(negativeName.buffer).setInt32(4, -5, true);
    expect(imatrixError(() => parseImatrix(negativeName))).toMatchObject({ field: "entries[0].name_length", offset: 4 });
    expect(imatrixError(() => parseImatrix(Buffer.concat([good, Uint8Array.of(1)])))).toMatchObject({ field: "dataset" });
    expect(imatrixError(() => parseImatrix(new Uint8Array(2), "two.dat")).message).toContain("too short");
  });
});

describe("readImatrix on damaged GGUF files", () => {
  it("reads a minimal valid file (the base of the cases below)", () => {
    const imatrix = parseImatrix(imatrixFile(dense()));
    expect([...imatrix.entries.keys()]).toEqual(["blk.0.attn_q.weight"]);
    expect(imatrix.entries.get("blk.0.attn_q.weight")!.counts).toEqual([128]);
  });

  it("gives an ImatrixError, never another exception, for every truncation of a file that cuts data", () => {
    const bytes = readFileSync(golden("dense-f32-c64.gguf"));
    // the last tensor (blk.1.ffn_up.weight.counts, 4 bytes) is followed by 28 bytes of alignment padding: a cut there loses nothing
    expect(parseImatrix(bytes.subarray(0, bytes.byteLength - 28)).entries.size).toBe(14);
    const cut = [4, 8, 23, 24, 100, 500, 1000, 1200, bytes.byteLength - 1000, bytes.byteLength - 29];
    for (let length = 0; length < 1300; length += 7) cut.push(length);
    for (const length of cut) {
      const error = imatrixError(() => parseImatrix(bytes.subarray(0, length), "cut.gguf"));
      expect(error.path).toBe("cut.gguf");
      expect(error.message).toMatch(/^cut\.gguf: /);
    }
    expect(imatrixError(() => parseImatrix(bytes.subarray(0, 1000), "cut.gguf")).problem).toMatch(/truncated|past the end|before the data section/);
  });

  it("names a sums tensor whose shape does not match its counts", () => {
    const error = imatrixError(() => parseImatrix(imatrixFile([tensor("blk.0.ffn_up_exps.weight.in_sum2", [2, 3], [1, 2, 3, 4, 5, 6]), tensor("blk.0.ffn_up_exps.weight.counts", [1, 2], [5, 6])]), "shape.gguf"));
    expect(error.field).toBe('tensor "blk.0.ffn_up_exps.weight.in_sum2".dimensions');
    expect(error.offset).toBeGreaterThan(0);
    expect(error.problem).toBe('shape [2, 3] is not [columns, 2] (2 counts in "blk.0.ffn_up_exps.weight.counts")');
  });

  it("names counts that are not [1, matrices], a lone sums or counts tensor, and a tensor that is not f32", () => {
    expect(imatrixError(() => parseImatrix(imatrixFile([tensor("w.in_sum2", [2, 2], [1, 2, 3, 4]), tensor("w.counts", [2], [1, 1])]))).field).toBe('tensor "w.counts".dimensions');
    expect(imatrixError(() => parseImatrix(imatrixFile([tensor("w.in_sum2", [2], [1, 2])]))).problem).toBe('has no counts tensor "w.counts" beside it');
    expect(imatrixError(() => parseImatrix(imatrixFile([tensor("w.counts", [1], [1])]))).problem).toBe('has no sums tensor "w.in_sum2" beside it');
    const f16 = { name: "w.in_sum2", type: GGMLType.F16, shape: [2], data: new Uint8Array(4) };
    expect(imatrixError(() => parseImatrix(imatrixFile([f16, tensor("w.counts", [1], [1])]))).problem).toBe("must be f32, found f16");
  });

  it("names a negative or non-finite count and a non-finite sum by its element and byte", () => {
    const bytes = imatrixFile(dense("w", [1, 2], -3));
    const error = imatrixError(() => parseImatrix(bytes));
    expect(error.field).toBe('tensor "w.counts".data[0]');
    expect(new DataView(bytes.buffer).getFloat32(error.offset, true)).toBe(-3);
    expect(imatrixError(() => parseImatrix(imatrixFile(dense("w", [1, Number.NaN])))).field).toBe('tensor "w.in_sum2".data[1]');
  });

  it("refuses what llama-quantize refuses or cannot read: missing metadata, wrong key types, another general.type, no tensors", () => {
    expect(imatrixError(() => parseImatrix(imatrixFile(dense(), { "imatrix.chunk_size": undefined }), "m.gguf")).message).toBe(
      'm.gguf: kv["imatrix.chunk_size"]: missing (llama-quantize refuses an imatrix file without its metadata)',
    );
    const wrongType = imatrixError(() => parseImatrix(imatrixFile(dense(), { "imatrix.chunk_count": ggufValue.int32(4) })));
    expect(wrongType).toMatchObject({ field: 'kv["imatrix.chunk_count"]', problem: "must be uint32, found int32" });
    expect(wrongType.offset).toBeGreaterThan(0);
    expect(imatrixError(() => parseImatrix(imatrixFile(dense(), { "imatrix.datasets": ggufValue.string("x") }))).problem).toBe("must be an array of strings, found string");
    expect(imatrixError(() => parseImatrix(imatrixFile(dense(), { "general.type": ggufValue.string("model") }))).problem).toBe('not an imatrix file (general.type is "model")');
    expect(imatrixError(() => parseImatrix(imatrixFile([]))).problem).toBe("no data (the file has no tensors)");
  });

  it("keeps the reader's own errors inside ImatrixError, with the GGUF field and offset", () => {
    const bytes = new Uint8Array(imatrixFile(dense()));
    new DataView(bytes.buffer).setUint32(4, 9, true); // version
    expect(imatrixError(() => parseImatrix(bytes, "v.gguf")).message).toBe("v.gguf: version at byte 4: unsupported GGUF version 9 (v2 and v3 are supported)");
    expect(imatrixError(() => readImatrix(join(directory, "absent.gguf"))).field).toBe("file");
  });

  it("survives random damage: every byte flip either reads or is an ImatrixError", () => {
    const original = encodeImatrix(parseImatrix(imatrixFile([...dense("a"), tensor("b.in_sum2", [2, 2], [1, 2, 3, 4]), tensor("b.counts", [1, 2], [3, 0])])));
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (let trial = 0; trial < 400; trial++) {
      const bytes = new Uint8Array(original);
      for (let flips = 0; flips < 3; flips++) bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
      try {
        parseImatrix(bytes, "flipped.gguf");
      } catch (error) {
        expect(error, `trial ${trial}: ${String(error)}`).toBeInstanceOf(ImatrixError);
      }
    }
  });
});
