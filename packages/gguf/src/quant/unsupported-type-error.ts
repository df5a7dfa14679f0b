import { ggmlTypeInfo, type GGMLType } from "../ggml-type";

/** Thrown when a conversion is asked of a ggml type that it does not implement (or that does not exist). */
export class UnsupportedTypeError extends Error {
  override readonly name = "UnsupportedTypeError";
  /** The type id that was asked for. */
  readonly type: number;

  constructor(operation: "dequantize" | "quantize", type: GGMLType | number) {
    const name = ggmlTypeInfo(type)?.name;
    super(
      name === undefined
        ? `${operation}: unknown ggml type id ${type}`
        : `${operation}: ggml type ${name} (id ${type}) is not supported`,
    );
    this.type = type;
  }
}
