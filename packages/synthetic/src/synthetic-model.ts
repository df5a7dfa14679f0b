import {
  ARCHITECTURE_KEYS,
  GENERAL_KEYS,
  GGMLType,
  TOKENIZER_KEYS,
  type GGUFTensorToWrite,
  type GGUFToWrite,
  type GGUFValue,
  architectureKey,
  ggmlTypeFromName,
  ggmlTypeInfo,
  ggmlTypeName,
  ggufValue,
  randomBlocks,
} from "@memra/gguf";
import { quantizeWeights } from "./native-quantize";
import { SeededRandom, hashString } from "./random";
import { QWEN3_VOCAB_SIZE, checkVocabularySize, qwen3TokenizerMetadata } from "./qwen3-vocabulary";

/** Bumped whenever the generator's output for the same options changes (part of the cache key). */
export const GENERATOR_VERSION = 1;

/** A single ggml weight type, or a llama.cpp-style mix. */
export type WeightType =
  | "f32"
  | "f16"
  | "bf16"
  | "q8_0"
  | "q4_0"
  | "q4_1"
  | "q5_0"
  | "q5_1"
  | "q2_K"
  | "q3_K"
  | "q4_K"
  | "q5_K"
  | "q6_K"
  | "q4_K_M"
  | "iq2_xxs"
  | "iq2_xs"
  | "iq2_s"
  | "iq3_xxs"
  | "iq3_s"
  | "iq1_s"
  | "iq1_m";

/**
 * The i-quant weight types (iq1_*, iq2_*, iq3_*): their ggml quantizers need an importance matrix or
 * a grid search that Memra does not port, so their matrices are random blocks (randomBlocks of
 * @memra/gguf) with the RMS the normal weights would have, not a quantization of those weights.
 */
const RANDOM_BLOCK_WEIGHT_TYPES: ReadonlySet<string> = new Set(["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"]);

export const WEIGHT_TYPES: readonly WeightType[] = [
  "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q4_K_M",
  "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m",
];

export interface SyntheticModelOptions {
  readonly architecture: "qwen3" | "qwen3moe";
  readonly layers: number;
  /** embedding_length */
  readonly hidden: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  /** feed_forward_length (dense models) */
  readonly ffn: number;
  /** MoE only: expert_count, expert_used_count, expert_feed_forward_length. */
  readonly experts?: number;
  readonly expertsUsed?: number;
  readonly expertFfn?: number;
  readonly tiedEmbeddings: boolean;
  readonly weightType: WeightType;
  readonly seed: number;
  readonly contextLength: number;
  readonly ropeFreqBase: number;
  readonly rmsNormEpsilon: number;
  /** An embedding model's pooling ({arch}.pooling_type), as Qwen3-Embedding's GGUFs carry it: absent by default. */
  readonly poolingType?: "mean" | "last";
  /** tokenizer.ggml.add_eos_token (Qwen3-Embedding: true); absent by default. */
  readonly addEosToken?: boolean;
  /**
   * A reranker as llama.cpp's converter writes Qwen3-Reranker: pooling_type rank, classifier labels
   * ["yes", "no"], a `cls.output.weight` head of two rows (random here; the LM head's "yes" and "no"
   * rows there) and the rerank prompt in `tokenizer.chat_template.rerank`.
   */
  readonly reranker?: boolean;
  /** `{arch}.rope.scaling.*`: type, factor and original context length (Qwen3's 128K GGUFs: yarn, 4, 32768); absent by default. */
  readonly ropeScaling?: { readonly type: "linear" | "yarn"; readonly factor: number; readonly originalContextLength?: number };
  /**
   * Tokens in the vocabulary (and rows of the LM head): Qwen3's 151,936 when absent, else the
   * vocabulary cut to this many (truncatedQwen3Vocabulary), for tests that compare backends with
   * each other on an emulator; llama.cpp's goldens are recorded on the whole vocabulary.
   */
  readonly vocabulary?: number;
  /**
   * For timing deep models: layers from this one on repeat the weights of layer `layer mod
   * distinctLayers` (the same bytes under their own names, each uploaded on its own), so that a
   * 36-layer model is generated in the time of an 8-layer one. Their quantization types are those
   * of the layer they repeat. Absent (or ≥ layers): every layer its own weights.
   */
  readonly distinctLayers?: number;
}

