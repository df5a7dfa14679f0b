/**
 * Writes the trained demo model as a `qwen3` GGUF with memra's GGUF writer.
 *
 *   bun tools/demo-model/export.ts DATA_DIR OUT.gguf [--type q8_0|f16|f32]
 *
 * Reads DATA_DIR/weights.json + weights.bin (train.py), DATA_DIR/tokenizer.json (prepare-data.ts)
 * and DATA_DIR/train-config.json. Matrices are stored as --type (default q8_0), norms as f32;
 * the output projection is tied to token_embd (no output.weight), as llama.cpp's qwen3 allows.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  ARCHITECTURE_KEYS,
  GENERAL_KEYS,
  GGMLType,
  type GGUFTensorToWrite,
  type GGUFValue,
  TOKENIZER_KEYS,
  architectureKey,
  ggmlTypeFromName,
  ggufValue,
  quantize,
  writeGGUFFile,
} from "../../packages/gguf/src/index";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { type: { type: "string", default: "q8_0" } } });
const [dataDir, outPath] = positionals;
if (!dataDir || !outPath) throw new Error("usage: bun tools/demo-model/export.ts DATA_DIR OUT.gguf [--type q8_0|f16|f32]");
const matrixType = ggmlTypeFromName(values.type!);
if (matrixType === undefined) throw new Error(`--type ${values.type}: not a ggml type name (q8_0, f16, f32, ...)`);
const FILE_TYPES: Record<string, number> = { f32: 0, f16: 1, q8_0: 7 };
if (FILE_TYPES[values.type!] === undefined) throw new Error(`--type must be q8_0, f16 or f32, got ${values.type}`);

interface TrainConfig {
  model: { vocab: number; hidden: number; layers: number; heads: number; kv_heads: number; head_dim: number; ffn: number; context: number; rope_theta: number; norm_eps: number };
  steps: number;
  seed: number;
}
const config = JSON.parse(readFileSync(join(dataDir, "train-config.json"), "utf8")) as TrainConfig;
const vocabulary = JSON.parse(readFileSync(join(dataDir, "tokenizer.json"), "utf8")) as {
  tokens: string[];
  tokenTypes: number[];
  merges: string[];
  bosTokenId: number;
  eosTokenId: number;
  paddingTokenId: number;
  chatTemplate: string;
};
const index = JSON.parse(readFileSync(join(dataDir, "weights.json"), "utf8")) as Array<{ name: string; shape: number[] }>;
const raw = readFileSync(join(dataDir, "weights.bin"));
const floats = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);

const m = config.model;
if (vocabulary.tokens.length !== m.vocab) throw new Error(`tokenizer has ${vocabulary.tokens.length} tokens, the model ${m.vocab}`);
const key = (template: string) => architectureKey(template, "qwen3");
const metadata: Array<[string, GGUFValue]> = [
  [GENERAL_KEYS.architecture, ggufValue.string("qwen3")],
  [GENERAL_KEYS.name, ggufValue.string(`memra-demo-qwen3-${m.layers}x${m.hidden}`)],
  [GENERAL_KEYS.fileType, ggufValue.uint32(FILE_TYPES[values.type!]!)],
  [GENERAL_KEYS.quantizationVersion, ggufValue.uint32(2)],
  ["general.license", ggufValue.string("MIT")],
  ["general.description", ggufValue.string("memra's demo model, trained on fortunes, the Jargon File, The Devil's Dictionary and WordNet glosses (see MODEL_CARD.md)")],
  [key(ARCHITECTURE_KEYS.blockCount), ggufValue.uint32(m.layers)],
  [key(ARCHITECTURE_KEYS.contextLength), ggufValue.uint32(m.context)],
  [key(ARCHITECTURE_KEYS.embeddingLength), ggufValue.uint32(m.hidden)],
  [key(ARCHITECTURE_KEYS.feedForwardLength), ggufValue.uint32(m.ffn)],
  [key(ARCHITECTURE_KEYS.headCount), ggufValue.uint32(m.heads)],
  [key(ARCHITECTURE_KEYS.headCountKv), ggufValue.uint32(m.kv_heads)],
  [key(ARCHITECTURE_KEYS.ropeFreqBase), ggufValue.float32(m.rope_theta)],
  [key(ARCHITECTURE_KEYS.layerNormRmsEpsilon), ggufValue.float32(m.norm_eps)],
  [key(ARCHITECTURE_KEYS.keyLength), ggufValue.uint32(m.head_dim)],
  [key(ARCHITECTURE_KEYS.valueLength), ggufValue.uint32(m.head_dim)],
  [TOKENIZER_KEYS.model, ggufValue.string("gpt2")],
  [TOKENIZER_KEYS.pre, ggufValue.string("qwen2")],
  [TOKENIZER_KEYS.tokens, ggufValue.stringArray(vocabulary.tokens)],
  [TOKENIZER_KEYS.tokenType, ggufValue.array("int32", Int32Array.from(vocabulary.tokenTypes))],
  [TOKENIZER_KEYS.merges, ggufValue.stringArray(vocabulary.merges)],
  [TOKENIZER_KEYS.eosTokenId, ggufValue.uint32(vocabulary.eosTokenId)],
  [TOKENIZER_KEYS.paddingTokenId, ggufValue.uint32(vocabulary.paddingTokenId)],
  [TOKENIZER_KEYS.bosTokenId, ggufValue.uint32(vocabulary.bosTokenId)],
  [TOKENIZER_KEYS.addBosToken, ggufValue.bool(false)],
  [TOKENIZER_KEYS.chatTemplate, ggufValue.string(vocabulary.chatTemplate)],
];

const tensors: GGUFTensorToWrite[] = [];
let offset = 0;
for (const { name, shape } of index) {
  const count = shape.reduce((a, b) => a * b, 1);
  const data = floats.slice(offset, offset + count);
  offset += count;
  if (!data.every(Number.isFinite)) throw new Error(`${name}: weights are not all finite`);
  // torch keeps [rows, columns]; GGUF lists dimensions innermost first.
  const ggufShape = [...shape].reverse();
  const type = shape.length === 2 ? matrixType : GGMLType.F32;
  tensors.push({ name, type, shape: ggufShape, data: () => (type === GGMLType.F32 ? new Uint8Array(data.buffer) : quantize(type, data)) });
}
if (offset !== floats.length) throw new Error(`weights.bin holds ${floats.length} floats, weights.json describes ${offset}`);
const bytes = await writeGGUFFile(outPath, { metadata: new Map(metadata), tensors });
console.error(`wrote ${outPath}: ${(bytes / 1e6).toFixed(2)} MB, ${tensors.length} tensors (${values.type} matrices)`);
