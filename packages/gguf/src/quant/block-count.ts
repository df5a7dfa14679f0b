import type { GGMLTypeInfo } from "../ggml-type";

/**
 * `elementCount / info.blockSize`, after checking that the count is a non-negative integer and a whole
 * number of blocks (RangeError naming the operation, count and type otherwise).
 */
export function blockCountOf(info: GGMLTypeInfo, elementCount: number, operation: string): number {
  if (!Number.isSafeInteger(elementCount) || elementCount < 0) {
    throw new RangeError(`${operation}: element count ${elementCount} is not a non-negative integer`);
  }
  if (elementCount % info.blockSize !== 0) {
    throw new RangeError(
      `${operation}: element count ${elementCount} is not a multiple of the ${info.name} block size ${info.blockSize}`,
    );
  }
  return elementCount / info.blockSize;
}
