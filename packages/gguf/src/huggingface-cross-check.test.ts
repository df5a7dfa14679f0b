/**
 * Cross-checks `readGGUF` against an independent implementation, `@huggingface/gguf`, on files
 * written by `writeGGUF`: every metadata key, value and value type, and every tensor info, must
 * agree. Where the two readers differ by design (nesting depth, strictness on malformed input,
 * a leading byte-order mark), a test pins the difference down so that a change on either side
 * shows up.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GGUFParseOutput, type GGUFTypedMetadata, GGMLQuantizationType, gguf } from "@huggingface/gguf";
import { afterAll, describe, expect, it } from "vitest";
import { GGMLType, GGML_TYPES, tensorByteSize } from "./ggml-type";
import { GGUFError } from "./gguf-error";
import type { GGUFFile } from "./gguf-file";
import { type GGUFArrayValue, type GGUFValue, VALUE_TYPE_IDS, ggufValue } from "./gguf-value";
import { openGGUF, readGGUF } from "./read-gguf";
import { Random } from "./testing/gguf-layout";
import { type GGUFTensorToWrite, type GGUFToWrite, writeGGUF, writeGGUFFile } from "./write-gguf";

const directory = mkdtempSync(join(tmpdir(), "memra-hf-cross-check-"));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

let fileCounter = 0;
async function writeTemp(file: GGUFToWrite): Promise<string> {
  const path = join(directory, `case-${fileCounter++}.gguf`);
  await writeGGUFFile(path, file);
  return path;
}

async function writeTempBytes(bytes: Uint8Array): Promise<string> {
  const path = join(directory, `case-${fileCounter++}.gguf`);
  await Bun.write(path, bytes);
  return path;
}

type HFResult = GGUFParseOutput & { typedMetadata: GGUFTypedMetadata };

function huggingface(path: string): Promise<HFResult> {
  return gguf(path, { allowLocalFile: true, typedMetadata: true });
}

/** Our value as @huggingface/gguf represents it: plain arrays, bigints for 64-bit integers. */
function normalise(value: GGUFValue): unknown {
  if (value.type !== "array") return value.value;
  if (value.itemType === "array") return (value.items as GGUFArrayValue[]).map(normalise);
  return Array.from(value.items as ArrayLike<unknown>);
}

const HF_BOOKKEEPING = new Set(["version", "tensor_count", "kv_count"]);

/** Asserts that both readers agree on everything in the file; returns the number of checks. */
function assertAgree(ours: GGUFFile, theirs: HFResult): number {
  let checks = 0;
  const metadata = theirs.metadata as unknown as Record<string, unknown>;
  const typed = theirs.typedMetadata as unknown as Record<string, { value: unknown; type: number; subType?: number }>;
  expect(metadata.version).toBe(ours.version);
  expect(metadata.tensor_count).toBe(BigInt(ours.tensors.length));
  expect(metadata.kv_count).toBe(BigInt(ours.metadata.size));
  expect(Object.keys(metadata).filter((k) => !HF_BOOKKEEPING.has(k))).toEqual([...ours.metadata.keys()]);
  for (const [key, value] of ours.metadata) {
    expect(metadata[key], key).toEqual(normalise(value));
    expect(typed[key]?.type, `${key} type`).toBe(VALUE_TYPE_IDS[value.type]);
    if (value.type === "array") expect(typed[key]?.subType, `${key} item type`).toBe(VALUE_TYPE_IDS[value.itemType]);
    checks++;
  }
  expect(theirs.tensorInfos.length).toBe(ours.tensors.length);
  ours.tensors.forEach((t, i) => {
    const info = theirs.tensorInfos[i]!;
    expect(
      { name: info.name, n_dims: info.n_dims, shape: info.shape.map(Number), dtype: info.dtype, offset: info.offset },
      t.name,
    ).toEqual({ name: t.name, n_dims: t.shape.length, shape: [...t.shape], dtype: t.type, offset: BigInt(t.offset) });
    checks++;
  });
  expect(theirs.tensorDataOffset).toBe(BigInt(ours.dataOffset));
  expect(theirs.littleEndian).toBe(true);
  return checks;
}

