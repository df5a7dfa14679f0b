/**
 * Seeded, bounded fuzzing of `readGGUF`: truncations, bit flips, absurd counts/lengths/offsets,
 * unknown types, invalid UTF-8, duplicates, bad alignment and deep nesting, applied to valid
 * files built with `writeGGUF`. Every case must either parse into a self-consistent file or throw
 * `GGUFError` (never another exception), quickly and without large allocations.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GGMLType, ggmlTypeInfo, tensorByteSize } from "./ggml-type";
import { GGUFError } from "./gguf-error";
import type { GGUFFile } from "./gguf-file";
import { type GGUFArrayValue, type GGUFValue, VALUE_TYPE_IDS, ggufValue } from "./gguf-value";
import { GGUF_MAX_ARRAY_DEPTH, readGGUF } from "./read-gguf";
import { type GGUFLayout, type Region, RawWriter, Random, ggufLayout, patchBytes, patchUint32, patchUint64 } from "./testing/gguf-layout";
import { type GGUFTensorToWrite, writeGGUF } from "./write-gguf";

// ---- the harness: every case goes through `attempt` ----

const MAX_CASE_MS = 50;
const stats = { cases: 0, parsed: 0, rejected: 0, maxMs: 0, slowest: "" };

type Outcome = { ok: true; file: GGUFFile } | { ok: false; error: GGUFError };

function parseOnce(label: string, bytes: Uint8Array): [Outcome, number] {
  const started = performance.now();
  let outcome: Outcome;
  try {
    outcome = { ok: true, file: readGGUF(bytes) };
  } catch (error) {
    if (!(error instanceof GGUFError)) {
      throw new Error(`${label}: expected GGUFError, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
    }
    outcome = { ok: false, error };
  }
  return [outcome, performance.now() - started];
}

function attempt(label: string, bytes: Uint8Array): Outcome {
  stats.cases++;
  let [outcome, elapsed] = parseOnce(label, bytes);
  // A garbage-collection pause or a JIT tier-up can stall one run; a slow parse is slow every time.
  for (let retry = 0; retry < 2 && elapsed >= MAX_CASE_MS; retry++) elapsed = Math.min(elapsed, parseOnce(label, bytes)[1]);
  if (elapsed > stats.maxMs) {
    stats.maxMs = elapsed;
    stats.slowest = label;
  }
  if (elapsed >= MAX_CASE_MS) throw new Error(`${label}: took ${elapsed.toFixed(1)} ms (limit ${MAX_CASE_MS} ms)`);
  if (outcome.ok) {
    stats.parsed++;
    assertConsistent(label, bytes, outcome.file);
  } else {
    stats.rejected++;
    const { error } = outcome;
    if (error.field.length === 0) throw new Error(`${label}: GGUFError without a field`);
    if (!Number.isInteger(error.offset) || error.offset < 0 || error.offset > bytes.byteLength) {
      throw new Error(`${label}: GGUFError offset ${error.offset} outside the ${bytes.byteLength}-byte file (${error.message})`);
    }
    if (!error.message.startsWith(`${error.field} at byte ${error.offset}: `)) throw new Error(`${label}: malformed message ${error.message}`);
  }
  return outcome;
}

/** A parse that succeeded must describe only data that lies inside the file. */
function assertConsistent(label: string, bytes: Uint8Array, file: GGUFFile): void {
  const fail = (problem: string): never => {
    throw new Error(`${label}: parsed, but ${problem}`);
  };
  const { alignment, dataOffset } = file;
  if (!(alignment > 0 && (alignment & (alignment - 1)) === 0)) fail(`alignment ${alignment} is not a power of two`);
  if (dataOffset % alignment !== 0) fail(`data offset ${dataOffset} is not aligned to ${alignment}`);
  if (file.tensors.length > 0 && dataOffset > bytes.byteLength) fail(`data offset ${dataOffset} is past the end`);
  for (const [key, value] of file.metadata) {
    if (key.length === 0) fail("a key is empty");
    if (VALUE_TYPE_IDS[value.type] === undefined) fail(`key ${key} has type ${value.type}`);
  }
  const names = new Set<string>();
  const extents: Array<[number, number, string]> = [];
  for (const t of file.tensors) {
    if (names.has(t.name)) fail(`tensor name ${t.name} is duplicated`);
    names.add(t.name);
    if (new TextEncoder().encode(t.name).byteLength > 63) fail(`tensor name ${t.name} is too long`);
    if (t.shape.length > 4) fail(`${t.name} has ${t.shape.length} dims`);
    if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) fail(`${t.name} has shape ${t.shape}`);
    if (ggmlTypeInfo(t.type) === undefined) fail(`${t.name} has type ${t.type}`);
    if (t.elementCount !== t.shape.reduce((a, b) => a * b, 1)) fail(`${t.name} element count ${t.elementCount} vs shape ${t.shape}`);
    const size = tensorByteSize(t.type, t.shape);
    if (size === undefined || Number(size) !== t.byteSize) fail(`${t.name} byteSize ${t.byteSize}, type and shape need ${size}`);
    if (t.offset % alignment !== 0) fail(`${t.name} offset ${t.offset} is misaligned`);
    const data = file.tensorData(t);
    const start = data.byteOffset - bytes.byteOffset;
    if (data.buffer !== bytes.buffer) fail(`${t.name} data is not a view into the file`);
    if (data.byteLength !== t.byteSize) fail(`${t.name} data view has ${data.byteLength} bytes, not ${t.byteSize}`);
    if (start !== dataOffset + t.offset || start + data.byteLength > bytes.byteLength) {
      fail(`${t.name} data [${start}, ${start + data.byteLength}) is not inside the ${bytes.byteLength}-byte file`);
    }
    extents.push([t.offset, t.offset + t.byteSize, t.name]);
  }
  extents.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < extents.length; i++) {
    if (extents[i]![0] < extents[i - 1]![1]) fail(`${extents[i]![2]} overlaps ${extents[i - 1]![2]}`);
  }
}

