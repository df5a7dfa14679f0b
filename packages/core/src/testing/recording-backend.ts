/**
 * A backend that records graphs the way the contract describes them (Backend.captureGraph) around
 * any other backend: while recording, each op call is kept with the very arguments it was given
 * (the host arrays by reference) and nothing runs; a replay calls the ops again, so they read the
 * arrays' contents at that time. It lets the model's decode-graph bookkeeping (which arrays it
 * hands to a graph, when it records, when it replays) be tested on any backend: a model that
 * passed a fresh array while recording would replay with stale contents, and its logits would
 * differ from the same steps run op by op.
 */
import type { Backend, BackendGraph } from "../backend";

/** Ops a graph records; every other call runs as usual (and the host-reading ones fail while recording). */
const RECORDED = new Set(["copy", "embedding", "rmsNorm", "addRmsNorm", "matmul", "matmuls", "rmsNormMatmuls", "qkNormRope", "qkNormRopeWriteKV", "qkNormRopeAttentionMatmul", "rmsNormSwigluMatmul", "ropeNeox", "writeKV", "writeKVPair", "copyKV", "attention", "attentionMatmul", "swiglu", "swigluMatmul", "add", "expertMatmul", "moeExperts", "gatherRows", "scatterAddRows"]);
const REFUSED = new Set(["read", "readInto", "readKVRows", "writeKVRows", "argmaxRows", "topKRows", "write", "moeRoute", "allocate", "allocateKV", "uploadWeight"]);

export interface RecordingBackend extends Backend {
  /** Graphs recorded so far, replays of any of them, and graphs disposed. */
  readonly recordings: number;
  readonly replays: number;
  readonly disposals: number;
}

export function recordingBackend(inner: Backend): RecordingBackend {
  let queue: (() => void)[] | undefined;
  const counts = { recordings: 0, replays: 0, disposals: 0 };
  const captureGraph = (record: () => void): BackendGraph => {
    if (queue) throw new Error("recordingBackend: graphs do not nest");
    const ops: (() => void)[] = [];
    queue = ops;
    try {
      record();
    } finally {
      queue = undefined;
    }
    counts.recordings++;
    let disposed = false;
    return {
      replay() {
        if (disposed) throw new Error("replay of a disposed graph");
        counts.replays++;
        for (const op of ops) op();
      },
      dispose() {
        if (!disposed) counts.disposals++;
        disposed = true;
      },
    };
  };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === "captureGraph") return captureGraph;
      if (property === "recordings" || property === "replays" || property === "disposals") return counts[property];
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      if (queue && REFUSED.has(property)) return () => { throw new Error(`recordingBackend: ${property} while recording a graph`); };
      if (queue && RECORDED.has(property)) {
        const ops = queue;
        return (...args: unknown[]) => void ops.push(() => (value as (...values: unknown[]) => unknown).apply(target, args));
      }
      return (value as (...values: unknown[]) => unknown).bind(target);
    },
  }) as RecordingBackend;
}
