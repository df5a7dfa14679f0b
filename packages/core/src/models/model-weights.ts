import { type GGUFFile, ggmlTypeName } from "@memra/gguf";
import type { Backend, WeightHandle } from "../backend";
import { ModelTensorError, UnsupportedTensorTypeError } from "../errors";

/**
 * Looks tensors up by their GGUF names, checks their shapes, and hands them to a backend.
 * `check` runs over every tensor first, so that an unsupported type or a missing tensor fails
 * before any weight is converted or copied.
 */
export class ModelWeights {
  /** Bytes the backends hold for the weights loaded so far. */
  loadedBytes = 0;
  /** The same, per backend. */
  readonly loadedBytesByBackend = new Map<Backend, number>();
  /** Bytes of the file's tensors read so far (for progress). */
  private readBytes = 0;

  constructor(
    private readonly file: GGUFFile,
    private readonly backend: Backend,
    private readonly onProgress?: (readBytes: number, totalBytes: number) => void,
  ) {}

  has(name: string): boolean {
    return this.file.tensor(name) !== undefined;
  }

  /** Verifies that `name` exists with `shape` and a type `backend` (default: the weights' backend) supports. */
  check(name: string, shape: readonly number[], backend: Backend = this.backend): void {
    const info = this.file.tensor(name);
    if (!info) throw new ModelTensorError(name, "missing from the file");
    if (info.shape.length !== shape.length || info.shape.some((d, i) => d !== shape[i])) {
      throw new ModelTensorError(name, `shape [${info.shape.join(", ")}], expected [${shape.join(", ")}]`);
    }
    if (!backend.supportsOp("matmul", info.type)) {
      throw new UnsupportedTensorTypeError(name, ggmlTypeName(info.type), backend.name);
    }
  }

  /** Uploads `name` to `backend` (default: the weights' backend). */
  load(name: string, backend: Backend = this.backend): WeightHandle {
    const info = this.file.tensor(name);
    if (!info) throw new ModelTensorError(name, "missing from the file");
    const weight = backend.uploadWeight(info, this.file.tensorData(info));
    const bytes = backend.weightBytes(weight);
    this.loadedBytes += bytes;
    this.loadedBytesByBackend.set(backend, (this.loadedBytesByBackend.get(backend) ?? 0) + bytes);
    this.readBytes += info.byteSize;
    this.onProgress?.(this.readBytes, this.file.tensorBytes);
    return weight;
  }
}