function expectRejected(label: string, bytes: Uint8Array, field: string | RegExp, message?: RegExp, offset?: number): GGUFError {
  const outcome = attempt(label, bytes);
  if (outcome.ok) throw new Error(`${label}: expected GGUFError on ${String(field)}, but the file parsed`);
  const { error } = outcome;
  if (typeof field === "string") expect(error.field, `${label}: ${error.message}`).toBe(field);
  else expect(error.field, `${label}: ${error.message}`).toMatch(field);
  if (message) expect(error.message, label).toMatch(message);
  if (offset !== undefined) expect(error.offset, `${label}: ${error.message}`).toBe(offset);
  return error;
}

function expectParsed(label: string, bytes: Uint8Array): GGUFFile {
  const outcome = attempt(label, bytes);
  if (!outcome.ok) throw new Error(`${label}: expected a successful parse, got ${outcome.error.message}`);
  return outcome.file;
}

// ---- valid base files ----

function nested(depth: number, leaf: GGUFArrayValue): GGUFArrayValue {
  let value = leaf;
  for (let i = 1; i < depth; i++) value = ggufValue.array("array", [value]);
  return value;
}

function richMetadata(alignment: number | undefined): Map<string, GGUFValue> {
  const metadata = new Map<string, GGUFValue>([
    ["general.architecture", ggufValue.string("qwen3")],
    ["general.name", ggufValue.string("Fuzz 模型 🙂 ünïcödé")],
    ["dup.aaaa", ggufValue.uint8(7)],
    ["dup.bbbb", ggufValue.int8(-7)],
    ["test.uint16", ggufValue.uint16(65535)],
    ["test.int16", ggufValue.int16(-32768)],
    ["test.uint32", ggufValue.uint32(4294967295)],
    ["test.int32", ggufValue.int32(-2147483648)],
    ["test.float32", ggufValue.float32(Math.fround(-1.5))],
    ["test.float64", ggufValue.float64(Math.E)],
    ["test.bool", ggufValue.bool(true)],
    ["test.uint64", ggufValue.uint64(2n ** 64n - 1n)],
    ["test.int64", ggufValue.int64(-(2n ** 63n))],
    ["test.string.long", ggufValue.string(`${"long ascii text ".repeat(6)}— then ünïcödé ✓ 𝄞`)],
    ["test.string.empty", ggufValue.string("")],
    ["test.array.bool", ggufValue.array("bool", [true, false, true, true])],
    ["test.array.uint8", ggufValue.array("uint8", Uint8Array.of(0, 1, 255))],
    ["test.array.int16", ggufValue.array("int16", Int16Array.of(-1, 2, -3))],
    ["test.array.uint64", ggufValue.array("uint64", BigUint64Array.of(1n, 2n ** 64n - 1n))],
    ["test.array.int64", ggufValue.array("int64", BigInt64Array.of(-(2n ** 63n)))],
    ["test.array.float64", ggufValue.array("float64", Float64Array.of(1e-300, -0))],
    ["test.array.empty", ggufValue.array("float32", new Float32Array(0))],
    ["tokenizer.ggml.tokens", ggufValue.stringArray(["<|im_start|>", "Ġthe", "", "日本語", "🙂", "a".repeat(70), "é".repeat(40)])],
    ["tokenizer.ggml.token_type", ggufValue.int32Array([3, 1, 1, 1, 1, 1, 1])],
    ["tokenizer.ggml.scores", ggufValue.float32Array([0, -1.5, 2.25, 0, 0, 0, 0])],
    [
      "test.array.nested",
      ggufValue.array("array", [
        ggufValue.int32Array([1, 2, 3]),
        ggufValue.array("array", [ggufValue.stringArray(["deep", "ßtring"]), ggufValue.array("bool", [false])]),
        ggufValue.array("array", []),
      ]),
    ],
    ["test.array.deepest", nested(GGUF_MAX_ARRAY_DEPTH, ggufValue.array("uint16", Uint16Array.of(9)))],
  ]);
  if (alignment !== undefined) metadata.set("general.alignment", ggufValue.uint32(alignment));
  return metadata;
}

function tensor(name: string, type: GGMLType, shape: number[], random: Random): GGUFTensorToWrite {
  const size = Number(tensorByteSize(type, shape));
  return { name, type, shape, data: random.bytes(size) };
}

