/** The file's architecture is not one Memra implements. */
export class UnsupportedArchitectureError extends Error {
  override readonly name = "UnsupportedArchitectureError";
  constructor(
    readonly architecture: string,
    readonly supported: readonly string[],
  ) {
    super(`unsupported architecture "${architecture}" (supported: ${supported.join(", ")})`);
  }
}

/** A tensor's ggml type cannot be computed with by a backend. */
export class UnsupportedTensorTypeError extends Error {
  override readonly name = "UnsupportedTensorTypeError";
  constructor(
    readonly tensor: string,
    readonly type: string,
    readonly backend: string,
  ) {
    super(`tensor "${tensor}" has type ${type}, which the ${backend} backend cannot compute with`);
  }
}

/** A tensor the architecture needs is absent or has the wrong shape. */
export class ModelTensorError extends Error {
  override readonly name = "ModelTensorError";
  constructor(
    readonly tensor: string,
    problem: string,
  ) {
    super(`tensor "${tensor}": ${problem}`);
  }
}

/** A backend lacks an op the model needs (a backend is asked, never assumed to have an optional op). */
export class UnsupportedOpError extends Error {
  override readonly name = "UnsupportedOpError";
  constructor(
    readonly op: string,
    readonly backend: string,
    why: string,
  ) {
    super(`the ${backend} backend has no ${op}, which ${why}`);
  }
}

/** A KV storage was used after its dispose() (KVStorage.dispose): its memory went back to its backend. */
export class KVStorageDisposedError extends Error {
  override readonly name = "KVStorageDisposedError";
  constructor() {
    super("the KV storage was disposed: its memory went back to the backend and may hold another cache now");
  }
}
