import { z } from "zod";
import { GGUFError } from "./gguf-error";
import type { GGUFFile } from "./gguf-file";
import { ARCHITECTURE_KEYS, GENERAL_KEYS, architectureKey } from "./metadata-keys";

const positiveInteger = z.number().int().positive();

/** The keys every Qwen3-family model states. */
const transformerShape = {
  contextLength: positiveInteger,
  embeddingLength: positiveInteger,
  blockCount: positiveInteger,
  headCount: positiveInteger,
  headCountKv: positiveInteger,
  keyLength: positiveInteger,
  valueLength: positiveInteger,
  layerNormRmsEpsilon: z.number().positive(),
  ropeFreqBase: z.number().positive(),
  /** Embedding models: llama_pooling_type (0 none, 1 mean, 2 cls, 3 last, 4 rank); absent for chat models. */
  poolingType: z.number().int().min(0).max(4).optional(),
  /**
   * RoPE scaling for a context beyond the trained one (Qwen3's 128K GGUFs: yarn, factor 4, original
   * context 32768), as llama.cpp reads it: none when absent; longrope is not supported.
   */
  ropeScalingType: z.enum(["none", "linear", "yarn"], { message: "unsupported value (supported: none, linear, yarn)" }).optional(),
  /** The context's stretch: llama.cpp's freq_scale is its inverse. */
  ropeScalingFactor: z.number().positive().optional(),
  /** The context the model was trained with before scaling (YaRN's n_ctx_orig); default the context length. */
  ropeScalingOriginalContextLength: positiveInteger.optional(),
};

const headsDivide: [(c: { headCount: number; headCountKv: number }) => boolean, { message: string; path: string[] }] = [
  (c) => c.headCount % c.headCountKv === 0,
  { message: "attention.head_count must be a multiple of attention.head_count_kv", path: ["headCountKv"] },
];

/** Hyper-parameters of a dense `qwen3` model, as GGUF metadata states them. */
export const qwen3ConfigSchema = z
  .object({ architecture: z.literal("qwen3"), ...transformerShape, feedForwardLength: positiveInteger })
  .refine(...headsDivide);

/** Hyper-parameters of a `qwen3moe` model: the dense ones plus the expert counts and sizes. */
export const qwen3MoeConfigSchema = z
  .object({
    architecture: z.literal("qwen3moe"),
    ...transformerShape,
    feedForwardLength: z.number().int().nonnegative(),
    expertFeedForwardLength: positiveInteger,
    expertCount: positiveInteger,
    expertUsedCount: positiveInteger,
  })
  .refine(...headsDivide)
  .refine((c) => c.expertUsedCount <= c.expertCount, {
    message: "expert_used_count must not exceed expert_count",
    path: ["expertUsedCount"],
  });

export type Qwen3Config = z.infer<typeof qwen3ConfigSchema>;
export type Qwen3MoeConfig = z.infer<typeof qwen3MoeConfigSchema>;
export type ModelConfig = Qwen3Config | Qwen3MoeConfig;

export const SUPPORTED_ARCHITECTURES = ["qwen3", "qwen3moe"] as const;

/**
 * Reads and validates the hyper-parameters of a supported architecture. key_length and
 * value_length default to embedding_length / head_count as in llama.cpp; rope.freq_base to 10000.
 * Throws `GGUFError` naming the missing or invalid key.
 */
export function readModelConfig(file: GGUFFile): ModelConfig {
  const architecture = file.getString(GENERAL_KEYS.architecture);
  if (architecture === undefined) throw new GGUFError(`kv["${GENERAL_KEYS.architecture}"]`, 0, "missing");
  if (!(SUPPORTED_ARCHITECTURES as readonly string[]).includes(architecture)) {
    throw new GGUFError(
      `kv["${GENERAL_KEYS.architecture}"]`,
      0,
      `unsupported architecture "${architecture}" (supported: ${SUPPORTED_ARCHITECTURES.join(", ")})`,
    );
  }
  const read = (template: string) => file.getNumber(architectureKey(template, architecture));
  const embeddingLength = read(ARCHITECTURE_KEYS.embeddingLength);
  const headCount = read(ARCHITECTURE_KEYS.headCount);
  const derivedHeadDim = embeddingLength && headCount ? embeddingLength / headCount : undefined;
  const raw = {
    architecture,
    contextLength: read(ARCHITECTURE_KEYS.contextLength),
    embeddingLength,
    blockCount: read(ARCHITECTURE_KEYS.blockCount),
    feedForwardLength: read(ARCHITECTURE_KEYS.feedForwardLength) ?? (architecture === "qwen3moe" ? 0 : undefined),
    expertFeedForwardLength: read(ARCHITECTURE_KEYS.expertFeedForwardLength),
    expertCount: read(ARCHITECTURE_KEYS.expertCount),
    expertUsedCount: read(ARCHITECTURE_KEYS.expertUsedCount),
    headCount,
    headCountKv: read(ARCHITECTURE_KEYS.headCountKv) ?? headCount,
    keyLength: read(ARCHITECTURE_KEYS.keyLength) ?? derivedHeadDim,
    valueLength: read(ARCHITECTURE_KEYS.valueLength) ?? derivedHeadDim,
    layerNormRmsEpsilon: read(ARCHITECTURE_KEYS.layerNormRmsEpsilon),
    ropeFreqBase: read(ARCHITECTURE_KEYS.ropeFreqBase) ?? 10000,
    poolingType: read(ARCHITECTURE_KEYS.poolingType),
    ropeScalingType: file.getString(architectureKey(ARCHITECTURE_KEYS.ropeScalingType, architecture)),
    ropeScalingFactor: read(ARCHITECTURE_KEYS.ropeScalingFactor),
    ropeScalingOriginalContextLength: read(ARCHITECTURE_KEYS.ropeScalingOriginalContextLength),
  };
  const schema = architecture === "qwen3" ? qwen3ConfigSchema : qwen3MoeConfigSchema;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = String(issue.path[0] ?? "");
    const template = (ARCHITECTURE_KEYS as Record<string, string>)[field];
    const key = template ? architectureKey(template, architecture) : field;
    const found = (raw as Record<string, unknown>)[field];
    throw new GGUFError(`kv["${key}"]`, 0, found === undefined ? "missing" : `invalid (${issue.message})`);
  }
  return parsed.data;
}
