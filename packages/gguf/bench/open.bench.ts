/**
 * How long does `openGGUF` take on a file shaped exactly like Qwen3-0.6B (f16 weights, f32 norms,
 * full-size tokenizer metadata)? Run: `bun packages/gguf/bench/open.bench.ts [--runs N]`.
 *
 * The file (~1.2 GB) is built once and cached in os.tmpdir(); tensor data are zeros, written tensor
 * by tensor so that memory stays low. Prints the median open time, and a breakdown of where the
 * time goes (the tokenizer's ~300k strings) so that a regression can be told apart from noise.
 */
import { existsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GGMLType, type GGUFTensorToWrite, type GGUFValue, ggufValue, openGGUF, readGGUF, tensorByteSize, writeGGUF, writeGGUFFile } from "../src/index";

const LAYOUT_VERSION = 1;
const QWEN3_0_6B = {
  layers: 28,
  hidden: 1024,
  heads: 16,
  kvHeads: 8,
  headDim: 128,
  ffn: 3072,
  vocab: 151936,
  merges: 151387,
  contextLength: 40960,
} as const;

const runsArgument = process.argv.indexOf("--runs");
const RUNS = runsArgument >= 0 ? Number(process.argv[runsArgument + 1]) : 21;

/** A deterministic xorshift32, so that the cached file is the same on every machine. */
function xorshift(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
}

/**
 * Token strings shaped like a byte-level BPE vocabulary: ~60% start with "Ġ" (a space), most
 * characters are ASCII letters, a few are the non-ASCII stand-ins GPT-2 uses for other bytes.
 */
function vocabulary(): { tokens: string[]; merges: string[] } {
  const next = xorshift(0x51e3);
  const stand = "ĠĊĉÃ©Â¤ã€ģæĺ¯çļĦ";
  const piece = (max: number): string => {
    let s = "";
    const length = 1 + (next() % max);
    for (let i = 0; i < length; i++) s += next() % 10 === 0 ? stand[next() % stand.length]! : String.fromCharCode(97 + (next() % 26));
    return s;
  };
  const tokens: string[] = [];
  for (let i = 0; i < QWEN3_0_6B.vocab; i++) {
    if (i >= 151643) tokens.push(i < 151669 ? `<|special_${i - 151643}|>` : `<|extra_${i}|>`);
    else if (i < 256) tokens.push(String.fromCharCode(0x21 + (i % 94)) + (i >= 94 ? "Ġ".repeat(i % 3) : ""));
    else tokens.push((next() % 10 < 6 ? "Ġ" : "") + piece(9));
  }
  const merges: string[] = [];
  for (let i = 0; i < QWEN3_0_6B.merges; i++) merges.push(`${next() % 10 < 5 ? "Ġ" : ""}${piece(5)} ${piece(6)}`);
  return { tokens, merges };
}

function metadata(): Map<string, GGUFValue> {
  const { layers, hidden, heads, kvHeads, headDim, ffn, vocab, contextLength } = QWEN3_0_6B;
  const { tokens, merges } = vocabulary();
  const tokenTypes = new Int32Array(vocab).fill(1);
  tokenTypes.fill(3, 151643, 151669);
  tokenTypes.fill(4, 151669);
  return new Map<string, GGUFValue>([
    ["general.architecture", ggufValue.string("qwen3")],
    ["general.type", ggufValue.string("model")],
    ["general.name", ggufValue.string("Qwen3 0.6B (layout benchmark)")],
    ["general.basename", ggufValue.string("Qwen3")],
    ["general.size_label", ggufValue.string("0.6B")],
    ["general.license", ggufValue.string("apache-2.0")],
    ["general.file_type", ggufValue.uint32(1)],
    ["general.quantization_version", ggufValue.uint32(2)],
    ["qwen3.block_count", ggufValue.uint32(layers)],
    ["qwen3.context_length", ggufValue.uint32(contextLength)],
    ["qwen3.embedding_length", ggufValue.uint32(hidden)],
    ["qwen3.feed_forward_length", ggufValue.uint32(ffn)],
    ["qwen3.attention.head_count", ggufValue.uint32(heads)],
    ["qwen3.attention.head_count_kv", ggufValue.uint32(kvHeads)],
    ["qwen3.attention.key_length", ggufValue.uint32(headDim)],
    ["qwen3.attention.value_length", ggufValue.uint32(headDim)],
    ["qwen3.rope.freq_base", ggufValue.float32(1_000_000)],
    ["qwen3.attention.layer_norm_rms_epsilon", ggufValue.float32(1e-6)],
    ["tokenizer.ggml.model", ggufValue.string("gpt2")],
    ["tokenizer.ggml.pre", ggufValue.string("qwen2")],
    ["tokenizer.ggml.tokens", ggufValue.stringArray(tokens)],
    ["tokenizer.ggml.token_type", ggufValue.array("int32", tokenTypes)],
    ["tokenizer.ggml.merges", ggufValue.stringArray(merges)],
    ["tokenizer.ggml.eos_token_id", ggufValue.uint32(151645)],
    ["tokenizer.ggml.padding_token_id", ggufValue.uint32(151643)],
    ["tokenizer.ggml.bos_token_id", ggufValue.uint32(151643)],
    ["tokenizer.ggml.add_bos_token", ggufValue.bool(false)],
    ["tokenizer.chat_template", ggufValue.string("{%- for message in messages %}{{ message.content }}{%- endfor %}\n".repeat(60))],
  ]);
}