/** The rerank prompt llama.cpp's converter writes for Qwen3-Reranker (its default instruction). */
export const QWEN3_RERANK_TEMPLATE =
  '<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n';

const DENSE_DEFAULTS = {
  architecture: "qwen3",
  tiedEmbeddings: true,
  weightType: "f32",
  seed: 1,
  contextLength: 4096,
  ropeFreqBase: 1_000_000,
  rmsNormEpsilon: 1e-6,
} as const;

export const PRESETS = {
  /** The smallest useful model: 2 layers, hidden 64. */
  tiny: { ...DENSE_DEFAULTS, layers: 2, hidden: 64, heads: 4, kvHeads: 2, headDim: 16, ffn: 128 },
  /** Big enough for k-quants on every matrix (rows of 256). */
  small: { ...DENSE_DEFAULTS, layers: 2, hidden: 256, heads: 4, kvHeads: 2, headDim: 64, ffn: 512 },
  "tiny-moe": { ...DENSE_DEFAULTS, architecture: "qwen3moe", layers: 2, hidden: 64, heads: 4, kvHeads: 2, headDim: 16, ffn: 0, experts: 8, expertsUsed: 2, expertFfn: 32 },
  /** The exact shape of Qwen3-0.6B. */
  "qwen3-0.6b": { ...DENSE_DEFAULTS, layers: 28, hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, ffn: 3072, contextLength: 40960 },
  /** Qwen3-30B-A3B scaled down: 64 experts, 8 used, GQA 4. */
  "qwen3-30b-a3b-scaled": {
    ...DENSE_DEFAULTS,
    architecture: "qwen3moe",
    layers: 4,
    hidden: 512,
    heads: 8,
    kvHeads: 2,
    headDim: 64,
    ffn: 0,
    experts: 64,
    expertsUsed: 8,
    expertFfn: 256,
    contextLength: 40960,
  },
} as const satisfies Record<string, SyntheticModelOptions>;

export type PresetName = keyof typeof PRESETS;

export function resolveOptions(preset: PresetName, overrides: Partial<SyntheticModelOptions> = {}): SyntheticModelOptions {
  const base = PRESETS[preset] as SyntheticModelOptions;
  return { ...base, ...overrides };
}

// llama.cpp falls back to these when a row is not a whole number of k-quant blocks (llama-quant.cpp's
// tensor_type_fallback; older releases gave q2_K and q3_K iq4_nl).
const FALLBACK: Partial<Record<string, string>> = {
  q2_K: "q4_0", q3_K: "q4_0", q4_K: "q5_0", q5_K: "q5_1", q6_K: "q8_0",
  iq2_xxs: "iq4_nl", iq2_xs: "iq4_nl", iq2_s: "iq4_nl", iq3_xxs: "iq4_nl", iq3_s: "iq4_nl", iq1_s: "iq4_nl", iq1_m: "iq4_nl",
};

/** llama_ftype for `general.file_type` (q3_K: MOSTLY_Q3_K_S, the mix closest to all-q3_K). */
const FILE_TYPES: Record<WeightType, number> = {
  f32: 0, f16: 1, q4_0: 2, q4_1: 3, q8_0: 7, q5_0: 8, q5_1: 9, q2_K: 10, q3_K: 11, q4_K: 14, q5_K: 16, q6_K: 18, q4_K_M: 15, bf16: 32,
  iq2_xxs: 19, iq2_xs: 20, iq3_xxs: 23, iq1_s: 24, iq3_s: 26, iq2_s: 28, iq1_m: 31,
};

/** llama.cpp's use_more_bits: Q4_K_M gives these layers' attn_v / ffn_down six bits. */
function useMoreBits(layer: number, layers: number): boolean {
  return layer < layers / 8 || layer >= (7 * layers) / 8 || (layer - Math.floor(layers / 8)) % 3 === 2;
}

