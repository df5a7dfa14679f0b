/**
 * A model as llama-bench describes it (llama.cpp's llama_model_desc, llama_model_size and
 * llama_model_n_params): "qwen3 0.6B Q8_0" (architecture, size label, file type name), the bytes of
 * every tensor and the elements of every tensor, read from the GGUF's header alone.
 */
import { GGMLType, type GGUFFile } from "@memra/gguf";

export interface LlamaModelDescription {
  /** llama_model_desc: "qwen3 0.6B Q8_0", "qwen3moe 30B.A3B Q4_K - Medium", "qwen3 ?B all F32". */
  readonly type: string;
  /** llama_model_size: the bytes of all tensors (every shard of a split model). */
  readonly bytes: number;
  /** llama_model_n_params: the elements of all tensors. */
  readonly parameters: number;
}

/** llama_ftype_name (src/llama-model-loader.cpp), by `enum llama_ftype` id. */
const FILE_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: "all F32",
  1: "F16",
  32: "BF16",
  40: "Q1_0",
  41: "Q2_0",
  2: "Q4_0",
  3: "Q4_1",
  8: "Q5_0",
  9: "Q5_1",
  7: "Q8_0",
  38: "MXFP4 MoE",
  39: "NVFP4",
  10: "Q2_K - Medium",
  21: "Q2_K - Small",
  11: "Q3_K - Small",
  12: "Q3_K - Medium",
  13: "Q3_K - Large",
  14: "Q4_K - Small",
  15: "Q4_K - Medium",
  16: "Q5_K - Small",
  17: "Q5_K - Medium",
  18: "Q6_K",
  36: "TQ1_0 - 1.69 bpw ternary",
  37: "TQ2_0 - 2.06 bpw ternary",
  19: "IQ2_XXS - 2.0625 bpw",
  20: "IQ2_XS - 2.3125 bpw",
  28: "IQ2_S - 2.5 bpw",
  29: "IQ2_M - 2.7 bpw",
  22: "IQ3_XS - 3.3 bpw",
  23: "IQ3_XXS - 3.0625 bpw",
  24: "IQ1_S - 1.5625 bpw",
  31: "IQ1_M - 1.75 bpw",
  25: "IQ4_NL - 4.5 bpw",
  30: "IQ4_XS - 4.25 bpw",
  26: "IQ3_S - 3.4375 bpw",
  27: "IQ3_S mix - 3.66 bpw",
};

/** The llama_ftype llama.cpp's loader guesses from the commonest tensor type when general.file_type is absent. */
const GUESSED_FILE_TYPES: Partial<Record<GGMLType, number>> = {
  [GGMLType.F32]: 0,
  [GGMLType.F16]: 1,
  [GGMLType.BF16]: 32,
  [GGMLType.Q4_0]: 2,
  [GGMLType.Q4_1]: 3,
  [GGMLType.Q5_0]: 8,
  [GGMLType.Q5_1]: 9,
  [GGMLType.Q8_0]: 7,
  [GGMLType.Q2_K]: 10,
  [GGMLType.Q3_K]: 12,
  [GGMLType.Q4_K]: 15,
  [GGMLType.Q5_K]: 17,
  [GGMLType.Q6_K]: 18,
  [GGMLType.TQ1_0]: 36,
  [GGMLType.TQ2_0]: 37,
  [GGMLType.IQ2_XXS]: 19,
  [GGMLType.IQ2_XS]: 20,
  [GGMLType.IQ2_S]: 28,
  [GGMLType.IQ3_XXS]: 23,
  [GGMLType.IQ1_S]: 24,
  [GGMLType.IQ1_M]: 31,
  [GGMLType.IQ4_NL]: 25,
  [GGMLType.IQ4_XS]: 30,
  [GGMLType.IQ3_S]: 26,
  [GGMLType.NVFP4]: 39,
  [GGMLType.Q1_0]: 40,
  [GGMLType.Q2_0]: 41,
};

/** llama_ftype_name: the file type's name, "(guessed) " before it when the file does not say. */
export function llamaFileTypeDescription(id: number, guessed = false): string {
  const name = FILE_TYPE_NAMES[id] ?? "unknown, may not work";
  return guessed ? `(guessed) ${name}` : name;
}

/** llm_type_name of the type llama.cpp's load_arch_hparams gives a Qwen3 / Qwen3-MoE from its layer count and width. */
function sizeLabel(architecture: string, layers: number | undefined, width: number | undefined): string {
  if (architecture === "qwen3") {
    if (layers === 28) return width === 1024 ? "0.6B" : "1.7B";
    if (layers === 36) return width === 2560 ? "4B" : "8B";
    if (layers === 40) return "14B";
    if (layers === 64) return "32B";
  }
  if (architecture === "qwen3moe") {
    if (layers === 48) return "30B.A3B";
    if (layers === 94) return "235B.A22B";
  }
  return "?B";
}

/** The file type llama.cpp's loader reports: general.file_type, else guessed from the commonest tensor type. */
function fileTypeName(file: GGUFFile): string {
  const stored = file.getNumber("general.file_type");
  if (stored !== undefined) return llamaFileTypeDescription(stored);
  // llama_model_loader counts tensors in name order (its std::map); the first type to reach the top count wins.
  const counts = new Map<GGMLType, number>();
  let most = 0;
  let commonest = GGMLType.F32;
  for (const tensor of [...file.tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const count = (counts.get(tensor.type) ?? 0) + 1;
    counts.set(tensor.type, count);
    if (most < count) {
      most = count;
      commonest = tensor.type;
    }
  }
  return llamaFileTypeDescription(GUESSED_FILE_TYPES[commonest] ?? 0, true);
}

/** The model as llama-bench's `model`, `size` and `params` columns describe it. */
export function llamaModelDescription(file: GGUFFile): LlamaModelDescription {
  const architecture = file.architecture ?? "unknown";
  const layers = file.getNumber(`${architecture}.block_count`);
  const width = file.getNumber(`${architecture}.embedding_length`);
  let bytes = 0;
  let parameters = 0;
  for (const tensor of file.tensors) {
    bytes += tensor.byteSize;
    parameters += tensor.elementCount;
  }
  return { type: `${architecture} ${sizeLabel(architecture, layers, width)} ${fileTypeName(file)}`, bytes, parameters };
}