function richTensors(random: Random): GGUFTensorToWrite[] {
  return [
    tensor("t.a", GGMLType.F32, [4, 3], random),
    tensor("t.b", GGMLType.F16, [8], random),
    tensor("blk.0.attn_q.weight", GGMLType.Q8_0, [64, 2], random),
    tensor("blk.0.ffn_down.weight", GGMLType.Q4_K, [256], random),
    tensor("blk.0.ffn_up.weight", GGMLType.Q6_K, [256, 1, 1], random),
    tensor("blk.0.attn_norm.weight", GGMLType.BF16, [16, 2, 1, 1], random),
    tensor("output.weight", GGMLType.Q4_0, [32, 3], random),
    tensor("tëst.ünïcode", GGMLType.IQ4_XS, [256], random),
  ];
}

interface Base {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly layout: GGUFLayout;
}

function base(name: string, bytes: Uint8Array): Base {
  return { name, bytes, layout: ggufLayout(bytes) };
}

const random = new Random(0x9e3779b9);
const BASES: Base[] = [
  base("rich, alignment 64", writeGGUF({ metadata: richMetadata(64), tensors: richTensors(random) })),
  base("rich, default alignment, v2", writeGGUF({ version: 2, metadata: richMetadata(undefined), tensors: richTensors(random) })),
  base("metadata only, alignment 8", writeGGUF({ metadata: richMetadata(8) })),
  base(
    "tensors only, alignment 16",
    writeGGUF({ metadata: { "general.alignment": ggufValue.uint32(16) }, tensors: richTensors(random).slice(0, 4) }),
  ),
];
const RICH = BASES[0]!;

function region(b: Base, field: string): Region {
  const found = b.layout.regions.find((r) => r.field === field && r.kind !== "bytes" && r.kind !== "tensor_data");
  if (!found) throw new Error(`no region ${field} in ${b.name}`);
  return found;
}

function regionsOf(b: Base, kind: Region["kind"]): Region[] {
  return b.layout.regions.filter((r) => r.kind === kind);
}

/** Regions by the field names the reader reports for them (built once per base). */
const regionIndex = new WeakMap<Base, Map<string, Region[]>>();

function regionsNamed(b: Base, field: string): Region[] {
  let index = regionIndex.get(b);
  if (!index) {
    index = new Map();
    for (const r of b.layout.regions) {
      for (const name of new Set([r.field, r.truncatedField])) {
        const list = index.get(name) ?? [];
        list.push(r);
        index.set(name, list);
      }
    }
    regionIndex.set(b, index);
  }
  return index.get(field) ?? [];
}

/** Whether the reader may legitimately blame `field` when the file ends at `length`. */
function mayBlame(b: Base, length: number, field: string): boolean {
  const { layout } = b;
  if (length < layout.headerEnd) {
    return regionsNamed(b, field).some(
      (r) =>
        // The file ends inside the region itself...
        (r.truncatedField === field && r.start <= length && length < r.end) ||
        // ...or a count or length wholly present, whose items run past the end, is rejected up front.
        ((r.kind === "count" || r.kind === "length") && r.field === field && r.end <= length && (r.extentEnd ?? 0) > length),
    );
  }
  if (length < layout.dataOffset) return field === "tensor_data";
  // Tensors are checked in info order: the first one whose data runs past the end is blamed.
  const first = layout.tensors.find((t) => layout.dataOffset + t.offset + t.size > length);
  return first !== undefined && field === `tensor "${first.name}".offset`;
}

function checkTruncation(b: Base, length: number): void {
  const label = `${b.name}: truncated to ${length} of ${b.bytes.byteLength} bytes`;
  // A view into the full buffer: a reader that looked at `buffer.byteLength` would read past the end.
  const outcome = attempt(label, b.bytes.subarray(0, length));
  if (length >= b.layout.minValidLength) {
    if (!outcome.ok) throw new Error(`${label}: should parse (it holds every tensor), got ${outcome.error.message}`);
    return;
  }
  if (outcome.ok) throw new Error(`${label}: parsed, but ${b.layout.minValidLength} bytes are needed`);
  if (!mayBlame(b, length, outcome.error.field)) throw new Error(`${label}: blamed the wrong field: ${outcome.error.message}`);
}

// ---- the tests ----

let memoryBefore: NodeJS.MemoryUsage;

beforeAll(() => {
  memoryBefore = process.memoryUsage();
});

afterAll(() => {
  const after = process.memoryUsage();
  const rss = (after.rss - memoryBefore.rss) / 2 ** 20;
  const heap = (after.heapUsed - memoryBefore.heapUsed) / 2 ** 20;
  console.info(
    `[gguf fuzz] ${stats.cases} cases (${stats.parsed} parsed, ${stats.rejected} rejected), slowest ${stats.maxMs.toFixed(2)} ms (${stats.slowest}), rss +${rss.toFixed(0)} MiB, heap +${heap.toFixed(0)} MiB`,
  );
  // No case may allocate in proportion to a count or length it has not checked against the file.
  expect(heap, "heap growth over the whole run (MiB)").toBeLessThan(256);
  expect(rss, "RSS growth over the whole run (MiB)").toBeLessThan(512);
  expect(stats.maxMs).toBeLessThan(MAX_CASE_MS);
});