function tensor(name: string, type: GGMLType, shape: number[], random: Random): GGUFTensorToWrite {
  const size = Number(tensorByteSize(type, shape));
  return { name, type, shape, data: () => random.bytes(size) };
}

function everyScalarAndArray(): Map<string, GGUFValue> {
  return new Map<string, GGUFValue>([
    ["general.architecture", ggufValue.string("qwen3")],
    ["general.name", ggufValue.string("Cross-check 模型 🙂 ünïcödé")],
    ["test.uint8", ggufValue.uint8(255)],
    ["test.int8", ggufValue.int8(-128)],
    ["test.uint16", ggufValue.uint16(65535)],
    ["test.int16", ggufValue.int16(-32768)],
    ["test.uint32", ggufValue.uint32(4294967295)],
    ["test.int32", ggufValue.int32(-2147483648)],
    ["test.float32", ggufValue.float32(Math.fround(3.14159))],
    ["test.float32.nan", ggufValue.float32(Number.NaN)],
    ["test.float32.negative_zero", ggufValue.float32(-0)],
    ["test.float32.infinity", ggufValue.float32(Number.NEGATIVE_INFINITY)],
    ["test.float64", ggufValue.float64(-1e300)],
    ["test.bool.true", ggufValue.bool(true)],
    ["test.bool.false", ggufValue.bool(false)],
    ["test.uint64", ggufValue.uint64(2n ** 64n - 1n)],
    ["test.int64", ggufValue.int64(-(2n ** 63n))],
    ["test.string.empty", ggufValue.string("")],
    ["test.string.long", ggufValue.string("{% for m in messages %}{{ m.content }}{% endfor %}\n".repeat(200))],
    ["test.array.uint8", ggufValue.array("uint8", Uint8Array.of(0, 1, 255))],
    ["test.array.int8", ggufValue.array("int8", Int8Array.of(-128, 0, 127))],
    ["test.array.uint16", ggufValue.array("uint16", Uint16Array.of(1, 65535))],
    ["test.array.int16", ggufValue.array("int16", Int16Array.of(-32768, 32767))],
    ["test.array.uint32", ggufValue.array("uint32", Uint32Array.of(7, 4294967295))],
    ["test.array.int32", ggufValue.int32Array([-5, 5, 2147483647])],
    ["test.array.float32", ggufValue.float32Array([0.5, -0, Number.POSITIVE_INFINITY, 1e-45])],
    ["test.array.float64", ggufValue.array("float64", Float64Array.of(Math.PI, Number.MIN_VALUE))],
    ["test.array.uint64", ggufValue.array("uint64", BigUint64Array.of(0n, 2n ** 64n - 1n))],
    ["test.array.int64", ggufValue.array("int64", BigInt64Array.of(-(2n ** 63n), 42n))],
    ["test.array.bool", ggufValue.array("bool", [true, false, true])],
    ["test.array.string", ggufValue.stringArray(["a", "", "Ġthe", "<|im_end|>", "日本語", "🙂🙃", "é".repeat(100)])],
    ["test.array.empty.int32", ggufValue.int32Array([])],
    ["test.array.empty.string", ggufValue.stringArray([])],
    [
      "test.array.nested",
      ggufValue.array("array", [
        ggufValue.int32Array([1, 2]),
        ggufValue.array("array", [ggufValue.stringArray(["deep", "ßtring"]), ggufValue.stringArray([])]),
        ggufValue.array("float32", new Float32Array(0)),
      ]),
    ],
    // @huggingface/gguf reads at most four array levels.
    ["test.array.depth4", nested(4, ggufValue.array("uint16", Uint16Array.of(9, 10)))],
  ]);
}

function nested(levels: number, leaf: GGUFArrayValue): GGUFArrayValue {
  let value = leaf;
  for (let i = 1; i < levels; i++) value = ggufValue.array("array", [value]);
  return value;
}

