/**
 * Random valid blocks of the weight types `quantize` cannot produce (the i-quants, whose ggml
 * quantizers need an importance matrix or a grid search this package does not port): random bits,
 * which are a valid block of every one of these types, with each block's f16 scale set so that the
 * dequantized values have about the requested RMS. For op tests and synthetic models.
 */
import { GGMLType, ggmlTypeInfo, ggmlTypeName } from "../ggml-type";
import { dequantize } from "./dequantize";
import { f32ToF16Bits } from "./half";
import { seededUniform } from "./seeded-random";

/** The types randomBlocks makes: the i-quants. */
export const RANDOM_BLOCK_TYPES: readonly GGMLType[] = [
  GGMLType.IQ2_XXS,
  GGMLType.IQ2_XS,
  GGMLType.IQ2_S,
  GGMLType.IQ3_XXS,
  GGMLType.IQ3_S,
  GGMLType.IQ1_S,
  GGMLType.IQ1_M,
  GGMLType.IQ4_NL,
  GGMLType.IQ4_XS,
];

/** Whether `randomBlocks` makes blocks of `type`. */
export function canMakeRandomBlocks(type: GGMLType | number): boolean {
  return RANDOM_BLOCK_TYPES.includes(type);
}

/**
 * Sets block `block`'s f16 scale to `bits`. Every type here keeps it in its first two bytes, except
 * iq1_m, which spreads it over the top nibbles of its four u16 scales (bytes 48..55).
 */
export function setBlockScale(type: GGMLType | number, bytes: Uint8Array, block: number, bits: number): void {
  const info = ggmlTypeInfo(type)!;
  const at = block * info.bytesPerBlock;
  if (type === GGMLType.IQ1_M) {
    for (let i = 0; i < 4; i++) {
      const p = at + 48 + 2 * i + 1; // the high byte of scales[i]
      bytes[p] = (bytes[p]! & 0x0f) | (((bits >>> (4 * i)) & 0xf) << 4);
    }
    return;
  }
  bytes[at] = bits & 0xff;
  bytes[at + 1] = bits >>> 8;
}

const unitRms = new Map<GGMLType, number>();

/** RMS of the values of random blocks with scale 1 (measured on 64 blocks from a fixed seed). */
function rmsPerUnitScale(type: GGMLType): number {
  let rms = unitRms.get(type);
  if (rms === undefined) {
    const info = ggmlTypeInfo(type)!;
    const bytes = randomBits(64 * info.bytesPerBlock, seededUniform(1));
    for (let b = 0; b < 64; b++) setBlockScale(type, bytes, b, f32ToF16Bits(1));
    const values = dequantize(type, bytes, 64 * info.blockSize);
    let sum = 0;
    for (const value of values) sum += value * value;
    rms = Math.sqrt(sum / values.length);
    unitRms.set(type, rms);
  }
  return rms;
}

function randomBits(count: number, uniform: () => number): Uint8Array {
  const bytes = new Uint8Array(count);
  for (let i = 0; i < count; i += 4) {
    const word = Math.floor(uniform() * 4294967296);
    for (let b = 0; b < 4 && i + b < count; b++) bytes[i + b] = (word >>> (8 * b)) & 0xff;
  }
  return bytes;
}

/**
 * `elementCount` values of `type` (a multiple of its block size) as random blocks whose values have
 * an RMS of about `rms`: each block's scale is rms / (the type's RMS at scale 1) times a factor drawn
 * from [0.75, 1.25). Deterministic in `seed`.
 */
export function randomBlocks(type: GGMLType | number, elementCount: number, seed: number, rms = 1): Uint8Array {
  if (!RANDOM_BLOCK_TYPES.includes(type)) throw new RangeError(`randomBlocks: no random blocks of ${ggmlTypeName(type) ?? `type ${type}`}`);
  const info = ggmlTypeInfo(type)!;
  if (!Number.isInteger(elementCount) || elementCount < 0 || elementCount % info.blockSize !== 0) {
    throw new RangeError(`randomBlocks: ${elementCount} is not a whole number of ${info.name} blocks of ${info.blockSize}`);
  }
  const blocks = elementCount / info.blockSize;
  const uniform = seededUniform(seed);
  const bytes = randomBits(blocks * info.bytesPerBlock, uniform);
  const scale = rms / rmsPerUnitScale(type);
  for (let b = 0; b < blocks; b++) setBlockScale(type, bytes, b, f32ToF16Bits(scale * (0.75 + 0.5 * uniform())));
  return bytes;
}
