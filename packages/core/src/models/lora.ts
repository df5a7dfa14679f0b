/**
 * LoRA adapters in llama.cpp's GGUF form (convert_lora_to_gguf.py): general.type "adapter",
 * adapter.type "lora", adapter.lora.alpha, and per adapted weight W ([in, out], ggml order) the
 * pair `W.lora_a` [in, rank] and `W.lora_b` [rank, out]. As llama.cpp's graph applies them at run
 * time (llm_build_lora_mm): W x + s · B (A x), s = scale · alpha / rank (scale alone when alpha is 0),
 * each adapter's term added in turn.
 */
import { type GGUFFile, type GGUFTensorInfo, GGMLType, ggmlTypeInfo, ggmlTypeName, openGGUF } from "@memra/gguf";
import type { Backend, WeightHandle } from "../backend";

export interface LoraAdapterOptions {
  /** The adapter's GGUF file. */
  readonly path: string;
  /** Its strength (llama.cpp's --lora-scaled; default 1). */
  readonly scale?: number;
}

/** An adapter that cannot be applied to the model: names the file and what is wrong. */
export class LoraAdapterError extends Error {
  override readonly name = "LoraAdapterError";
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`LoRA adapter "${path}": ${message}`);
  }
}

/** One adapter's term for one weight: out += scale · B (A x). */
export interface LoraTerm {
  /** The adapter's index (its place in the load options). */
  readonly adapter: number;
  readonly a: WeightHandle;
  readonly b: WeightHandle;
  /** The adapter's scale times alpha / rank (the scale alone when alpha is 0). */
  readonly scale: number;
  /** The rank as uploaded: the adapter's, rounded up to a multiple of LORA_RANK_MULTIPLE. */
  readonly rank: number;
  /** The adapted weight's outputs (B's rows). */
  readonly outputs: number;
}

/** The adapters' terms by the adapted weight's tensor name, and the largest rank. */
export interface LoraWeights {
  readonly terms: ReadonlyMap<string, readonly LoraTerm[]>;
  /** The largest rank as uploaded (LoraTerm.rank). */
  readonly maxRank: number;
  /** Each adapter, in load order: its file, the scale it was loaded with, its alpha and rank. */
  readonly adapters: readonly LoadedLoraAdapter[];
}

export interface LoadedLoraAdapter {
  readonly path: string;
  readonly scale: number;
  readonly alpha: number;
  readonly rank: number;
}

/** The factor an adapter's term is scaled by at `scale`: scale · alpha / rank, the scale alone when alpha is 0 (rounded to f32). */
export function loraFactor(adapter: LoadedLoraAdapter, scale: number): number {
  return Math.fround(adapter.alpha !== 0 ? (scale * adapter.alpha) / adapter.rank : scale);
}

/** The weights an adapter may adapt: a dense layer's projections and the LM head. */
const ADAPTABLE = /^(blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight|output\.weight)$/;

function stringKey(file: GGUFFile, key: string): string | undefined {
  const value = file.get(key);
  return typeof value === "string" ? value : undefined;
}

/**
 * Reads and checks the adapters against the model's file, and uploads their tensors to the backend
 * of the weight each adapts (`backendOf`). Everything is checked before anything is uploaded.
 */
