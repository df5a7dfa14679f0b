/**
 * Whether an importance matrix belongs to a model: every entry names one of the model's weights
 * and has its size (columns × experts sums; one count, or one per expert). llama-imatrix finds out
 * only when a loaded entry meets the weight's first matmul ("inconsistent size", exit 1), after the
 * model is loaded; this tells before anything is computed, naming the file and the tensor.
 */
import type { GGUFTensorInfo } from "../gguf-file";
import type { Imatrix } from "./imatrix";
import { ImatrixError } from "./imatrix-error";

/**
 * @param path the imatrix file's name, for the error.
 * @throws ImatrixError naming the file and the first entry that does not fit.
 */
export function checkImatrixModel(imatrix: Imatrix, tensors: readonly GGUFTensorInfo[], path: string): void {
  const byName = new Map(tensors.map((tensor) => [tensor.name, tensor]));
  for (const [name, { sums, counts }] of imatrix.entries) {
    const fail = (problem: string): never => {
      throw new ImatrixError(path, `tensor "${name}"`, -1, `${problem}: the imatrix of another model?`);
    };
    const tensor = byName.get(name);
    if (!tensor) fail("the model has no such weight");
    const columns = tensor!.shape[0] ?? 1;
    const matrices = tensor!.shape.slice(2).reduce((product, dimension) => product * dimension, 1);
    if (sums.length !== columns * matrices) {
      fail(`${sums.length} ${imatrix.legacy ? "values" : "sums"}, the model's [${tensor!.shape.join(", ")}] weight takes ${columns * matrices}${matrices > 1 ? ` (${columns} columns × ${matrices} experts)` : ""}`);
    }
    if (counts.length !== 1 && counts.length !== matrices) fail(`${counts.length} counts, the model's weight has ${matrices} matri${matrices === 1 ? "x" : "ces"}`);
  }
}
