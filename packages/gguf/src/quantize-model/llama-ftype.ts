/**
 * llama.cpp's file types (`enum llama_ftype`) and the names llama-quantize takes for them
 * (tools/quantize/quantize.cpp's QUANT_OPTIONS), limited to those whose tensor types @memra/gguf
 * can write: the k-quants, the 32-value types and every IQ type, but none of the ternary or FP4 ones.
 * IQ1_*, IQ2_*, IQ3_XXS, IQ3_XS and Q2_K_S need an importance matrix for some tensors
 * (`needsImportance`): planQuantization refuses them without one, as llama.cpp does.
 */
import { GGMLType } from "../ggml-type";
import { QuantizationError } from "./quantization-error";

export interface LlamaFileType {
  /** llama-quantize's name for it, upper case: "Q4_K_M", "Q8_0", "COPY". */
  readonly name: string;
  /** `enum llama_ftype`, written to `general.file_type`. */
  readonly id: number;
  /** The tensor type most weights get (llama_ftype_get_default_type). */
  readonly defaultType: GGMLType;
  /** COPY: every tensor is copied as it is. */
  readonly onlyCopy?: boolean;
  /** Some of its tensors need an importance matrix (llama.cpp's tensor_requires_imatrix). */
  readonly needsImportance?: boolean;
}

const table: Array<[string, number, GGMLType]> = [
  ["F32", 0, GGMLType.F32],
  ["F16", 1, GGMLType.F16],
  ["Q4_0", 2, GGMLType.Q4_0],
  ["Q4_1", 3, GGMLType.Q4_1],
  ["Q8_0", 7, GGMLType.Q8_0],
  ["Q5_0", 8, GGMLType.Q5_0],
  ["Q5_1", 9, GGMLType.Q5_1],
  ["Q2_K", 10, GGMLType.Q2_K],
  ["Q3_K_S", 11, GGMLType.Q3_K],
  ["Q3_K_M", 12, GGMLType.Q3_K],
  ["Q3_K_L", 13, GGMLType.Q3_K],
  ["Q4_K_S", 14, GGMLType.Q4_K],
  ["Q4_K_M", 15, GGMLType.Q4_K],
  ["Q5_K_S", 16, GGMLType.Q5_K],
  ["Q5_K_M", 17, GGMLType.Q5_K],
  ["Q6_K", 18, GGMLType.Q6_K],
  ["IQ2_XXS", 19, GGMLType.IQ2_XXS],
  ["IQ2_XS", 20, GGMLType.IQ2_XS],
  ["Q2_K_S", 21, GGMLType.Q2_K],
  ["IQ3_XS", 22, GGMLType.IQ3_S],
  ["IQ3_XXS", 23, GGMLType.IQ3_XXS],
  ["IQ1_S", 24, GGMLType.IQ1_S],
  ["IQ4_NL", 25, GGMLType.IQ4_NL],
  ["IQ3_S", 26, GGMLType.IQ3_S],
  ["IQ3_M", 27, GGMLType.IQ3_S],
  ["IQ2_S", 28, GGMLType.IQ2_XS],
  ["IQ2_M", 29, GGMLType.IQ2_S],
  ["IQ4_XS", 30, GGMLType.IQ4_XS],
  ["IQ1_M", 31, GGMLType.IQ1_M],
  ["BF16", 32, GGMLType.BF16],
];

/** The file types whose mixes have tensors of a type that needs an importance matrix. */
const NEEDS_IMPORTANCE = new Set(["IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"]);

/** Every file type memra can quantize to, in llama_ftype order. */
export const LLAMA_FILE_TYPES: readonly LlamaFileType[] = table.map(([name, id, defaultType]) =>
  NEEDS_IMPORTANCE.has(name) ? { name, id, defaultType, needsImportance: true } : { name, id, defaultType },
);

/** llama-quantize's aliases: Q3_K, Q4_K and Q5_K are the _M mixes. */
const ALIASES: Record<string, string> = { Q3_K: "Q3_K_M", Q4_K: "Q4_K_M", Q5_K: "Q5_K_M" };

/** llama.cpp's file types that memra cannot write, and why (for the error message). */
const UNSUPPORTED: Record<string, string> = {
  TQ1_0: "ternary types are not implemented",
  TQ2_0: "ternary types are not implemented",
  MXFP4_MOE: "mxfp4 is not implemented",
  Q1_0: "q1_0 is not implemented",
  Q2_0: "q2_0 is not implemented",
};

/** The ids of llama_ftype values, for naming a file's `general.file_type`. */
const NAMES_BY_ID = new Map<number, string>([
  ...table.map(([name, id]) => [id, name] as [number, string]),
  [36, "TQ1_0"], [37, "TQ2_0"],
  [38, "MXFP4_MOE"], [39, "NVFP4"], [40, "Q1_0"], [41, "Q2_0"],
]);

/** A llama_ftype id's name ("Q4_K_M"), with " (guessed)" for llama.cpp's guessed flag; undefined when unknown. */
export function llamaFileTypeName(id: number): string | undefined {
  const guessed = (id & 1024) !== 0;
  const name = NAMES_BY_ID.get(id & ~1024);
  return name === undefined ? undefined : guessed ? `${name} (guessed)` : name;
}

/**
 * The file type named as llama-quantize takes it: a name in any case ("q4_k_m", "Q8_0", "COPY"; Q3_K,
 * Q4_K and Q5_K are the _M mixes) or a llama_ftype number. COPY copies every tensor unchanged.
 *
 * @throws QuantizationError naming the type and why when memra cannot write it, or listing the names when it is unknown.
 */
export function parseLlamaFileType(type: string | number): LlamaFileType {
  if (typeof type === "number" || /^\d+$/.test(type.trim())) {
    const id = Number(type);
    const known = LLAMA_FILE_TYPES.find((t) => t.id === id);
    if (known) return known;
    const name = NAMES_BY_ID.get(id);
    if (name !== undefined) return parseLlamaFileType(name);
    throw new QuantizationError(`unknown llama.cpp file type ${id}; one of: ${fileTypeList()}`);
  }
  const upper = type.trim().toUpperCase();
  if (upper === "COPY") return { name: "COPY", id: 0, defaultType: GGMLType.F32, onlyCopy: true };
  const name = ALIASES[upper] ?? upper;
  const found = LLAMA_FILE_TYPES.find((t) => t.name === name);
  if (found) return found;
  const why = UNSUPPORTED[upper];
  if (why !== undefined) throw new QuantizationError(`quantization type ${upper} is not supported: ${why}; one of: ${fileTypeList()}`);
  throw new QuantizationError(`unknown quantization type "${type}"; one of: ${fileTypeList()}`);
}

function fileTypeList(): string {
  return [...LLAMA_FILE_TYPES.map((t) => t.name), "COPY"].join(", ");
}