function chooseType(options: SyntheticModelOptions, role: string, layer: number, rowLength: number): GGMLType {
  let name: string = options.weightType;
  if (name === "q4_K_M") {
    name = "q4_K";
    if (role === "output" || (role === "token_embd" && options.tiedEmbeddings)) name = "q6_K";
    if ((role === "attn_v" || role === "ffn_down" || role === "ffn_down_exps") && useMoreBits(layer, options.layers)) name = "q6_K";
  }
  let type = ggmlTypeFromName(name)!;
  if (rowLength % ggmlTypeInfo(type)!.blockSize !== 0) type = ggmlTypeFromName(FALLBACK[name] ?? "f16")!;
  if (rowLength % ggmlTypeInfo(type)!.blockSize !== 0) type = GGMLType.F16;
  return type;
}

export function validateOptions(options: SyntheticModelOptions): void {
  const positive = ["layers", "hidden", "heads", "kvHeads", "headDim", "contextLength"] as const;
  for (const key of positive) {
    if (!Number.isInteger(options[key]) || options[key] <= 0) throw new RangeError(`${key} must be a positive integer, got ${options[key]}`);
  }
  if (options.heads % options.kvHeads !== 0) throw new RangeError(`heads (${options.heads}) must be a multiple of kvHeads (${options.kvHeads})`);
  if (options.headDim % 2 !== 0) throw new RangeError("headDim must be even (RoPE rotates pairs)");
  if (!WEIGHT_TYPES.includes(options.weightType)) throw new RangeError(`unknown weight type ${options.weightType}`);
  if (options.vocabulary !== undefined) checkVocabularySize(options.vocabulary);
  if (options.distinctLayers !== undefined && (!Number.isInteger(options.distinctLayers) || options.distinctLayers <= 0)) {
    throw new RangeError(`distinctLayers must be a positive integer, got ${options.distinctLayers}`);
  }
  if (options.architecture === "qwen3moe") {
    if (!options.experts || !options.expertsUsed || !options.expertFfn) throw new RangeError("qwen3moe needs experts, expertsUsed and expertFfn");
    if (options.expertsUsed > options.experts) throw new RangeError("expertsUsed must not exceed experts");
  } else if (!Number.isInteger(options.ffn) || options.ffn <= 0) {
    throw new RangeError(`ffn must be a positive integer, got ${options.ffn}`);
  }
}

/**
 * Builds a deterministic synthetic model: llama.cpp's metadata keys and tensor names, the real
 * Qwen3 vocabulary, seeded random weights (each tensor from its own stream, so the same options
 * always give the same bytes). Tensor data are produced lazily while writing.
 */
