/** Thrown when a model cannot be quantized as asked: names the tensor, key, type or option at fault. */
export class QuantizationError extends Error {
  override readonly name = "QuantizationError";
}
