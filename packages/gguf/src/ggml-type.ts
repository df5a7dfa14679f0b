/**
 * The ggml tensor type table: every type id that today's ggml defines (ggml.h `enum ggml_type`),
 * with its lower-case name as ggml prints it, the number of elements in one block and the bytes
 * one block occupies. Ids 4, 5, 31–33 and 36–38 were removed from ggml and are not valid in a file.
 */
export enum GGMLType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
}

export interface GGMLTypeInfo {
  readonly type: GGMLType;
  /** ggml's `type_name`, e.g. "q8_0", "q4_K", "bf16". */
  readonly name: string;
  /** Elements per block. */
  readonly blockSize: number;
  /** Bytes per block. */
  readonly bytesPerBlock: number;
  /** True for block-quantized types (everything but the plain float and integer types). */
  readonly quantized: boolean;
}

/** QK_K: elements in one k-quant / i-quant super-block. */
export const QK_K = 256;

function info(type: GGMLType, name: string, blockSize: number, bytesPerBlock: number): GGMLTypeInfo {
  const plain = blockSize === 1;
  return Object.freeze({ type, name, blockSize, bytesPerBlock, quantized: !plain });
}

// Byte counts follow the block structs in ggml-common.h (sizes noted beside each).
const TABLE: readonly GGMLTypeInfo[] = [
  info(GGMLType.F32, "f32", 1, 4),
  info(GGMLType.F16, "f16", 1, 2),
  info(GGMLType.Q4_0, "q4_0", 32, 18), // d:f16 + 16 nibble bytes
  info(GGMLType.Q4_1, "q4_1", 32, 20), // d,m:f16 + 16
  info(GGMLType.Q5_0, "q5_0", 32, 22), // d + qh[4] + 16
  info(GGMLType.Q5_1, "q5_1", 32, 24), // d,m + qh[4] + 16
  info(GGMLType.Q8_0, "q8_0", 32, 34), // d + 32 int8
  info(GGMLType.Q8_1, "q8_1", 32, 36), // d,s + 32 int8
  info(GGMLType.Q2_K, "q2_K", QK_K, 84), // scales[16] + qs[64] + d,dmin
  info(GGMLType.Q3_K, "q3_K", QK_K, 110), // hmask[32] + qs[64] + scales[12] + d
  info(GGMLType.Q4_K, "q4_K", QK_K, 144), // d,dmin + scales[12] + qs[128]
  info(GGMLType.Q5_K, "q5_K", QK_K, 176), // d,dmin + scales[12] + qh[32] + qs[128]
  info(GGMLType.Q6_K, "q6_K", QK_K, 210), // ql[128] + qh[64] + scales[16] + d
  info(GGMLType.Q8_K, "q8_K", QK_K, 292), // d:f32 + qs[256] + bsums:i16[16]
  info(GGMLType.IQ2_XXS, "iq2_xxs", QK_K, 66), // d + qs:u16[32]
  info(GGMLType.IQ2_XS, "iq2_xs", QK_K, 74), // d + qs:u16[32] + scales[8]
  info(GGMLType.IQ3_XXS, "iq3_xxs", QK_K, 98), // d + qs[96]
  info(GGMLType.IQ1_S, "iq1_s", QK_K, 50), // d + qs[32] + qh:u16[8]
  info(GGMLType.IQ4_NL, "iq4_nl", 32, 18), // d + qs[16]
  info(GGMLType.IQ3_S, "iq3_s", QK_K, 110), // d + qs[64] + qh[8] + signs[32] + scales[4]
  info(GGMLType.IQ2_S, "iq2_s", QK_K, 82), // d + qs[64] + qh[8] + scales[8]
  info(GGMLType.IQ4_XS, "iq4_xs", QK_K, 136), // d + scales_h:u16 + scales_l[4] + qs[128]
  info(GGMLType.I8, "i8", 1, 1),
  info(GGMLType.I16, "i16", 1, 2),
  info(GGMLType.I32, "i32", 1, 4),
  info(GGMLType.I64, "i64", 1, 8),
  info(GGMLType.F64, "f64", 1, 8),
  info(GGMLType.IQ1_M, "iq1_m", QK_K, 56), // qs[32] + qh[16] + scales[8]
  info(GGMLType.BF16, "bf16", 1, 2),
  info(GGMLType.TQ1_0, "tq1_0", QK_K, 54), // qs[48] + qh[4] + d
  info(GGMLType.TQ2_0, "tq2_0", QK_K, 66), // qs[64] + d
  info(GGMLType.MXFP4, "mxfp4", 32, 17), // e:e8m0 + qs[16]
  info(GGMLType.NVFP4, "nvfp4", 64, 36), // d:ue4m3[4] + qs[32]
  info(GGMLType.Q1_0, "q1_0", 128, 18), // d + qs[16]
  info(GGMLType.Q2_0, "q2_0", 64, 18), // d + qs[16]
];

const BY_ID = new Map<number, GGMLTypeInfo>(TABLE.map((entry) => [entry.type, entry]));
const BY_NAME = new Map<string, GGMLTypeInfo>(TABLE.map((entry) => [entry.name, entry]));

/** Every type ggml defines, in id order. */
export const GGML_TYPES: readonly GGMLTypeInfo[] = TABLE;

/** The table entry for a type id, or undefined when ggml defines no such type. */
export function ggmlTypeInfo(type: number): GGMLTypeInfo | undefined {
  return BY_ID.get(type);
}

/** The type whose ggml name is `name` ("q4_K", "bf16", ...), or undefined. Case-sensitive as in ggml. */
export function ggmlTypeFromName(name: string): GGMLType | undefined {
  return BY_NAME.get(name)?.type;
}

/** ggml's lower-case name for a type id ("q8_0", "q4_K"). Throws on an unknown id. */
export function ggmlTypeName(type: GGMLType): string {
  const entry = BY_ID.get(type);
  if (!entry) throw new RangeError(`unknown ggml type id ${type}`);
  return entry.name;
}

/**
 * Bytes occupied by a tensor of `type` with the given shape (innermost dimension first), or
 * undefined when the innermost dimension is not a whole number of blocks. Returned as a bigint
 * because real files can exceed 2^53 elements only in theory, but products of untrusted
 * dimensions can overflow a double long before that.
 */
export function tensorByteSize(type: GGMLType, shape: readonly (number | bigint)[]): bigint | undefined {
  const entry = BY_ID.get(type);
  if (!entry) return undefined;
  const dims = shape.map((d) => BigInt(d));
  const inner = dims[0] ?? 1n;
  const blockSize = BigInt(entry.blockSize);
  if (inner % blockSize !== 0n) return undefined;
  let rows = 1n;
  for (let i = 1; i < dims.length; i++) rows *= dims[i]!;
  return (inner / blockSize) * BigInt(entry.bytesPerBlock) * rows;
}