export function buildSyntheticModel(
  options: SyntheticModelOptions,
  /** Quantizes a matrix: libmemra_cpu's k-quants when built, else @memra/gguf's; the same bytes either way (native-quantize.ts). */
  quantizeMatrix: (type: GGMLType, values: Float32Array) => Uint8Array = quantizeWeights,
): GGUFToWrite {
  validateOptions(options);
  const arch = options.architecture;
  const key = (template: string) => architectureKey(template, arch);
  const moe = arch === "qwen3moe";
  const metadata: Array<[string, GGUFValue]> = [
    [GENERAL_KEYS.architecture, ggufValue.string(arch)],
    [GENERAL_KEYS.name, ggufValue.string(`memra-synthetic-${arch}-${options.layers}x${options.hidden}-${options.weightType}-seed${options.seed}`)],
    [GENERAL_KEYS.fileType, ggufValue.uint32(FILE_TYPES[options.weightType])],
    [GENERAL_KEYS.quantizationVersion, ggufValue.uint32(2)],
    [key(ARCHITECTURE_KEYS.blockCount), ggufValue.uint32(options.layers)],
    [key(ARCHITECTURE_KEYS.contextLength), ggufValue.uint32(options.contextLength)],
    [key(ARCHITECTURE_KEYS.embeddingLength), ggufValue.uint32(options.hidden)],
    [key(ARCHITECTURE_KEYS.feedForwardLength), ggufValue.uint32(moe ? 0 : options.ffn)],
    [key(ARCHITECTURE_KEYS.headCount), ggufValue.uint32(options.heads)],
    [key(ARCHITECTURE_KEYS.headCountKv), ggufValue.uint32(options.kvHeads)],
    [key(ARCHITECTURE_KEYS.ropeFreqBase), ggufValue.float32(options.ropeFreqBase)],
    [key(ARCHITECTURE_KEYS.layerNormRmsEpsilon), ggufValue.float32(options.rmsNormEpsilon)],
    [key(ARCHITECTURE_KEYS.keyLength), ggufValue.uint32(options.headDim)],
    [key(ARCHITECTURE_KEYS.valueLength), ggufValue.uint32(options.headDim)],
  ];
  if (moe) {
    metadata.push(
      [key(ARCHITECTURE_KEYS.expertCount), ggufValue.uint32(options.experts!)],
      [key(ARCHITECTURE_KEYS.expertUsedCount), ggufValue.uint32(options.expertsUsed!)],
      [key(ARCHITECTURE_KEYS.expertFeedForwardLength), ggufValue.uint32(options.expertFfn!)],
    );
  }
  if (options.reranker && options.poolingType !== undefined) throw new RangeError("a reranker's pooling is rank: give reranker or poolingType, not both");
  if (options.poolingType !== undefined) metadata.push([key(ARCHITECTURE_KEYS.poolingType), ggufValue.uint32(options.poolingType === "mean" ? 1 : 3)]);
  if (options.reranker) {
    metadata.push([key(ARCHITECTURE_KEYS.poolingType), ggufValue.uint32(4)], [key(ARCHITECTURE_KEYS.classifierOutputLabels), ggufValue.stringArray(["yes", "no"])]);
  }
  if (options.ropeScaling) {
    metadata.push([key(ARCHITECTURE_KEYS.ropeScalingType), ggufValue.string(options.ropeScaling.type)], [key(ARCHITECTURE_KEYS.ropeScalingFactor), ggufValue.float32(options.ropeScaling.factor)]);
    if (options.ropeScaling.originalContextLength !== undefined) metadata.push([key(ARCHITECTURE_KEYS.ropeScalingOriginalContextLength), ggufValue.uint32(options.ropeScaling.originalContextLength)]);
  }
  metadata.push(...qwen3TokenizerMetadata(options.vocabulary));
  if (options.addEosToken !== undefined) metadata.push([TOKENIZER_KEYS.addEosToken, ggufValue.bool(options.addEosToken)]);
  if (options.reranker) metadata.push([TOKENIZER_KEYS.rerankChatTemplate, ggufValue.string(QWEN3_RERANK_TEMPLATE)]);

  const tensors: GGUFTensorToWrite[] = [];
  const vocab = options.vocabulary ?? QWEN3_VOCAB_SIZE;
  const hidden = options.hidden;
  const qDim = options.heads * options.headDim;
  const kvDim = options.kvHeads * options.headDim;
  const logitScale = 3 / Math.sqrt(hidden);

  // distinctLayers: a repeated layer's tensors are its source layer's bytes, generated once (from
  // the source tensor's name: its seed) and kept for the repeats
  const repeats = options.distinctLayers !== undefined && options.distinctLayers < options.layers;
  const sourceLayer = (layer: number) => (repeats ? layer % options.distinctLayers! : layer);
  const seedOf = (name: string) => (repeats ? name.replace(/^blk\.(\d+)\./, (_, layer: string) => `blk.${sourceLayer(Number(layer))}.`) : name);
  const generated = new Map<string, Uint8Array>();
  const once = (seed: string, make: () => Uint8Array) => () => {
    if (!repeats) return make();
    let bytes = generated.get(seed);
    if (!bytes) generated.set(seed, (bytes = make()));
    return bytes;
  };
  const matrix = (name: string, role: string, layer: number, shape: number[], deviation: number) => {
    const seed = seedOf(name);
    const type = chooseType(options, role, layer, shape[0]!);
    const count = shape.reduce((a, b) => a * b, 1);
    tensors.push({
      name,
      type,
      shape,
      data: once(seed, () =>
        RANDOM_BLOCK_WEIGHT_TYPES.has(ggmlTypeName(type) ?? "")
          ? randomBlocks(type, count, hashString(`${options.seed}:${seed}`), deviation)
          : quantizeMatrix(type, new SeededRandom(`${options.seed}:${seed}`).normals(count, 0, deviation)),
      ),
    });
  };
  const vector = (name: string, length: number, mean: number, deviation: number) => {
    const seed = seedOf(name);
    tensors.push({
      name,
      type: GGMLType.F32,
      shape: [length],
      data: once(seed, () => new Uint8Array(new SeededRandom(`${options.seed}:${seed}`).normals(length, mean, deviation).buffer)),
    });
  };

  matrix("token_embd.weight", "token_embd", 0, [hidden, vocab], logitScale);
  for (let layer = 0; layer < options.layers; layer++) {
    const blk = `blk.${layer}`;
    const source = sourceLayer(layer); /* the layer whose weights (and types) this one repeats */
    vector(`${blk}.attn_norm.weight`, hidden, 1, 0.2);
    matrix(`${blk}.attn_q.weight`, "attn_q", source, [hidden, qDim], 1 / Math.sqrt(hidden));
    matrix(`${blk}.attn_k.weight`, "attn_k", source, [hidden, kvDim], 1 / Math.sqrt(hidden));
    matrix(`${blk}.attn_v.weight`, "attn_v", source, [hidden, kvDim], 1 / Math.sqrt(hidden));
    vector(`${blk}.attn_q_norm.weight`, options.headDim, 1, 0.2);
    vector(`${blk}.attn_k_norm.weight`, options.headDim, 1, 0.2);
    matrix(`${blk}.attn_output.weight`, "attn_output", source, [qDim, hidden], 1 / Math.sqrt(qDim));
    vector(`${blk}.ffn_norm.weight`, hidden, 1, 0.2);
    if (moe) {
      const experts = options.experts!;
      const expertFfn = options.expertFfn!;
      // The router stays f32, as llama.cpp's quantizer leaves ffn_gate_inp alone.
      const router = seedOf(`${blk}.ffn_gate_inp.weight`);
      tensors.push({
        name: `${blk}.ffn_gate_inp.weight`,
        type: GGMLType.F32,
        shape: [hidden, experts],
        data: once(router, () => new Uint8Array(new SeededRandom(`${options.seed}:${router}`).normals(hidden * experts, 0, 2 / Math.sqrt(hidden)).buffer)),
      });
      matrix(`${blk}.ffn_gate_exps.weight`, "ffn_gate_exps", source, [hidden, expertFfn, experts], 1 / Math.sqrt(hidden));
      matrix(`${blk}.ffn_up_exps.weight`, "ffn_up_exps", source, [hidden, expertFfn, experts], 1 / Math.sqrt(hidden));
      matrix(`${blk}.ffn_down_exps.weight`, "ffn_down_exps", source, [expertFfn, hidden, experts], 1 / Math.sqrt(expertFfn));
    } else {
      matrix(`${blk}.ffn_gate.weight`, "ffn_gate", source, [hidden, options.ffn], 1 / Math.sqrt(hidden));
      matrix(`${blk}.ffn_up.weight`, "ffn_up", source, [hidden, options.ffn], 1 / Math.sqrt(hidden));
      matrix(`${blk}.ffn_down.weight`, "ffn_down", source, [options.ffn, hidden], 1 / Math.sqrt(options.ffn));
    }
  }
  vector("output_norm.weight", hidden, 1, 0.2);
  if (!options.tiedEmbeddings) matrix("output.weight", "output", 0, [hidden, vocab], logitScale);
  // Wider than the LM head's rows, so that the two labels' probabilities spread over (0, 1).
  if (options.reranker) matrix("cls.output.weight", "output", 0, [hidden, 2], 4 / Math.sqrt(hidden));

  return { metadata: new Map(metadata), tensors };
}