/** Metadata a real Qwen3 GGUF carries, with a full-size (151,936-token) vocabulary. */
function qwen3LikeMetadata(random: Random): Map<string, GGUFValue> {
  const vocab = 151936;
  const letters = "abcdefghijklmnopqrstuvwxyzĠĊ日本語é";
  const piece = (): string => {
    let s = random.int(10) < 6 ? "Ġ" : "";
    for (let i = 0, n = 1 + random.int(8); i < n; i++) s += letters[random.int(letters.length)];
    return s;
  };
  const tokens = Array.from({ length: vocab }, (_, i) => (i >= 151643 ? `<|special_${i}|>` : `${piece()}${i}`));
  const tokenTypes = new Int32Array(vocab).fill(1).fill(3, 151643);
  return new Map<string, GGUFValue>([
    ["general.architecture", ggufValue.string("qwen3")],
    ["general.type", ggufValue.string("model")],
    ["general.name", ggufValue.string("Qwen3 0.6B")],
    ["general.file_type", ggufValue.uint32(15)],
    ["general.quantization_version", ggufValue.uint32(2)],
    ["qwen3.block_count", ggufValue.uint32(2)],
    ["qwen3.context_length", ggufValue.uint32(40960)],
    ["qwen3.embedding_length", ggufValue.uint32(256)],
    ["qwen3.feed_forward_length", ggufValue.uint32(512)],
    ["qwen3.attention.head_count", ggufValue.uint32(4)],
    ["qwen3.attention.head_count_kv", ggufValue.uint32(2)],
    ["qwen3.attention.key_length", ggufValue.uint32(64)],
    ["qwen3.attention.value_length", ggufValue.uint32(64)],
    ["qwen3.rope.freq_base", ggufValue.float32(1_000_000)],
    ["qwen3.attention.layer_norm_rms_epsilon", ggufValue.float32(1e-6)],
    ["tokenizer.ggml.model", ggufValue.string("gpt2")],
    ["tokenizer.ggml.pre", ggufValue.string("qwen2")],
    ["tokenizer.ggml.tokens", ggufValue.stringArray(tokens)],
    ["tokenizer.ggml.token_type", ggufValue.array("int32", tokenTypes)],
    ["tokenizer.ggml.merges", ggufValue.stringArray(Array.from({ length: 50_000 }, () => `${piece()} ${piece()}`))],
    ["tokenizer.ggml.eos_token_id", ggufValue.uint32(151645)],
    ["tokenizer.ggml.padding_token_id", ggufValue.uint32(151643)],
    ["tokenizer.ggml.add_bos_token", ggufValue.bool(false)],
    ["tokenizer.chat_template", ggufValue.string("{%- if tools %}…{%- endif %}\n".repeat(100))],
  ]);
}

/** Tensors of every weight type a Qwen3 GGUF uses, in llama.cpp's names and shapes. */
function qwen3LikeTensors(random: Random): GGUFTensorToWrite[] {
  const hidden = 256;
  const types = [GGMLType.Q4_K, GGMLType.Q6_K, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q5_K];
  const out = [tensor("token_embd.weight", GGMLType.Q6_K, [hidden, 1000], random), tensor("output_norm.weight", GGMLType.F32, [hidden], random)];
  for (let layer = 0; layer < 2; layer++) {
    const b = `blk.${layer}`;
    const type = (i: number) => types[(layer * 5 + i) % types.length]!;
    out.push(
      tensor(`${b}.attn_norm.weight`, GGMLType.F32, [hidden], random),
      tensor(`${b}.attn_q.weight`, type(0), [hidden, 256], random),
      tensor(`${b}.attn_k.weight`, type(1), [hidden, 128], random),
      tensor(`${b}.attn_v.weight`, type(2), [hidden, 128], random),
      tensor(`${b}.attn_output.weight`, type(3), [256, hidden], random),
      tensor(`${b}.attn_q_norm.weight`, GGMLType.F16, [64], random),
      tensor(`${b}.attn_k_norm.weight`, GGMLType.BF16, [64], random),
      tensor(`${b}.ffn_norm.weight`, GGMLType.F32, [hidden], random),
      tensor(`${b}.ffn_gate.weight`, type(4), [hidden, 512], random),
      tensor(`${b}.ffn_up.weight`, type(5), [hidden, 512], random),
      tensor(`${b}.ffn_down.weight`, type(6), [512, hidden], random),
    );
  }
  return out;
}

