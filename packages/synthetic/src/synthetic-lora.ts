/**
 * Synthetic LoRA adapters in llama.cpp's GGUF form (what convert_lora_to_gguf.py writes):
 * general.type "adapter", adapter.type "lora", adapter.lora.alpha, and for each adapted weight W
 * of shape [in, out] (ggml order) a pair `W.lora_a` [in, rank] and `W.lora_b` [rank, out], so that
 * W x + (alpha / rank) · B (A x) is the adapted product. Seeded, deterministic; f32 or f16.
 */
import { join } from "node:path";
import { GENERAL_KEYS, GGMLType, type GGUFTensorToWrite, type GGUFToWrite, type GGUFValue, ggufValue, quantize, writeGGUFFile } from "@memra/gguf";
import { generateOnce, syntheticCacheDirectory, syntheticModelKey } from "./model-cache";
import { hashString, SeededRandom } from "./random";
import { QWEN3_VOCAB_SIZE } from "./qwen3-vocabulary";
import { type SyntheticModelOptions, validateOptions } from "./synthetic-model";

/** The projections a LoRA adapter may adapt, as llama.cpp's tensor names end. */
export const LORA_TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output"] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

export interface SyntheticLoraOptions {
  readonly rank: number;
  /** adapter.lora.alpha (0: llama.cpp then scales by 1 instead of alpha / rank). */
  readonly alpha: number;
  readonly seed: number;
  /** Which projections (default: every one of a dense model's layers and the LM head). */
  readonly targets?: readonly LoraTarget[];
  /** Layers adapted (default all). */
  readonly layers?: readonly number[];
  readonly type?: "f32" | "f16";
  /** The standard deviation of B's values relative to 1/sqrt(rank) (default 1: a delta about as large as the weight's). */
  readonly strength?: number;
}

/** The shape [in, out] of a model's weight named by target and layer, or undefined when the model has none. */
function weightShape(model: SyntheticModelOptions, target: LoraTarget): [number, number] | undefined {
  const q = model.heads * model.headDim;
  const kv = model.kvHeads * model.headDim;
  const moe = model.architecture === "qwen3moe";
  switch (target) {
    case "attn_q":
      return [model.hidden, q];
    case "attn_k":
    case "attn_v":
      return [model.hidden, kv];
    case "attn_output":
      return [q, model.hidden];
    case "ffn_gate":
    case "ffn_up":
      return moe ? undefined : [model.hidden, model.ffn];
    case "ffn_down":
      return moe ? undefined : [model.ffn, model.hidden];
    case "output":
      return model.tiedEmbeddings ? undefined : [model.hidden, model.vocabulary ?? QWEN3_VOCAB_SIZE];
  }
}

export function buildSyntheticLora(model: SyntheticModelOptions, options: SyntheticLoraOptions): GGUFToWrite {
  validateOptions(model);
  if (!Number.isInteger(options.rank) || options.rank < 1) throw new RangeError(`rank must be a positive integer, got ${options.rank}`);
  const type = options.type === "f16" ? GGMLType.F16 : GGMLType.F32;
  const metadata: Array<[string, GGUFValue]> = [
    [GENERAL_KEYS.architecture, ggufValue.string(model.architecture)],
    ["general.type", ggufValue.string("adapter")],
    [GENERAL_KEYS.name, ggufValue.string(`memra-synthetic-lora-r${options.rank}-seed${options.seed}`)],
    ["adapter.type", ggufValue.string("lora")],
    ["adapter.lora.alpha", ggufValue.float32(options.alpha)],
  ];
  const tensors: GGUFTensorToWrite[] = [];
  const strength = options.strength ?? 1;
  const add = (name: string, shape: [number, number], deviation: number) => {
    const count = shape[0] * shape[1];
    const values = () => new SeededRandom(`lora:${options.seed}:${name}`).normals(count, 0, deviation);
    tensors.push({ name, type, shape, data: () => (type === GGMLType.F32 ? new Uint8Array(values().buffer) : quantize(type, values())) });
  };
  const targets = options.targets ?? LORA_TARGETS;
  const layers = options.layers ?? Array.from({ length: model.layers }, (_, i) => i);
  for (const target of targets) {
    const shape = weightShape(model, target);
    if (!shape) continue;
    const names = target === "output" ? ["output.weight"] : layers.map((layer) => `blk.${layer}.${target}.weight`);
    for (const name of names) {
      // A x has the size of W x's terms' sums over `in` when A ~ N(0, 1/in); B ~ N(0, strength/sqrt(rank)) then
      // makes B (A x) comparable to W x, and the model's outputs visibly different.
      add(`${name}.lora_a`, [shape[0], options.rank], 1 / Math.sqrt(shape[0]));
      add(`${name}.lora_b`, [options.rank, shape[1]], (strength * (target === "output" ? 3 / Math.sqrt(model.hidden) : 1 / Math.sqrt(shape[0]))) * Math.sqrt(shape[0] / options.rank));
    }
  }
  return { metadata: new Map(metadata), tensors };
}

/** The path of a generated adapter for a synthetic model, generating it on first use (cached beside the models). */
export async function syntheticLoraFile(model: SyntheticModelOptions, options: SyntheticLoraOptions): Promise<string> {
  const directory = syntheticCacheDirectory();
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(options).sort(([a], [b]) => a.localeCompare(b))));
  const path = join(directory, `${syntheticModelKey(model)}-lora-${hashString(canonical).toString(16).padStart(8, "0")}.gguf`);
  return generateOnce(path, (temporary) => writeGGUFFile(temporary, buildSyntheticLora(model, options)));
}
