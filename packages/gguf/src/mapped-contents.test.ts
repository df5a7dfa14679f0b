import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GGMLType } from "./ggml-type";
import { GGUFError } from "./gguf-error";
import type { GGUFFile, GGUFTensorInfo } from "./gguf-file";
import { type GGUFValue, ggufValue } from "./gguf-value";
import { MAPPING_ALIGNMENT, MappedContents, planMappingWindows } from "./mapped-contents";
import { openGGUF, parseGGUFHeader, readGGUF } from "./read-gguf";
import { Random } from "./testing/gguf-layout";
import { type GGUFTensorToWrite, encodeGGUFHeader, writeGGUF } from "./write-gguf";

const directory = mkdtempSync(join(tmpdir(), "memra-mapped-"));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const GiB = 2 ** 30;

/** 16 bytes that say which tensor and which end of it they were written at. */
function marker(name: string, end: "first" | "last"): Uint8Array {
  const bytes = new Uint8Array(16).fill(end === "first" ? 0xa5 : 0x5a);
  bytes.set(new TextEncoder().encode(`${name}:${end}`).subarray(0, 16));
  return bytes;
}

/** An f32 tensor of `bytes` bytes whose data are never produced (the file is written sparse). */
function hugeTensor(name: string, bytes: number): GGUFTensorToWrite {
  return {
    name,
    type: GGMLType.F32,
    shape: [1024, bytes / 4096],
    data: () => {
      throw new Error("not written");
    },
  };
}

describe("openGGUF of a file of 4 GiB and more", () => {
  it("lists the tensors of a sparse 9.5 GiB file and reads the bytes written past 4 GiB, mapping windows under 4 GiB", () => {
    // Only the header and 16 bytes at each end of each tensor are written; the rest is a hole.
    const tensors = [
      hugeTensor("blk.0.a", 1.5 * GiB), // [0, 1.5) GiB of data
      hugeTensor("blk.0.b", 1.5 * GiB), // [1.5, 3): a window of its own (a and b together pass 2 GiB)
      hugeTensor("blk.1.c", 2.5 * GiB), // [3, 5.5): larger than a window, so mapped alone
      { name: "blk.1.d", type: GGMLType.F32, shape: [1024], data: new Uint8Array(4096) }, // just past 5.5 GiB
      hugeTensor("blk.2.e", 4 * GiB), // too large for one mapping
      { name: "output_norm.weight", type: GGMLType.F32, shape: [64], data: new Uint8Array(256) }, // past 9.5 GiB
    ];
    const { header, layout, dataBytes } = encodeGGUFHeader({ metadata: { "general.architecture": ggufValue.string("qwen3") }, tensors });
    const path = join(directory, "sparse.gguf");
    const size = header.byteLength + dataBytes;
    expect(size).toBeGreaterThan(9.5 * GiB);
    writeFileSync(path, header);
    truncateSync(path, size);
    const written = layout.filter(({ tensor }) => tensor.name !== "blk.2.e");
    const fd = openSync(path, "r+");
    try {
      for (const { tensor, offset, size: bytes } of written) {
        writeSync(fd, marker(tensor.name, "first"), 0, 16, header.byteLength + offset);
        writeSync(fd, marker(tensor.name, "last"), 0, 16, header.byteLength + offset + bytes - 16);
      }
    } finally {
      closeSync(fd);
    }
    // Sparse: the file takes a few blocks of the disk, not 9.5 GiB.
    expect(statSync(path).blocks * 512).toBeLessThan(2 ** 20);

    try {
      const file = openGGUF(path);
      expect(file.fileBytes).toBe(size);
      expect(file.dataOffset).toBe(header.byteLength);
      expect(file.tensors.map((t) => [t.name, t.byteSize])).toEqual(layout.map(({ tensor, size: bytes }) => [tensor.name, bytes]));
      expect(file.getString("general.architecture")).toBe("qwen3");
      const windows = (file.contents as MappedContents).windows;
      expect(windows.map((w) => w.firstTensor)).toEqual(["blk.0.a", "blk.0.b", "blk.1.c", "blk.1.d", "blk.2.e", "output_norm.weight"]);
      for (const window of windows) {
        if (window.firstTensor !== "blk.2.e") expect(window.end - window.start).toBeLessThan(4 * GiB);
      }

      for (const { tensor, offset, size: bytes } of written) {
        const data = file.tensorData(tensor.name);
        expect(data.byteLength).toBe(bytes);
        expect(data.subarray(0, 16), tensor.name).toEqual(marker(tensor.name, "first"));
        expect(data.subarray(bytes - 16), tensor.name).toEqual(marker(tensor.name, "last"));
        expect(data[16], tensor.name).toBe(0);
        // Aligned in memory as in a mapping of the whole file.
        expect(data.byteOffset % MAPPING_ALIGNMENT).toBe((header.byteLength + offset) % MAPPING_ALIGNMENT);
      }
      expect(header.byteLength + layout[3]!.offset).toBeGreaterThan(4 * GiB);
      expect(() => file.tensorData("blk.2.e")).toThrow(GGUFError);
      expect(() => file.tensorData("blk.2.e")).toThrow(/tensor "blk\.2\.e" at byte \d+: its data are 4294967296 bytes \(4\.00 GiB\): a tensor of 4 GiB or more cannot be memory-mapped/);
    } finally {
      rmSync(path, { force: true });
    }
  });

  it("reports a tensor past the end of a file too large for one mapping as readGGUF does", () => {
    const tensors = [hugeTensor("a", 3 * GiB), hugeTensor("b", 2 * GiB)];
    const { header, dataBytes } = encodeGGUFHeader({ metadata: {}, tensors });
    const path = join(directory, "short.gguf");
    writeFileSync(path, header);
    truncateSync(path, header.byteLength + dataBytes - 32);
    try {
      expect(() => openGGUF(path)).toThrow(
        new RegExp(`^tensor "b"\\.offset at byte \\d+: data \\[${3 * GiB}, ${5 * GiB}\\) of f32 tensor lies past the end of the data section \\(${dataBytes - 32} bytes\\)$`),
      );
    } finally {
      rmSync(path, { force: true });
    }
  });
});

