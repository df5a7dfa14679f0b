/**
 * Routed mixture-of-experts FFN, shared by MoE architectures: router logits → backend.moeRoute
 * (softmax over all experts, top-k, renormalised) → for each expert, its rows gathered, SwiGLU
 * with that expert's weights, scattered back scaled by the routing weight. A backend with
 * moeExperts for these weights does all of it on the device instead, for any number of rows.
 */
import type { Backend, DeviceBuffer, WeightHandle } from "./backend";
import { transferBetweenBackends } from "./placement/transfer-between-backends";

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
  /** Most rows forward runs without reading back to the host (on the backend's moeExperts); 0 when it always reads back. */
  readonly deviceRows: number;
}

/**
 * `backend` runs the router; `expertBackend` (default: the same) holds the expert weights and runs
 * them. When they differ, the normed input goes to the expert backend and the result comes back:
 * two transfers of [rows, embedding] per layer, nothing when they are the same.
 */
export function routedExperts(backend: Backend, w: RoutedExpertsWeights, expertBackend: Backend = backend): RoutedExperts {
  const { embedding, experts, expertsUsed, expertFeedForwardLength: ffn, maxRows } = w;
  const eb = expertBackend;
  const split = eb !== backend;
  const routerLogits = backend.allocate(maxRows * experts); // [rows, experts]
  const gathered = eb.allocate(maxRows * embedding); // [rows routed to one expert, embedding]
  const gate = eb.allocate(maxRows * ffn); // [rows, ffn]
  const up = eb.allocate(maxRows * ffn); // [rows, ffn]
  const down = eb.allocate(maxRows * embedding); // [rows, embedding]
  const input = split ? eb.allocate(maxRows * embedding) : undefined; // [rows, embedding] x on the expert backend
  const output = split ? eb.allocate(maxRows * embedding) : undefined; // [rows, embedding] out on the expert backend
  const staging = new Float32Array(split ? maxRows * embedding : 0);
  const zeros = new Float32Array(maxRows * embedding);
  const expertWeights = { gate: w.ffn_gate_exps, up: w.ffn_up_exps, down: w.ffn_down_exps };
  // On the device where the backend has kernels for these experts (asked once, rows 0).
  const onDevice = !split && backend.moeExperts?.(routerLogits, routerLogits, routerLogits, expertWeights, 0, experts, expertsUsed) === true;
  return {
    deviceRows: onDevice ? maxRows : 0,
    forward(out, x, rows) {
      backend.matmul(routerLogits, x, w.ffn_gate_inp, rows);
      if (onDevice && backend.moeExperts!(out, x, routerLogits, expertWeights, rows, experts, expertsUsed)) return;
      const { ids, weights } = backend.moeRoute(routerLogits, rows, experts, expertsUsed);
      const expertInput = input ?? x;
      const expertOutput = output ?? out;
      if (input) transferBetweenBackends(backend, x, eb, input, rows * embedding, staging);
      eb.write(expertOutput, zeros.subarray(0, rows * embedding));
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
        eb.gatherRows(gathered, expertInput, rowIds, embedding);
        eb.expertMatmul(gate, gathered, w.ffn_gate_exps, expert, count);
        eb.expertMatmul(up, gathered, w.ffn_up_exps, expert, count);
        eb.swiglu(gate, gate, up, count * ffn);
        eb.expertMatmul(down, gate, w.ffn_down_exps, expert, count);
        eb.scatterAddRows(expertOutput, down, rowIds, Float32Array.from(routedWeights), embedding);
      }
      if (output) transferBetweenBackends(eb, output, backend, out, rows * embedding, staging);
    },
  };
}