describe("readGGUF agrees with @huggingface/gguf", () => {
  it("uses the same ggml type ids (every type of our table is in theirs, by name)", () => {
    const theirs = GGMLQuantizationType as unknown as Record<string, number>;
    for (const info of GGML_TYPES) expect(theirs[info.name.toUpperCase()], info.name).toBe(info.type);
  });

  it("on every scalar type, numeric, bool and string arrays, and arrays nested four deep", async () => {
    const random = new Random(11);
    const tensors = [
      tensor("a.f32", GGMLType.F32, [3, 2], random),
      tensor("b.f16", GGMLType.F16, [5], random),
      tensor("c.bf16", GGMLType.BF16, [7, 1, 1], random),
      tensor("d.q8_0", GGMLType.Q8_0, [64, 2, 1, 1], random),
    ];
    const path = await writeTemp({ metadata: everyScalarAndArray(), tensors });
    expect(assertAgree(openGGUF(path), await huggingface(path))).toBe(everyScalarAndArray().size + tensors.length);
  });

  it("on a Qwen3-shaped file with a full-size vocabulary and every k-quant and legacy type", async () => {
    const random = new Random(12);
    const path = await writeTemp({ metadata: qwen3LikeMetadata(random), tensors: qwen3LikeTensors(random) });
    const ours = openGGUF(path);
    // The vocabulary alone is bigger than @huggingface/gguf's 2 MB read chunk.
    expect(ours.tensors[0]!.offset).toBe(0);
    expect(ours.dataOffset).toBeGreaterThan(2 * 10 ** 6);
    const theirs = await huggingface(path);
    assertAgree(ours, theirs);
    expect(new Set(ours.tensors.map((t) => t.type)).size).toBe(11);
  });

  it("on every ggml type, a non-default alignment, and version 2", async () => {
    const random = new Random(13);
    const tensors = GGML_TYPES.map((info, i) => tensor(`t${i}.${info.name}`, info.type, [info.blockSize * (1 + (i % 3)), 1 + (i % 2)], random));
    for (const [version, alignment] of [
      [3, 128],
      [2, 1],
      [3, 8],
    ] as const) {
      const path = await writeTemp({ version, metadata: { "general.alignment": ggufValue.uint32(alignment), "general.name": ggufValue.string(`v${version}`) }, tensors });
      const ours = openGGUF(path);
      expect(ours.alignment).toBe(alignment);
      expect(ours.version).toBe(version);
      assertAgree(ours, await huggingface(path));
    }
  });

  it("on a metadata-only file and an empty one", async () => {
    const cases: Array<Record<string, GGUFValue>> = [{ "general.name": ggufValue.string("no tensors") }, {}];
    for (const metadata of cases) {
      const path = await writeTemp({ metadata });
      assertAgree(openGGUF(path), await huggingface(path));
    }
  });

  it("on a synthetic Qwen3 model from @memra/synthetic, when that package resolves", async (context) => {
    const synthetic = await loadSynthetic();
    if (typeof synthetic === "string") {
      context.skip(`@memra/synthetic cannot be loaded here: ${synthetic}`);
      return;
    }
    const path = await synthetic.syntheticModelFile(synthetic.resolveOptions("tiny", { weightType: "q4_K_M" }));
    const ours = openGGUF(path);
    expect(ours.architecture).toBe("qwen3");
    expect(ours.getArray("tokenizer.ggml.tokens")!.items.length).toBe(151936);
    assertAgree(ours, await huggingface(path));
  });
});

/** The part of @memra/synthetic used here (it depends on this package, so it is loaded lazily). */
interface SyntheticModule {
  syntheticModelFile(options: unknown): Promise<string>;
  resolveOptions(preset: string, overrides?: Record<string, unknown>): unknown;
}