/** A file with every kind of header field and tensors of many sizes (some empty), alignment `alignment`. */
function sampleFile(alignment: number, random: Random): Uint8Array {
  const metadata: Record<string, GGUFValue> = {
    "general.alignment": ggufValue.uint32(alignment),
    "general.name": ggufValue.string("windows"),
    flag: ggufValue.bool(true),
    flags: ggufValue.array("bool", [true, false, true]),
    numbers: ggufValue.array("float32", Float32Array.from({ length: 40 }, (_, i) => i / 3)),
    big: ggufValue.uint64(2n ** 40n),
    tokens: ggufValue.stringArray(Array.from({ length: 50 }, (_, i) => `tok${i}é`)),
    nested: ggufValue.array("array", [{ type: "array", itemType: "int16", items: Int16Array.of(1, -2) }]),
  };
  const tensors: GGUFTensorToWrite[] = [];
  for (let i = 0; i < 24; i++) {
    const rows = [0, 1, 3, 40, 300, 2000][i % 6]!;
    const type = i % 2 === 0 ? GGMLType.F32 : GGMLType.Q8_0;
    const shape = [32, rows];
    const bytes = type === GGMLType.F32 ? 32 * 4 * rows : 34 * rows;
    tensors.push({ name: `t${i}`, type, shape, data: random.bytes(bytes) });
  }
  return writeGGUF({ metadata, tensors });
}

function expectSameFile(ours: GGUFFile, reference: GGUFFile): void {
  expect(ours.dataOffset).toBe(reference.dataOffset);
  expect(ours.metadata).toEqual(reference.metadata);
  expect(ours.tensors).toEqual(reference.tensors);
  for (const tensor of reference.tensors) {
    const data = ours.tensorData(tensor);
    expect(data.byteLength, tensor.name).toBe(tensor.byteSize);
    expect(Buffer.compare(data, reference.tensorData(tensor)), tensor.name).toBe(0);
  }
}