export function loadLoraAdapters(adapters: readonly LoraAdapterOptions[], model: GGUFFile, architecture: string, backendOf: (weight: string) => Backend): LoraWeights {
  const plans: { path: string; file: GGUFFile; pairs: { weight: string; a: GGUFTensorInfo; b: GGUFTensorInfo }[]; adapter: LoadedLoraAdapter }[] = [];
  for (const adapter of adapters) {
    const { path } = adapter;
    const scale = adapter.scale ?? 1;
    if (!Number.isFinite(scale)) throw new LoraAdapterError(path, `scale must be a finite number, got ${scale}`);
    let file: GGUFFile;
    try {
      file = openGGUF(path);
    } catch (error) {
      throw new LoraAdapterError(path, error instanceof Error ? error.message : String(error));
    }
    const type = stringKey(file, "general.type");
    if (type !== "adapter") throw new LoraAdapterError(path, `general.type is ${type === undefined ? "missing" : `"${type}"`}, expected "adapter"`);
    const arch = stringKey(file, "general.architecture");
    if (arch !== architecture) throw new LoraAdapterError(path, `made for architecture "${arch}", the model is "${architecture}"`);
    const adapterType = stringKey(file, "adapter.type");
    if (adapterType !== "lora") throw new LoraAdapterError(path, `adapter.type is ${adapterType === undefined ? "missing" : `"${adapterType}"`}, expected "lora"`);
    const alphaValue = file.get("adapter.lora.alpha");
    const alpha = typeof alphaValue === "number" ? alphaValue : 0;
    const halves = new Map<string, { a?: GGUFTensorInfo; b?: GGUFTensorInfo }>();
    for (const info of file.tensors) {
      const match = /^(.*)\.lora_([ab])$/.exec(info.name);
      if (!match) {
        if (info.name.endsWith("_norm.weight")) continue; // llama.cpp skips these too
        throw new LoraAdapterError(path, `tensor "${info.name}" is neither a .lora_a nor a .lora_b`);
      }
      const pair = halves.get(match[1]!) ?? {};
      pair[match[2] as "a" | "b"] = info;
      halves.set(match[1]!, pair);
    }
    const pairs: { weight: string; a: GGUFTensorInfo; b: GGUFTensorInfo }[] = [];
    let rank = 0;
    for (const [weight, { a, b }] of halves) {
      if (!a || !b) throw new LoraAdapterError(path, `"${weight}" has a lora_${a ? "a" : "b"} and no lora_${a ? "b" : "a"}`);
      const target = model.tensor(weight);
      if (!target) throw new LoraAdapterError(path, `"${weight}" is not a tensor of the model (an adapter for another model?)`);
      if (!ADAPTABLE.test(weight)) throw new LoraAdapterError(path, `adapting "${weight}" is not supported (attention and dense FFN projections and output.weight are)`);
      for (const half of [a, b]) {
        if (half.shape.length !== 2) throw new LoraAdapterError(path, `"${half.name}" has ${half.shape.length} dimensions, expected 2`);
        if (half.type !== GGMLType.F32 && half.type !== GGMLType.F16 && half.type !== GGMLType.BF16) {
          throw new LoraAdapterError(path, `"${half.name}" is ${ggmlTypeName(half.type)}; f32, f16 or bf16 expected`);
        }
      }
      const [inputs, outputs] = target.shape as [number, number];
      if (a.shape[0] !== inputs || b.shape[1] !== outputs || a.shape[1] !== b.shape[0]) {
        throw new LoraAdapterError(path, `"${weight}" is [${inputs}, ${outputs}]; lora_a [${a.shape.join(", ")}] and lora_b [${b.shape.join(", ")}] do not make [${inputs}, rank] and [rank, ${outputs}]`);
      }
      const backend = backendOf(weight);
      for (const half of [a, b]) {
        if (!backend.supportsOp("matmul", half.type)) throw new LoraAdapterError(path, `the ${backend.name} backend has no matmul of ${ggmlTypeName(half.type)} weights ("${half.name}")`);
      }
      rank = a.shape[1]!;
      pairs.push({ weight, a, b });
    }
    if (pairs.length === 0) throw new LoraAdapterError(path, "has no lora_a / lora_b pairs");
    plans.push({ path, file, pairs, adapter: { path, scale, alpha, rank } });
  }

  const terms = new Map<string, LoraTerm[]>();
  let maxRank = 0;
  plans.forEach(({ file, pairs, adapter }, index) => {
    for (const { weight, a, b } of pairs) {
      const backend = backendOf(weight);
      const [paddedA, paddedB] = padLoraRank(a, file.tensorData(a), b, file.tensorData(b));
      const rank = paddedA.info.shape[1]!;
      const term = {
        adapter: index,
        a: backend.uploadWeight(paddedA.info, paddedA.data),
        b: backend.uploadWeight(paddedB.info, paddedB.data),
        scale: loraFactor(adapter, adapter.scale),
        rank,
        outputs: b.shape[1]!,
      };
      maxRank = Math.max(maxRank, rank);
      const list = terms.get(weight) ?? [];
      list.push(term);
      terms.set(weight, list);
    }
  });
  return { terms, maxRank, adapters: plans.map((plan) => plan.adapter) };
}

/**
 * The ranks are uploaded as multiples of this: a backend's vector kernels take rows in groups of 8
 * values (the CUDA backend's f16 / bf16 / f32 kernels refuse other row lengths), and an adapter of
 * rank 4 made B's rows 4 values long. The padding is zeros: A's extra rows give inner values of 0
 * and B's extra columns multiply them, so the term's sums are unchanged.
 */
export const LORA_RANK_MULTIPLE = 8;

interface PaddedTensor {
  readonly info: GGUFTensorInfo;
  readonly data: Uint8Array;
}

/**
 * lora_a [in, rank] and lora_b [rank, out] (ggml order) with the rank rounded up to a multiple of
 * LORA_RANK_MULTIPLE: A gains rows of zeros, each row of B zeros at its end. As they are when the
 * rank is one already.
 */
export function padLoraRank(a: GGUFTensorInfo, aData: Uint8Array, b: GGUFTensorInfo, bData: Uint8Array): [PaddedTensor, PaddedTensor] {
  const [inputs, rank] = a.shape as [number, number];
  const outputs = b.shape[1]!;
  const padded = Math.ceil(rank / LORA_RANK_MULTIPLE) * LORA_RANK_MULTIPLE;
  if (padded === rank) return [{ info: a, data: aData }, { info: b, data: bData }];
  // f32, f16 or bf16 (loadLoraAdapters checks): blocks of one value
  const aBytes = ggmlTypeInfo(a.type)!.bytesPerBlock;
  const bBytes = ggmlTypeInfo(b.type)!.bytesPerBlock;
  const newA = new Uint8Array(padded * inputs * aBytes);
  newA.set(aData.subarray(0, rank * inputs * aBytes));
  const newB = new Uint8Array(outputs * padded * bBytes);
  for (let o = 0; o < outputs; o++) newB.set(bData.subarray(o * rank * bBytes, (o + 1) * rank * bBytes), o * padded * bBytes);
  return [
    { info: { ...a, shape: [inputs, padded], elementCount: inputs * padded, byteSize: newA.byteLength }, data: newA },
    { info: { ...b, shape: [padded, outputs], elementCount: padded * outputs, byteSize: newB.byteLength }, data: newB },
  ];
}