describe("readGGUF fuzzing", () => {
  it("the base files parse and their layout matches the reader", () => {
    for (const b of BASES) {
      const file = expectParsed(b.name, b.bytes);
      expect([...file.metadata.keys()]).toEqual(b.layout.keys);
      expect(file.dataOffset).toBe(b.layout.dataOffset);
      expect(file.alignment).toBe(b.layout.alignment);
      expect(file.tensors.map((t) => [t.name, t.offset, t.byteSize])).toEqual(b.layout.tensors.map((t) => [t.name, t.offset, t.size]));
      // Also at an odd byte offset inside a larger buffer (typed-array copies must not assume alignment).
      const shifted = new Uint8Array(b.bytes.byteLength + 7);
      shifted.set(b.bytes, 3);
      const moved = expectParsed(`${b.name} at byte offset 3`, shifted.subarray(3, 3 + b.bytes.byteLength));
      expect([...moved.metadata]).toEqual([...file.metadata]);
    }
    expect(RICH.layout.alignment).toBe(64);
    expect(RICH.layout.tensors.length).toBe(8);
  });

  it("rejects (or, past the last tensor, accepts) a truncation at every byte offset", () => {
    for (const b of BASES) {
      for (let length = 0; length <= b.bytes.byteLength; length++) checkTruncation(b, length);
    }
  });

  it("rejects truncations at every region boundary of a larger file, and at random points", () => {
    const rng = new Random(1);
    const tokens = Array.from({ length: 3000 }, (_, i) => `tok${i}${i % 7 === 0 ? "é" : ""}`);
    const big = base(
      "large vocabulary",
      writeGGUF({
        metadata: new Map([...richMetadata(32), ["tokenizer.ggml.merges", ggufValue.stringArray(tokens.map((t) => `${t} ${t}`))]]),
        tensors: [...richTensors(rng), tensor("token_embd.weight", GGMLType.F16, [64, 300], rng)],
      }),
    );
    // Every boundary except those in the middle of the 3000 merges (the first and last 40 are kept).
    const boundaries = new Set<number>();
    for (const r of big.layout.regions) {
      const merge = /merges"\]\[(\d+)\]$/.exec(r.field);
      if (merge && Number(merge[1]) >= 40 && Number(merge[1]) < tokens.length - 40) continue;
      for (const at of [r.start, r.end, r.start + 1, r.end - 1]) boundaries.add(at);
    }
    for (let i = 0; i < 600; i++) boundaries.add(rng.int(big.bytes.byteLength + 1));
    for (const at of boundaries) if (at >= 0 && at <= big.bytes.byteLength) checkTruncation(big, at);
    expect(boundaries.size).toBeGreaterThan(1_500);
  });

  it("survives random bit flips: each flipped file parses consistently or throws GGUFError", () => {
    const rng = new Random(2);
    let parsed = 0;
    let rejected = 0;
    for (let i = 0; i < 10_000; i++) {
      const b = BASES[i % BASES.length]!;
      const bytes = b.bytes.slice();
      const flips = 1 + rng.int(4);
      let headerTouched = false;
      for (let f = 0; f < flips; f++) {
        // Mostly in the header: flips in tensor data can never matter to the reader.
        const at = rng.int(10) < 9 ? rng.int(b.layout.headerEnd) : rng.int(bytes.byteLength);
        if (at < b.layout.headerEnd) headerTouched = true;
        bytes[at]! ^= 1 << rng.int(8);
      }
      const outcome = attempt(`${b.name}: bit flips #${i}`, bytes);
      if (outcome.ok) parsed++;
      else rejected++;
      if (!headerTouched) {
        expect(outcome.ok, `${b.name}: flips outside the header must not matter (#${i})`).toBe(true);
      }
    }
    // Both paths must be exercised, or the fuzzing tests nothing.
    expect(parsed).toBeGreaterThan(300);
    expect(rejected).toBeGreaterThan(300);
  });

  it("survives random byte and word overwrites anywhere in the header", () => {
    const rng = new Random(3);
    const words = [0n, 1n, 0xffn, 0xffffffffn, 2n ** 32n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 53n];
    for (let i = 0; i < 4000; i++) {
      const b = BASES[i % BASES.length]!;
      const at = rng.int(b.layout.headerEnd);
      const bytes =
        rng.int(2) === 0 && at + 8 <= b.bytes.byteLength
          ? patchUint64(b.bytes, at, rng.pick(words) + BigInt(rng.int(3)))
          : patchBytes(b.bytes, at, rng.bytes(1 + rng.int(3)).subarray(0, b.bytes.byteLength - at));
      attempt(`${b.name}: overwrite at ${at} #${i}`, bytes);
    }
  });

  it("rejects absurd counts and string lengths, naming the field and its offset", () => {
    for (const b of BASES) {
      for (const r of b.layout.regions) {
        if (r.kind !== "count" && r.kind !== "length") continue;
        const remaining = b.bytes.byteLength - r.end;
        for (const value of [2n ** 63n, 2n ** 32n, 2n ** 64n - 1n, 2n ** 62n + 1n, BigInt(remaining + 1)]) {
          const message = r.kind === "count" ? /cannot fit in the \d+ bytes that remain/ : /exceeds the \d+ bytes that remain/;
          expectRejected(`${b.name}: ${r.field} = ${value}`, patchUint64(b.bytes, r.start, value), r.field, message, r.start);
        }
        // At the limit the count/length check passes, and the parse must fail later (or succeed) cleanly.
        const limit = r.kind === "count" ? Math.floor(remaining / r.minItemBytes!) : remaining;
        attempt(`${b.name}: ${r.field} = ${limit} (the limit)`, patchUint64(b.bytes, r.start, BigInt(limit)));
        if (r.kind === "count" && limit > 0) attempt(`${b.name}: ${r.field} = limit-1`, patchUint64(b.bytes, r.start, BigInt(limit - 1)));
      }
    }
    // The named top-level counts, explicitly.
    expectRejected("tensor_count = 2^63", patchUint64(RICH.bytes, 8, 2n ** 63n), "tensor_count", /count 9223372036854775808 cannot fit/, 8);
    expectRejected("kv_count = 2^32", patchUint64(RICH.bytes, 16, 2n ** 32n), "metadata_kv_count", /cannot fit/, 16);
    const tokens = region(RICH, 'kv["tokenizer.ggml.tokens"].count');
    expectRejected("tokens count = 2^64-1", patchUint64(RICH.bytes, tokens.start, 2n ** 64n - 1n), 'kv["tokenizer.ggml.tokens"].count');
    const inner = region(RICH, 'kv["test.array.nested"][1][0].count');
    expectRejected("nested count", patchUint64(RICH.bytes, inner.start, 2n ** 40n), 'kv["test.array.nested"][1][0].count');
    const item = region(RICH, 'kv["tokenizer.ggml.tokens"][3]');
    expectRejected("token length", patchUint64(RICH.bytes, item.start, 2n ** 63n), 'kv["tokenizer.ggml.tokens"][3]', /string length/);
  });

  it("rejects unknown metadata value types and array item types", () => {
    for (const b of BASES) {
      for (const r of regionsOf(b, "value_type")) {
        for (const id of [13, 14, 255, 0x80000009, 0xffffffff]) {
          expectRejected(`${b.name}: ${r.field} = ${id}`, patchUint32(b.bytes, r.start, id), r.field, /unknown metadata value type/, r.start);
        }
        // Any valid but wrong type: parses differently, or fails cleanly.
        for (let id = 0; id <= 12; id++) attempt(`${b.name}: ${r.field} = ${id}`, patchUint32(b.bytes, r.start, id));
      }
    }
  });

  it("rejects unknown and removed ggml types", () => {
    const removed = [4, 5, 31, 32, 33, 36, 37, 38];
    for (const b of BASES) {
      for (const r of regionsOf(b, "ggml_type")) {
        for (const id of [...removed, 43, 44, 255, 1 << 16, 0xffffffff]) {
          expectRejected(`${b.name}: ${r.field} = ${id}`, patchUint32(b.bytes, r.start, id), r.field, /unknown ggml type/, r.start);
        }
        // Every valid type: the block size or the size check may reject it, never anything else.
        for (let id = 0; id <= 42; id++) if (!removed.includes(id)) attempt(`${b.name}: ${r.field} = ${id}`, patchUint32(b.bytes, r.start, id));
      }
    }
    const q8 = region(RICH, "tensor_infos[2].type");
    const asQ4K = patchUint32(RICH.bytes, q8.start, GGMLType.Q4_K);
    expectRejected("q8_0 [64, 2] retyped as q4_K", asQ4K, "tensor_infos[2].dimensions[0]", /64 is not a multiple of the q4_K block size 256/);
  });

  it("rejects too many, negative and overflowing dimensions", () => {
    for (const b of BASES) {
      for (const r of regionsOf(b, "n_dims")) {
        for (const n of [5, 8, 64, 2 ** 31, 0xffffffff]) {
          expectRejected(`${b.name}: ${r.field} = ${n}`, patchUint32(b.bytes, r.start, n), r.field, /dimensions, at most 4 allowed/, r.start);
        }
        for (const n of [0, 1, 2, 3, 4]) attempt(`${b.name}: ${r.field} = ${n}`, patchUint32(b.bytes, r.start, n));
      }
      for (const r of regionsOf(b, "dim")) {
        for (const d of [-1n, -256n, -(2n ** 63n)]) {
          expectRejected(`${b.name}: ${r.field} = ${d}`, patchUint64(b.bytes, r.start, d), r.field, /negative dimension/, r.start);
        }
        for (const d of [2n ** 53n, 2n ** 62n, 2n ** 63n - 256n]) {
          expectRejected(`${b.name}: ${r.field} = ${d}`, patchUint64(b.bytes, r.start, d), r.field, /overflow|out of range/, r.start);
        }
        for (const d of [0n, 256n, 2n ** 20n, 2n ** 40n]) attempt(`${b.name}: ${r.field} = ${d}`, patchUint64(b.bytes, r.start, d));
      }
    }
    // A zero dimension must not let a later, huge one through as an imprecise number.
    const dims = region(RICH, "tensor_infos[0].dimensions[1]");
    const zero = patchUint64(RICH.bytes, dims.start - 8, 0n);
    for (const d of [2n ** 62n, 2n ** 53n + 1n]) {
      expectRejected(`f32 [0, ${d}]`, patchUint64(zero, dims.start, d), "tensor_infos[0].dimensions[1]", undefined, dims.start);
    }
    const empty = expectParsed("f32 [0, 3]", zero);
    expect(empty.tensors[0]!.byteSize).toBe(0);
  });

  it("rejects misaligned, out-of-range, overlapping and past-the-end tensor offsets", () => {
    for (const b of BASES) {
      const { layout } = b;
      const dataSize = b.bytes.byteLength - layout.dataOffset;
      for (const r of regionsOf(b, "tensor_offset")) {
        const t = layout.tensors[r.tensor!]!;
        for (const delta of [1, layout.alignment / 2, layout.alignment - 1]) {
          const offset = BigInt(t.offset + delta);
          expectRejected(`${b.name}: ${r.field} = ${offset}`, patchUint64(b.bytes, r.start, offset), r.field, /not a multiple of the alignment/, r.start);
        }
        for (const offset of [2n ** 53n, 2n ** 63n, 2n ** 64n - BigInt(layout.alignment)]) {
          expectRejected(`${b.name}: ${r.field} = ${offset}`, patchUint64(b.bytes, r.start, offset), r.field, /out of range/, r.start);
        }
        const pastEnd = Math.ceil((dataSize - t.size + 1) / layout.alignment) * layout.alignment;
        for (const offset of [pastEnd, pastEnd + layout.alignment * 1000, 2 ** 52]) {
          expectRejected(
            `${b.name}: ${r.field} = ${offset}`,
            patchUint64(b.bytes, r.start, BigInt(offset)),
            `tensor "${t.name}".offset`,
            /lies past the end of the data section/,
            t.infoStart,
          );
        }
        for (const other of layout.tensors) {
          if (other === t) continue;
          const bytes = patchUint64(b.bytes, r.start, BigInt(other.offset));
          expectRejected(`${b.name}: ${t.name} moved onto ${other.name}`, bytes, /^tensor ".*"\.offset$/, /overlaps|past the end/);
        }
      }
    }
    // An exact overlap report: the second of two tensors sharing a start is blamed.
    const r = region(RICH, "tensor_infos[1].offset");
    const first = RICH.layout.tensors[0]!;
    const second = RICH.layout.tensors[1]!;
    expectRejected(
      "t.b onto t.a",
      patchUint64(RICH.bytes, r.start, BigInt(first.offset)),
      'tensor "t.b".offset',
      /data overlaps tensor "t.a"/,
      second.infoStart,
    );
  });

  it("rejects invalid UTF-8 in keys, string values, array strings and tensor names", () => {
    const sequences: Array<[string, number[]]> = [
      ["0xff", [0xff]],
      ["lone continuation", [0x80]],
      ["overlong NUL", [0xc0, 0x80]],
      ["overlong slash", [0xe0, 0x80, 0xaf]],
      ["surrogate", [0xed, 0xa0, 0x80]],
      ["above U+10FFFF", [0xf4, 0x90, 0x80, 0x80]],
      ["truncated sequence", [0xe6, 0x97]],
    ];
    let checked = 0;
    for (const b of BASES) {
      const strings = b.layout.regions.filter((r) => r.kind === "bytes");
      for (const r of strings) {
        const length = regionLengthStart(b, r);
        for (const [name, sequence] of sequences) {
          if (r.end - r.start < sequence.length) continue;
          // A truncated sequence goes at the end (so that it really is truncated), the others at the
          // start (so that no preceding lead byte can turn them into a valid character).
          const at = name === "truncated sequence" ? r.end - sequence.length : r.start;
          const bytes = patchBytes(b.bytes, at, sequence);
          expectRejected(`${b.name}: ${name} in ${r.field}`, bytes, r.field, /not valid UTF-8/, length);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(400);
    // The targeted kinds, explicitly.
    const key = RICH.layout.regions.find((r) => r.kind === "bytes" && r.field === "kv[1].key")!;
    expectRejected("key", patchBytes(RICH.bytes, key.start, [0xff]), "kv[1].key", /UTF-8/);
    const name = RICH.layout.regions.find((r) => r.kind === "bytes" && r.field === "tensor_infos[7].name")!;
    expectRejected("tensor name", patchBytes(RICH.bytes, name.start + 1, [0xff]), "tensor_infos[7].name", /UTF-8/);
  });

  it("decodes string arrays exactly as one strict decode per string would, or blames the first bad string", () => {
    const rng = new Random(4);
    const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
    const encoder = new TextEncoder();
    const pieces = ["a", "Ġ", "é", "日", "🙂", "\u{10FFFF}", "\uFEFF", " ", "<|im_end|>"];
    const junk: number[][] = [[0xff], [0x80], [0xc3], [0xe6, 0x97], [0xf0, 0x9f, 0x99], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf8, 0x88, 0x80, 0x80, 0x80]];
    let valid = 0;
    let invalid = 0;
    for (let c = 0; c < 400; c++) {
      const count = rng.int(40);
      const strings: Uint8Array[] = [];
      for (let i = 0; i < count; i++) {
        const parts: number[] = [];
        const length = rng.int(5) === 0 ? 100 + rng.int(100) : rng.int(6);
        for (let k = 0; k < length; k++) parts.push(...encoder.encode(rng.pick(pieces)));
        if (rng.int(60) === 0) parts.splice(rng.int(parts.length + 1), 0, ...rng.pick(junk));
        strings.push(Uint8Array.from(parts));
      }
      const writer = new RawWriter().u32(0x46554747).u32(3).u64(0).u64(1).string("s").u32(9).u32(8).u64(count);
      for (const bytes of strings) writer.u64(bytes.byteLength).raw(bytes);
      const firstBad = strings.findIndex((bytes) => {
        try {
          strict.decode(bytes);
          return false;
        } catch {
          return true;
        }
      });
      const label = `string array #${c}`;
      if (firstBad < 0) {
        valid++;
        const items = expectParsed(label, writer.bytes()).getArray("s")!.items as string[];
        expect(items, label).toEqual(strings.map((bytes) => strict.decode(bytes)));
      } else {
        invalid++;
        expectRejected(label, writer.bytes(), `kv["s"][${firstBad}]`, /not valid UTF-8/);
      }
    }
    expect(valid).toBeGreaterThan(100);
    expect(invalid).toBeGreaterThan(100);
    // Two invalid strings whose concatenation is valid ("日" split in two): each is checked alone.
    const split = new RawWriter().u32(0x46554747).u32(3).u64(0).u64(1).string("s").u32(9).u32(8).u64(2);
    split.u64(2).raw([0xe6, 0x97]).u64(1).raw([0xa5]);
    expectRejected("a character split across two strings", split.bytes(), 'kv["s"][0]', /not valid UTF-8/, 49);
    const tail = new RawWriter().u32(0x46554747).u32(3).u64(0).u64(1).string("s").u32(9).u32(8).u64(2);
    tail.u64(1).raw([0x61]).u64(1).raw([0xa5]);
    expectRejected("a string that starts with a continuation byte", tail.bytes(), 'kv["s"][1]', /not valid UTF-8/, 58);
  });

  it("rejects bool bytes other than 0 and 1", () => {
    for (const b of BASES) {
      for (const r of regionsOf(b, "bool")) {
        for (const byte of [2, 0x80, 0xff]) {
          expectRejected(`${b.name}: ${r.field} = ${byte}`, patchBytes(b.bytes, r.start, [byte]), r.field, /bool must be 0 or 1/, r.start);
        }
      }
    }
    expect(regionsOf(RICH, "bool").map((r) => r.field)).toContain('kv["test.array.bool"][2]');
  });

  it("rejects duplicate keys and duplicate tensor names", () => {
    const dup = RICH.layout.regions.find((r) => r.kind === "bytes" && r.field === `kv[${RICH.layout.keys.indexOf("dup.bbbb")}].key`)!;
    const length = regionLengthStart(RICH, dup);
    expectRejected("duplicate key", patchBytes(RICH.bytes, dup.start, new TextEncoder().encode("dup.aaaa")), dup.field, /duplicate key "dup.aaaa"/, length);
    const tb = RICH.layout.regions.find((r) => r.kind === "bytes" && r.field === "tensor_infos[1].name")!;
    expectRejected(
      "duplicate tensor",
      patchBytes(RICH.bytes, tb.start, new TextEncoder().encode("t.a")),
      "tensor_infos[1].name",
      /duplicate tensor name "t.a"/,
      RICH.layout.tensors[1]!.infoStart,
    );
    expectRejected("empty key", writeGGUF({ metadata: { "": ggufValue.uint8(1) } }), "kv[0].key", /empty key/, 24);
    // Keys that are special to plain objects are ordinary keys here.
    const special = expectParsed(
      "prototype keys",
      writeGGUF({
        metadata: new Map<string, GGUFValue>([
          ["__proto__", ggufValue.string("x")],
          ["constructor", ggufValue.uint32(1)],
        ]),
        tensors: [{ name: "__proto__", type: GGMLType.F32, shape: [1], data: new Uint8Array(4) }],
      }),
    );
    expect(special.getString("__proto__")).toBe("x");
    expect(special.tensor("__proto__")?.byteSize).toBe(4);
  });

  it("rejects a bad general.alignment", () => {
    const r = region(RICH, 'kv["general.alignment"].value');
    const typeRegion = region(RICH, 'kv["general.alignment"].type');
    // The error points at the start of the key/value pair.
    const kvStart = region(RICH, `kv[${RICH.layout.keys.indexOf("general.alignment")}].key`).start;
    for (const value of [0, 3, 48, 96, 0x80000001, 0xffffffff]) {
      expectRejected(`alignment ${value}`, patchUint32(RICH.bytes, r.start, value), 'kv["general.alignment"]', /non-zero power of two/, kvStart);
    }
    // A large power of two is valid, but the file then ends before its data section.
    for (const value of [2 ** 16, 2 ** 31]) {
      expectRejected(`alignment ${value}`, patchUint32(RICH.bytes, r.start, value), /^tensor_data$|offset/);
    }
    // Same size, wrong type.
    for (const type of ["int32", "float32"] as const) {
      const bytes = patchUint32(RICH.bytes, typeRegion.start, VALUE_TYPE_IDS[type]);
      expectRejected(`alignment as ${type}`, bytes, 'kv["general.alignment"]', new RegExp(`must be uint32, found ${type}`), kvStart);
    }
    // Other sizes and types: written under a look-alike key, then renamed to general.alignment.
    for (const value of [ggufValue.uint64(32), ggufValue.string("32"), ggufValue.uint16(32), ggufValue.int32Array([32])]) {
      const bytes = writeGGUF({ metadata: { "general.alignmenX": value }, tensors: [{ name: "t", type: GGMLType.F32, shape: [8], data: new Uint8Array(32) }] });
      const at = new TextDecoder().decode(bytes).indexOf("alignmenX") + 8;
      expectRejected(`alignment as ${value.type}`, patchBytes(bytes, at, [0x74]), 'kv["general.alignment"]', /must be uint32/, 24);
    }
  });

  it("bounds array nesting, including a file of a million nested array headers", () => {
    const leaf = ggufValue.array("int8", Int8Array.of(1));
    const ok = expectParsed("depth 8", writeGGUF({ metadata: { deep: nested(GGUF_MAX_ARRAY_DEPTH, leaf) } }));
    expect(ok.getArray("deep")?.itemType).toBe("array");
    expectRejected("depth 9", writeGGUF({ metadata: { deep: nested(GGUF_MAX_ARRAY_DEPTH + 1, leaf) } }), /^kv\["deep"\](\[0\])+$/, /nested deeper than 8/);
    // A hand-built file whose value is array-of-array-of-... a million levels deep.
    const levels = 1_000_000;
    const writer = new RawWriter().u32(0x46554747).u32(3).u64(0).u64(1).string("deep").u32(9);
    const header = writer.bytes();
    const bytes = new Uint8Array(header.byteLength + levels * 12);
    bytes.set(header);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < levels; i++) {
      view.setUint32(header.byteLength + i * 12, 9, true);
      view.setBigUint64(header.byteLength + i * 12 + 4, 1n, true);
    }
    expectRejected("a million levels", bytes, /^kv\["deep"\](\[0\])+$/, /nested deeper/);
    // And a wide one: 5000 empty arrays is well-formed, and parses within the time limit.
    const n = 5_000;
    const wide = new RawWriter().u32(0x46554747).u32(3).u64(0).u64(1).string("wide").u32(9).u32(9).u64(n);
    const wideBytes = new Uint8Array(wide.length + n * 12);
    wideBytes.set(wide.bytes());
    expect((expectParsed(`${n} empty arrays`, wideBytes).getArray("wide")!.items as GGUFArrayValue[]).length).toBe(n);
  });

  it("rejects hand-built malformed headers with precise errors", () => {
    const header = (version: number, tensors: number, kvs: number): RawWriter => new RawWriter().u32(0x46554747).u32(version).u64(tensors).u64(kvs);
    expectRejected("empty file", new Uint8Array(0), "magic", /truncated/, 0);
    expectRejected("bad magic", new RawWriter().raw([0x47, 0x47, 0x4d, 0x4c]).u32(3).u64(0).u64(0).bytes(), "magic", /not a GGUF file/, 0);
    expectRejected("version 1", header(1, 0, 0).bytes(), "version", /v1 is not supported/, 4);
    expectRejected("version 4", header(4, 0, 0).bytes(), "version", /unsupported GGUF version 4/, 4);
    expectRejected("big-endian", header(0x03000000, 0, 0).bytes(), "version", /big-endian/, 4);
    expectRejected("no counts", new RawWriter().u32(0x46554747).u32(3).bytes(), "tensor_count", /truncated/, 8);
    expect(expectParsed("minimal", header(3, 0, 0).bytes()).metadata.size).toBe(0);
    // A 64-byte tensor name (ggml allows 63).
    const name64 = header(3, 1, 0).string("n".repeat(64)).u32(1).u64(1).u32(0).u64(0).pad(32).raw(new Uint8Array(32)).bytes();
    expectRejected("64-byte tensor name", name64, "tensor_infos[0].name", /64 bytes, at most 63/, 24);
    const name63 = header(3, 1, 0).string("é".repeat(31) + "n").u32(1).u64(1).u32(0).u64(0).pad(32).raw(new Uint8Array(32)).bytes();
    expect(expectParsed("63-byte tensor name", name63).tensors[0]!.name).toHaveLength(32);
    // Tensors declared, header ends exactly where the data section would need padding.
    const unpadded = header(3, 1, 0).string("t").u32(1).u64(1).u32(0).u64(0).bytes();
    expectRejected("no padding", unpadded, "tensor_data", /ends before the data section/, unpadded.byteLength);
    // A string length of exactly the remaining bytes, for the last key: valid.
    const last = header(3, 0, 1).string("k").u32(8).u64(5).raw([104, 101, 108, 108, 111]).bytes();
    expect(expectParsed("string to the end", last).getString("k")).toBe("hello");
    expectRejected("string one past the end", last.subarray(0, last.byteLength - 1), 'kv["k"].value', /string length 5 exceeds the 4 bytes/, 37);
    // Many tensor infos with zero-size data at one offset: allowed (they do not overlap).
    const zeros = header(3, 3, 0);
    for (const n of ["a", "b", "c"]) zeros.string(n).u32(2).u64(0).u64(7).u32(0).u64(0);
    const zeroFile = expectParsed("zero-size tensors", zeros.pad(32).bytes());
    expect(zeroFile.tensors.map((t) => t.byteSize)).toEqual([0, 0, 0]);
  });
});

/** Where the uint64 length before a string's bytes starts (what the reader reports for the string). */
function regionLengthStart(b: Base, bytesRegion: Region): number {
  const index = b.layout.regions.indexOf(bytesRegion);
  const length = b.layout.regions[index - 1];
  if (!length || length.kind !== "length") throw new Error(`no length before ${bytesRegion.field}`);
  return length.start;
}