describe("openGGUF in windows", () => {
  it("opens a file through small windows and a small first header guess, with the bytes of a whole mapping", async () => {
    for (const alignment of [32, 8, 4096]) {
      const bytes = sampleFile(alignment, new Random(alignment));
      const path = join(directory, `sample-${alignment}.gguf`);
      writeFileSync(path, bytes);
      const whole = openGGUF(path);
      expect(whole.contents).not.toBeInstanceOf(MappedContents);
      // A Node Buffer too (its slice is a view: numeric arrays were once read from the buffer's start).
      expect(readGGUF(readFileSync(path)).metadata).toEqual(whole.metadata);
      for (const [windowBytes, headerBytes] of [
        [MAPPING_ALIGNMENT, 1],
        [100_000, 64],
        [bytes.byteLength - 1, 1000],
      ] as const) {
        const file = openGGUF(path, { windowBytes, headerBytes });
        const windows = (file.contents as MappedContents).windows;
        expect(windows.length, `window ${windowBytes}`).toBeGreaterThan(windowBytes === bytes.byteLength - 1 ? 0 : 1);
        expect(windows.length).toBeLessThan(file.tensors.filter((t) => t.byteSize > 0).length);
        expect(file.header.byteLength).toBeLessThan(bytes.byteLength);
        expect(file.header).toEqual(bytes.subarray(0, file.header.byteLength));
        expectSameFile(file, whole);
        expectSameFile(file, readGGUF(new Uint8Array(readFileSync(path))));
      }
    }
  });

  it("plans windows at tensor boundaries, each tensor in one, a large tensor alone", () => {
    const tensor = (name: string, offset: number, byteSize: number): GGUFTensorInfo => ({ name, type: GGMLType.I8, shape: [byteSize], elementCount: byteSize, offset, byteSize });
    const K = MAPPING_ALIGNMENT;
    const tensors = [
      tensor("c", 3 * K, K), // listed out of order: windows follow the file
      tensor("a", 0, K),
      tensor("b", K + 64, K),
      tensor("empty", 2 * K + 64, 0),
      tensor("huge", 4 * K, 5 * K),
      tensor("d", 9 * K + 32, 100),
    ];
    const windows = planMappingWindows(tensors, 1000, 2.5 * K);
    expect(windows).toEqual([
      { start: 0, end: 1000 + 2 * K + 64, firstTensor: "a" },
      { start: 3 * K, end: 1000 + 4 * K, firstTensor: "c" },
      { start: 4 * K, end: 1000 + 9 * K, firstTensor: "huge" },
      { start: 9 * K, end: 1000 + 9 * K + 132, firstTensor: "d" },
    ]);
    for (const t of tensors) {
      const start = 1000 + t.offset;
      expect(windows.filter((w) => w.start <= start && start + t.byteSize <= w.end).length, t.name).toBeGreaterThan(0);
    }
    expect(() => planMappingWindows(tensors, 1000, 0)).toThrow(RangeError);
    expect(() => planMappingWindows(tensors, 1000, 2 ** 32)).toThrow(RangeError);

    const contents = new MappedContents(join(directory, "never-mapped.gguf"), 10 * K, windows);
    expect(contents.view(5, 0)).toEqual(new Uint8Array(0));
    // Bytes across two windows are no tensor's data.
    expect(() => contents.view(1000 + K + 64, 2 * K)).toThrow(/are not tensor data of one mapped window/);
  });
});

describe("parseGGUFHeader", () => {
  it("gives readGGUF's result or error for every truncation, however small the first prefix", () => {
    const bytes = sampleFile(32, new Random(7));
    const headerEnd = readGGUF(bytes).dataOffset;
    const outcome = (parse: () => unknown) => {
      try {
        const parsed = parse() as { metadata: unknown; tensors: unknown; dataOffset: number };
        return { metadata: parsed.metadata, tensors: parsed.tensors, dataOffset: parsed.dataOffset };
      } catch (error) {
        if (!(error instanceof GGUFError)) throw error;
        return { error: error.message };
      }
    };
    // Every length through the header, then a sample of lengths in the data section.
    const lengths = new Set<number>();
    for (let length = 0; length <= headerEnd + 64; length++) lengths.add(length);
    for (let length = headerEnd; length <= bytes.byteLength; length += 997) lengths.add(length);
    lengths.add(bytes.byteLength);
    let prefixesMapped = 0;
    for (const length of lengths) {
      const truncated = bytes.subarray(0, length);
      const expected = outcome(() => readGGUF(truncated));
      for (const firstGuess of [1, 100, 4096]) {
        const got = outcome(() =>
          parseGGUFHeader(length, (prefix) => {
            prefixesMapped++;
            if (prefix > length) throw new Error(`asked for ${prefix} bytes of ${length}`);
            return truncated.subarray(0, prefix);
          }, firstGuess).parsed,
        );
        expect(got, `${length} bytes, first guess ${firstGuess}`).toEqual(expected);
      }
    }
    expect(prefixesMapped).toBeGreaterThan(3 * lengths.size);
  });
});

describe("openGGUF errors", () => {
  it("an empty file, a missing one and a directory", () => {
    const empty = join(directory, "empty.gguf");
    writeFileSync(empty, "");
    expect(() => openGGUF(empty)).toThrow("magic at byte 0: file is empty or cannot be mapped");
    expect(() => openGGUF(join(directory, "absent.gguf"))).toThrow(/^cannot open .*absent\.gguf: ENOENT/);
    expect(() => openGGUF(directory)).toThrow(/^cannot open .*: EISDIR/);
    expect(() => openGGUF(empty, { windowBytes: 0 })).toThrow(RangeError);
  });
});