/** @memra/synthetic when it resolves (by name, or from the workspace), else why not. */
async function loadSynthetic(): Promise<SyntheticModule | string> {
  const reasons: string[] = [];
  for (const specifier of ["@memra/synthetic", new URL("../../synthetic/src/index.ts", import.meta.url).href]) {
    try {
      const module = (await import(/* @vite-ignore */ specifier)) as Partial<SyntheticModule>;
      if (typeof module.syntheticModelFile === "function" && typeof module.resolveOptions === "function") return module as SyntheticModule;
      reasons.push(`${specifier}: no syntheticModelFile/resolveOptions export`);
    } catch (error) {
      reasons.push(`${specifier}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return reasons.join("; ");
}

describe("where readGGUF and @huggingface/gguf differ by design", () => {
  it("@huggingface/gguf stops at four array levels; we allow eight", async () => {
    const path = await writeTemp({ metadata: { deep: nested(5, ggufValue.array("int8", Int8Array.of(1))) } });
    expect(openGGUF(path).getArray("deep")!.itemType).toBe("array");
    await expect(huggingface(path)).rejects.toThrow(/Nested ARRAY depth 4 exceeds maximum allowed/);
  });

  it("@huggingface/gguf strips a leading byte-order mark from strings; we keep the bytes as written", async () => {
    const path = await writeTemp({ metadata: { bom: ggufValue.string("\uFEFFtext"), tokens: ggufValue.stringArray(["\uFEFF", "a\uFEFF"]) } });
    expect(openGGUF(path).getString("bom")).toBe("\uFEFFtext");
    expect(openGGUF(path).getArray("tokens")!.items).toEqual(["\uFEFF", "a\uFEFF"]);
    const theirs = (await huggingface(path)).metadata as unknown as Record<string, unknown>;
    expect(theirs.bom).toBe("text");
    expect(theirs.tokens).toEqual(["", "a\uFEFF"]);
  });

  it("@huggingface/gguf accepts malformed input that we reject", async () => {
    const base = (metadata: Record<string, GGUFValue>, tensors: GGUFTensorToWrite[] = []) => writeGGUF({ metadata, tensors });
    const patch = (bytes: Uint8Array, find: number[], replace: number[]) => {
      const copy = bytes.slice();
      const at = indexOf(copy, find);
      copy.set(replace, at);
      return copy;
    };
    const f32 = { name: "t", type: GGMLType.F32, shape: [8], data: new Uint8Array(32) };
    const cases: Array<[string, Uint8Array, RegExp]> = [
      // bool 2 (the value byte follows the type id 7)
      ["bool byte 2", patch(base({ b: ggufValue.bool(true) }), [7, 0, 0, 0, 1], [7, 0, 0, 0, 2]), /bool must be 0 or 1/],
      ["invalid UTF-8", patch(base({ s: ggufValue.string("abc") }), [0x61, 0x62, 0x63], [0x61, 0xff, 0x63]), /not valid UTF-8/],
      ["removed ggml type 4", patch(base({}, [f32]), [0x74, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0x74, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0]), /unknown ggml type 4/],
      ["misaligned tensor offset", patch(base({}, [f32, { ...f32, name: "u" }]), [0x75, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32], [0x75, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 33]), /not a multiple of the alignment/],
      ["overlapping tensors", patch(base({}, [f32, { ...f32, name: "u" }]), [0x75, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32], [0x75, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), /overlaps/],
      ["duplicate key", patch(base({ ka: ggufValue.uint8(1), kb: ggufValue.uint8(2) }), [0x6b, 0x62], [0x6b, 0x61]), /duplicate key/],
      ["tensor data past the end", base({}, [f32]).subarray(0, 60), /past the end|ends before/],
    ];
    for (const [label, bytes, ours] of cases) {
      expect(() => readGGUF(bytes), label).toThrow(GGUFError);
      expect(() => readGGUF(bytes), label).toThrow(ours);
      await expect(huggingface(await writeTempBytes(bytes)), label).resolves.toBeDefined();
    }
  });
});

function indexOf(haystack: Uint8Array, needle: number[]): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  throw new Error(`pattern ${needle} not found`);
}
