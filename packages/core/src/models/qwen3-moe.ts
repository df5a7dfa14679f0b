/**
 * Qwen3-MoE: the Qwen3 decoder with the dense FFN swapped for a routed mixture of experts
 * (llama.cpp src/models/qwen3moe.cpp). Routing (softmax over all experts → top-k → renormalise,
 * no shared experts) lives in ../moe.ts.
 */
import type { ModelWeights } from "./model-weights";
import type { FeedForwardFactory, ModelDimensions } from "./qwen3";
import { routedExperts } from "../moe";

export function moeFeedForward(d: ModelDimensions, experts: number, expertsUsed: number, expertFeedForwardLength: number): FeedForwardFactory {
  return {
    check(weights: ModelWeights, layer: number, backend, expertBackend) {
      const blk = `blk.${layer}`;
      weights.check(`${blk}.ffn_norm.weight`, [d.embedding], backend);
      weights.check(`${blk}.ffn_gate_inp.weight`, [d.embedding, experts], backend);
      weights.check(`${blk}.ffn_gate_exps.weight`, [d.embedding, expertFeedForwardLength, experts], expertBackend);
      weights.check(`${blk}.ffn_up_exps.weight`, [d.embedding, expertFeedForwardLength, experts], expertBackend);
      weights.check(`${blk}.ffn_down_exps.weight`, [expertFeedForwardLength, d.embedding, experts], expertBackend);
    },
    create(backend, weights, layer, maxRows, expertBackend) {
      // the router runs with the layer; the experts (the bulk of the weights) may sit elsewhere
      const load = (name: string, on = backend) => weights.load(`blk.${layer}.${name}.weight`, on);
      const ffn_norm = load("ffn_norm");
      const experts_ = routedExperts(backend, {
        embedding: d.embedding,
        experts,
        expertsUsed,
        expertFeedForwardLength,
        maxRows,
        ffn_gate_inp: load("ffn_gate_inp"),
        ffn_gate_exps: load("ffn_gate_exps", expertBackend),
        ffn_up_exps: load("ffn_up_exps", expertBackend),
        ffn_down_exps: load("ffn_down_exps", expertBackend),
      }, expertBackend);
      return {
        ffn_norm,
        recordableRows: experts_.deviceRows,
        forward(_b, s, rows) {
          experts_.forward(s.projected, s.normed, rows);
        },
      };
    },
  };
}
