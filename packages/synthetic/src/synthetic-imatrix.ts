/**
 * A deterministic importance matrix for a synthetic model, shaped as llama-imatrix writes one for it:
 * an entry for every weight its matrix multiplications read (attention, FFN, the MoE router and the
 * merged experts, but no output.weight, as without --process-output), with per-expert counts. The
 * values are not any text's activations: they are seeded positives spanning six orders of
 * magnitude, so that quantization with them differs clearly from quantization without, and one
 * expert of the first MoE layer is never routed to (count 0), the case llama-quantize replaces by 1s.
 * quantize-goldens.ts records llama-quantize's files with it; the tests rebuild it.
 */
import type { GGUFFile, Imatrix, ImatrixEntry } from "@memra/gguf";
import { SeededRandom } from "./random";

/** The tokens the synthetic imatrix claims it saw: 2 chunks of 64. */
const CHUNK_SIZE = 64;
const CHUNKS = 2;

const MATMUL_WEIGHTS = /^blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down|ffn_gate_inp|ffn_gate_exps|ffn_up_exps|ffn_down_exps)\.weight$/;

export function syntheticImatrix(model: GGUFFile, seed = "imatrix"): Imatrix {
  const entries = new Map<string, ImatrixEntry>();
  const tokens = CHUNK_SIZE * CHUNKS;
  let firstExperts = true;
  for (const tensor of model.tensors) {
    if (!MATMUL_WEIGHTS.test(tensor.name)) continue;
    const columns = tensor.shape[0]!;
    const matrices = tensor.name.endsWith("_exps.weight") ? (tensor.shape[2] ?? 1) : 1;
    const random = new SeededRandom(`${seed}:${tensor.name}`);
    const counts: number[] = [];
    for (let m = 0; m < matrices; m++) counts.push(matrices === 1 ? tokens : 1 + Math.floor(random.uniform() * tokens));
    if (matrices > 1 && firstExperts) counts[matrices - 1] = 0;
    if (matrices > 1 && tensor.name.includes("ffn_down_exps")) firstExperts = false;
    const sums = new Float32Array(columns * matrices);
    for (let m = 0; m < matrices; m++) {
      for (let c = 0; c < columns; c++) {
        // mean square activations from 1e-4 to 1e2, times the count: what llama-imatrix sums
        sums[m * columns + c] = counts[m] === 0 ? 0 : 10 ** (-4 + 6 * random.uniform()) * counts[m]!;
      }
    }
    entries.set(tensor.name, { sums, counts });
  }
  return { entries, datasets: ["synthetic"], chunkCount: CHUNKS, chunkSize: CHUNK_SIZE, legacy: false };
}