/** llama.cpp's tensor names and shapes (innermost dimension first) for Qwen3 with tied embeddings. */
function tensors(): GGUFTensorToWrite[] {
  const { layers, hidden, heads, kvHeads, headDim, ffn, vocab } = QWEN3_0_6B;
  const zeros = (type: GGMLType, shape: number[]) => () => new Uint8Array(Number(tensorByteSize(type, shape)));
  const t = (name: string, type: GGMLType, shape: number[]): GGUFTensorToWrite => ({ name, type, shape, data: zeros(type, shape) });
  const out = [t("token_embd.weight", GGMLType.F16, [hidden, vocab]), t("output_norm.weight", GGMLType.F32, [hidden])];
  for (let i = 0; i < layers; i++) {
    const b = `blk.${i}`;
    out.push(
      t(`${b}.attn_norm.weight`, GGMLType.F32, [hidden]),
      t(`${b}.attn_q.weight`, GGMLType.F16, [hidden, heads * headDim]),
      t(`${b}.attn_k.weight`, GGMLType.F16, [hidden, kvHeads * headDim]),
      t(`${b}.attn_v.weight`, GGMLType.F16, [hidden, kvHeads * headDim]),
      t(`${b}.attn_output.weight`, GGMLType.F16, [heads * headDim, hidden]),
      t(`${b}.attn_q_norm.weight`, GGMLType.F32, [headDim]),
      t(`${b}.attn_k_norm.weight`, GGMLType.F32, [headDim]),
      t(`${b}.ffn_norm.weight`, GGMLType.F32, [hidden]),
      t(`${b}.ffn_gate.weight`, GGMLType.F16, [hidden, ffn]),
      t(`${b}.ffn_up.weight`, GGMLType.F16, [hidden, ffn]),
      t(`${b}.ffn_down.weight`, GGMLType.F16, [ffn, hidden]),
    );
  }
  return out;
}

async function modelFile(): Promise<string> {
  const path = join(tmpdir(), `memra-bench-qwen3-0.6b-layout-v${LAYOUT_VERSION}.gguf`);
  const expected = `${path}.size`;
  if (existsSync(path) && existsSync(expected) && statSync(path).size === Number(await Bun.file(expected).text())) return path;
  const started = performance.now();
  console.log(`building ${path} ...`);
  const size = await writeGGUFFile(path, { metadata: metadata(), tensors: tensors() });
  await Bun.write(expected, String(size));
  console.log(`  ${(size / 2 ** 30).toFixed(2)} GiB in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return path;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function time(runs: number, body: () => void): number {
  body(); // warm-up (JIT, page cache)
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    // Collect the previous run's garbage outside the timed region, so that runs do not pay for each other.
    Bun.gc(true);
    const started = performance.now();
    body();
    samples.push(performance.now() - started);
  }
  return median(samples);
}

const path = await modelFile();
let tensorCount = 0;
let totalBytes = 0;
const openMs = time(RUNS, () => {
  const file = openGGUF(path);
  tensorCount = 0;
  totalBytes = 0;
  for (const t of file.tensors) {
    tensorCount++;
    totalBytes += file.tensorData(t).byteLength;
  }
});
console.log(`openGGUF + list ${tensorCount} tensors (${(totalBytes / 2 ** 30).toFixed(2)} GiB): median ${openMs.toFixed(1)} ms over ${RUNS} runs`);

// Breakdown: the header parsed from memory, with and without the tokenizer's string arrays.
const mapped = Bun.mmap(path, { shared: false });
const headerMs = time(RUNS, () => readGGUF(mapped));
const file = readGGUF(mapped);
const withoutStrings = new Map(file.metadata);
withoutStrings.delete("tokenizer.ggml.tokens");
withoutStrings.delete("tokenizer.ggml.merges");
const stripped = writeGGUF({ metadata: withoutStrings, tensors: file.tensors.map((t) => ({ ...t, shape: [0], type: GGMLType.F32, data: new Uint8Array(0) })) });
const strippedMs = time(RUNS, () => readGGUF(stripped));
const tokensOnly = writeGGUF({ metadata: { t: file.metadata.get("tokenizer.ggml.tokens")!, m: file.metadata.get("tokenizer.ggml.merges")! } });
const stringsMs = time(RUNS, () => readGGUF(tokensOnly));
const strings = (file.getArray("tokenizer.ggml.tokens")!.items.length + file.getArray("tokenizer.ggml.merges")!.items.length).toLocaleString("en-US");
console.log(`  readGGUF on the mapped bytes:           ${headerMs.toFixed(1)} ms (header ${(file.dataOffset / 2 ** 20).toFixed(1)} MiB)`);
console.log(`  of which the ${strings} token and merge strings: ${stringsMs.toFixed(1)} ms`);
console.log(`  everything but those strings:           ${strippedMs.toFixed(1)} ms`);
