/**
 * Routed mixture-of-experts FFN, shared by MoE architectures: router logits → backend.moeRoute
 * (softmax over all experts, top-k, renormalised) → for each expert, its rows gathered, SwiGLU
 * with that expert's weights, scattered back scaled by the routing weight.
 */
import type { Backend, DeviceBuffer, WeightHandle } from "./backend";

export interface RoutedExpertsWeights {
  readonly embedding: number;
  readonly experts: number;
  readonly expertsUsed: number;
  readonly expertFeedForwardLength: number;
  readonly maxRows: number;
  readonly ffn_gate_inp: WeightHandle; // [embedding, experts]
  readonly ffn_gate_exps: WeightHandle; // [embedding, expertFfn, experts]
  readonly ffn_up_exps: WeightHandle; // [embedding, expertFfn, experts]
  readonly ffn_down_exps: WeightHandle; // [expertFfn, embedding, experts]
}

export interface RoutedExperts {
  /** out = Σ_selected weight · expert(x). x/out: [rows, embedding] */
  forward(out: DeviceBuffer, x: DeviceBuffer, rows: number): void;
}

export function routedExperts(backend: Backend, w: RoutedExpertsWeights): RoutedExperts {
  const { embedding, experts, expertsUsed, expertFeedForwardLength: ffn, maxRows } = w;
  const routerLogits = backend.allocate(maxRows * experts); // [rows, experts]
  const gathered = backend.allocate(maxRows * embedding); // [rows routed to one expert, embedding]
  const gate = backend.allocate(maxRows * ffn); // [rows, ffn]
  const up = backend.allocate(maxRows * ffn); // [rows, ffn]
  const down = backend.allocate(maxRows * embedding); // [rows, embedding]
  const zeros = new Float32Array(maxRows * embedding);
  return {
    forward(out, x, rows) {
      backend.matmul(routerLogits, x, w.ffn_gate_inp, rows);
      const { ids, weights } = backend.moeRoute(routerLogits, rows, experts, expertsUsed);
      backend.write(out, zeros.subarray(0, rows * embedding));
      for (let expert = 0; expert < experts; expert++) {
        const routedRows: number[] = [];
        const routedWeights: number[] = [];
        for (let i = 0; i < ids.length; i++) {
          if (ids[i] === expert) {
            routedRows.push(Math.floor(i / expertsUsed));
            routedWeights.push(weights[i]!);
          }
        }
        if (routedRows.length === 0) continue;
        const count = routedRows.length;
        const rowIds = Int32Array.from(routedRows);
        backend.gatherRows(gathered, x, rowIds, embedding);
        backend.expertMatmul(gate, gathered, w.ffn_gate_exps, expert, count);
        backend.expertMatmul(up, gathered, w.ffn_up_exps, expert, count);
        backend.swiglu(gate, gate, up, count * ffn);
        backend.expertMatmul(down, gate, w.ffn_down_exps, expert, count);
        backend.scatterAddRows(out, down, rowIds, Float32Array.from(routedWeights), embedding);
      }
    },
  };
}
