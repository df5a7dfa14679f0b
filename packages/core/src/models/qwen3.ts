/**
 * Qwen3 (dense), as llama.cpp's src/models/qwen3.cpp builds it:
 * embed → per layer {RMSNorm, Q/K/V, per-head QK-norm, NEOX RoPE, causal GQA attention over the
 * KV cache, O, residual, RMSNorm, SwiGLU, residual} → final RMSNorm → LM head (the token
 * embedding when `output.weight` is absent). Activations are token-major [tokens, width].
 */
import type { GGUFFile, Qwen3Config, Qwen3MoeConfig } from "@memra/gguf";
import { argmax } from "@memra/sampler";
import { type AttentionShape, type Backend, type BackendGraph, type DeviceBuffer, type KVLayerView, type KVStorage, type ResidualNorm, TOP_K_ROWS_MAX, type WeightHandle } from "../backend";
import { type RopeScaling, type RopeScalingOptions, resolveRopeScaling, rotateNeox } from "./rope-scaling";
import { UnsupportedOpError } from "../errors";
import type { KVCache } from "../kv-cache";
import { convertKVRows } from "../kv-state";
import type { PagedKVCache } from "../paged-kv-cache";
import type { BackendPlacement } from "../placement/backend-placement";
import { transferBetweenBackends } from "../placement/transfer-between-backends";
import { logSumExp } from "../evaluation";
import { HostTopK } from "../top-candidates";

/** One sequence's part of a batched forward: its new tokens, its cache, the rows to return logits for. */
export interface BatchEntry {
  readonly tokens: Int32Array;
  readonly cache: KVCache;
  /** The last row (default), all rows, or given indices of `tokens`. */
  readonly logits?: "last" | "all" | readonly number[];
  /**
   * Where this entry's logits go ([rows, vocabulary], exactly that length) instead of a new array:
   * a caller that decodes step after step (the engine) reuses one, so that a busy server does not
   * leave ~0.6 MB of garbage per sequence and step for the collector.
   */
  readonly output?: Float32Array;
  /**
   * Greedy decoding: the logits of the entry's last row are reduced to their greedy token (the
   * sampler's argmax: the first largest logit), written to greedy[0], on the backend where it can
   * (Backend.argmaxRows), so that only the token comes back to the host. The entry's result is then
   * an empty array; `logits` and `output` must be absent.
   */
  readonly greedy?: Int32Array;
  /**
   * Sampling from the best candidates (see the sampler's topCandidatesSuffice): the k best of the
   * entry's last row, k = ids.length = logits.length (1 to min(vocabulary, TOP_K_ROWS_MAX)), go to
   * ids and logits in descending order, equal logits by ascending id, as the sampler's top-k
   * leaves them; picked on the backend where it can (Backend.topKRows), so that 2k numbers come
   * back instead of the vocabulary's logits. The entry's result is then an empty array; `logits`,
   * `output` and `greedy` must be absent.
   */
  readonly top?: TopCandidates;
  /**
   * `top` for every requested row (`logits`): tops[i] gets the best candidates of the i-th (its
   * own k = ids.length, and its row's log Σ exp where it has logSumExp). The entry's result is then
   * an empty array; `output`, `greedy`, `top` and `logprobs` must be absent.
   */
  readonly tops?: readonly TopCandidates[];
  /**
   * Scoring: for the i-th requested row (`logits`), out[i] = log p(targets[i]) under its softmax
   * (targets and out hold one entry per requested row), computed on the backend where it can
   * (Backend.logSoftmaxAt: one f32 per row comes back), else on the host in double precision.
   * The entry's result is then an empty array; `output`, `greedy` and `top` must be absent.
   */
  readonly logprobs?: { readonly targets: Int32Array; readonly out: Float64Array };
  /**
   * Embeddings: the requested rows' (`logits`) hidden states after the final RMSNorm, the vectors
   * llama.cpp pools into embeddings ([rows, embedding], exactly that length), instead of logits:
   * the LM head does not run for them. The entry's result is then an empty array; `output`,
   * `greedy`, `top`, `tops` and `logprobs` must be absent.
   */
  readonly hidden?: Float32Array;
  /**
   * The entry's LoRA adapter scales, one per adapter in load order (llama.cpp server's per-request
   * `lora`): its rows' terms are scaled by these instead of the model's scales
   * (Transformer.loraAdapters). Rows of one batch may run with different scales.
   */
  readonly loraScales?: ArrayLike<number>;
}

/** Where a batch entry's best candidates go (BatchEntry.top). */
export interface TopCandidates {
  readonly ids: Int32Array;
  readonly logits: Float32Array;
  /**
   * When present, log Σ exp of the whole row's logits goes to logSumExp[0] (so that
   * logits[i] - logSumExp[0] is log p(ids[i])): on the backend where it can (Backend.logSoftmaxAt
   * at the best candidate: within 1e-5·max(1, |value|)), else on the host in double precision.
   */
  readonly logSumExp?: Float64Array;
}
import { type LoraAdapterOptions, type LoraWeights, loadLoraAdapters, loraFactor } from "./lora";
import { ModelWeights } from "./model-weights";

export type TransformerConfig = Qwen3Config | Qwen3MoeConfig;

// ---- config ----

export interface ModelDimensions {
  readonly vocabulary: number;
  readonly embedding: number;
  readonly layers: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  /** heads * headDim */
  readonly queryWidth: number;
  /** kvHeads * headDim */
  readonly kvWidth: number;
  readonly eps: number;
  readonly ropeFreqBase: number;
  /** RoPE scaling (linear, YaRN), or undefined for plain RoPE. */
  readonly ropeScaling?: RopeScaling;
}

export function modelDimensions(config: TransformerConfig, vocabulary: number, ropeScaling?: RopeScalingOptions): ModelDimensions {
  const scaling = resolveRopeScaling(config, config.keyLength, ropeScaling);
  return {
    vocabulary,
    embedding: config.embeddingLength,
    layers: config.blockCount,
    heads: config.headCount,
    kvHeads: config.headCountKv,
    headDim: config.keyLength,
    queryWidth: config.headCount * config.keyLength,
    kvWidth: config.headCountKv * config.keyLength,
    eps: config.layerNormRmsEpsilon,
    ropeFreqBase: config.ropeFreqBase,
    ...(scaling ? { ropeScaling: scaling } : {}),
  };
}

/**
 * Buffers a forward pass works in, allocated once for up to `rows` tokens at a time, one set on
 * every backend that runs a layer (the residual stream moves between them at device boundaries).
 */
export interface Scratch {
  readonly rows: number;
  readonly hidden: DeviceBuffer; // [rows, embedding] the residual stream
  readonly normed: DeviceBuffer; // [rows, embedding]
  readonly query: DeviceBuffer; // [rows, queryWidth]
  readonly key: DeviceBuffer; // [rows, kvWidth]
  readonly value: DeviceBuffer; // [rows, kvWidth]
  readonly attention: DeviceBuffer; // [rows, queryWidth]
  readonly projected: DeviceBuffer; // [rows, embedding]
}

/**
 * Rows the LM head computes per matmul: logits of more rows (perplexity asks for every row) go
 * through it in chunks, so the scratch holds LOGIT_ROWS x vocabulary floats (19 MiB for Qwen3)
 * instead of maxBatchTokens x vocabulary (311 MiB at 512 rows).
 */
const LOGIT_ROWS = 32;

function createScratch(backend: Backend, d: ModelDimensions, rows: number): Scratch {
  return {
    rows,
    hidden: backend.allocate(rows * d.embedding),
    normed: backend.allocate(rows * d.embedding),
    query: backend.allocate(rows * d.queryWidth),
    key: backend.allocate(rows * d.kvWidth),
    value: backend.allocate(rows * d.kvWidth),
    attention: backend.allocate(rows * d.queryWidth),
    projected: backend.allocate(rows * d.embedding),
  };
}

// ---- attention ----

export interface AttentionWeights {
  readonly attn_norm: WeightHandle;
  readonly attn_q: WeightHandle;
  readonly attn_k: WeightHandle;
  readonly attn_v: WeightHandle;
  readonly attn_q_norm: WeightHandle;
  readonly attn_k_norm: WeightHandle;
  readonly attn_output: WeightHandle;
}

function checkAttention(weights: ModelWeights, d: ModelDimensions, layer: number, backend: Backend): void {
  const blk = `blk.${layer}`;
  weights.check(`${blk}.attn_norm.weight`, [d.embedding], backend);
  weights.check(`${blk}.attn_q.weight`, [d.embedding, d.queryWidth], backend);
  weights.check(`${blk}.attn_k.weight`, [d.embedding, d.kvWidth], backend);
  weights.check(`${blk}.attn_v.weight`, [d.embedding, d.kvWidth], backend);
  weights.check(`${blk}.attn_q_norm.weight`, [d.headDim], backend);
  weights.check(`${blk}.attn_k_norm.weight`, [d.headDim], backend);
  weights.check(`${blk}.attn_output.weight`, [d.queryWidth, d.embedding], backend);
}

function loadAttention(weights: ModelWeights, layer: number, backend: Backend): AttentionWeights {
  const load = (name: string) => weights.load(`blk.${layer}.${name}.weight`, backend);
  return {
    attn_norm: load("attn_norm"),
    attn_q: load("attn_q"),
    attn_k: load("attn_k"),
    attn_v: load("attn_v"),
    attn_q_norm: load("attn_q_norm"),
    attn_k_norm: load("attn_k_norm"),
    attn_output: load("attn_output"),
  };
}

/** Where a batch's attention reads and writes: every sequence's slots and block tables in one pool. */
interface BatchLayout {
  readonly cache: KVCache; // any of the batch's caches: they share one storage
  /** The pool slot of every row of the batch. */
  readonly slots: Int32Array; // [rows]
  readonly blockTables: Int32Array;
  readonly sequences: Int32Array; // [sequences, 4]
}

/** Several matmuls of one input: together where the backend offers it (Backend.matmuls), else one by one. */
function matmuls(backend: Backend, outs: readonly DeviceBuffer[], x: DeviceBuffer, weights: readonly WeightHandle[], rows: number): void {
  if (backend.matmuls) backend.matmuls(outs, x, weights, rows);
  else for (let i = 0; i < outs.length; i++) backend.matmul(outs[i]!, x, weights[i]!, rows);
}

/**
 * normed = RMSNorm(hidden) · weight, first adding the pending residual (projected) to hidden when
 * there is one: in one op where the backend has it (Backend.addRmsNorm).
 */
function addAndNorm(backend: Backend, d: ModelDimensions, s: Scratch, pending: boolean, weight: WeightHandle, rows: number): void {
  if (!pending) backend.rmsNorm(s.normed, s.hidden, weight, rows, d.eps);
  else if (backend.addRmsNorm) backend.addRmsNorm(s.normed, s.hidden, s.projected, weight, rows, d.eps);
  else {
    backend.add(s.hidden, s.hidden, s.projected, rows * d.embedding);
    backend.rmsNorm(s.normed, s.hidden, weight, rows, d.eps);
  }
}

/**
 * addAndNorm with `weight`, then matmuls(outs, normed, weights): in one op where the backend has
 * it (Backend.rmsNormMatmuls: CUDA rounds the matmuls' activations in the norm's kernel).
 */
function normAndMatmuls(
  backend: Backend,
  d: ModelDimensions,
  s: Scratch,
  pending: boolean,
  weight: WeightHandle,
  outs: readonly DeviceBuffer[],
  weights: readonly WeightHandle[],
  rows: number,
): void {
  if (backend.rmsNormMatmuls) backend.rmsNormMatmuls(s.normed, s.hidden, pending ? s.projected : undefined, weight, d.eps, outs, weights, rows);
  else {
    addAndNorm(backend, d, s, pending, weight, rows);
    matmuls(backend, outs, s.normed, weights, rows);
  }
}

/**
 * projected = attention(RMSNorm(hidden) · attn_norm), adding the pending residual (projected) to
 * hidden first when there is one, and writing this step's K/V into the cache's blocks. The caller
 * adds projected to hidden, unless the backend did with `residual` (ResidualNorm): then this
 * returns true, and normed holds the next RMSNorm.
 */
function attentionBlock(
  backend: Backend,
  d: ModelDimensions,
  w: AttentionWeights,
  s: Scratch,
  rows: number,
  positions: Int32Array,
  layout: BatchLayout,
  layer: number,
  pending: boolean,
  residual: ResidualNorm | undefined,
  lora?: LoraApply,
): boolean {
  normAndMatmuls(backend, d, s, pending, w.attn_norm, [s.query, s.key, s.value], [w.attn_q, w.attn_k, w.attn_v], rows);
  if (lora) {
    // A layer with adapted projections: each product gets its adapters' terms, and no op hides the
    // attention's output from the output projection's (nor adds the residual before them).
    lora(`blk.${layer}.attn_q.weight`, s.query, s.normed, rows);
    lora(`blk.${layer}.attn_k.weight`, s.key, s.normed, rows);
    lora(`blk.${layer}.attn_v.weight`, s.value, s.normed, rows);
  }
  const storage = layout.cache.storage;
  const [keys, values] = [storage.keys[layer]!, storage.values[layer]!];
  const kv = { keys, values, blockTokens: storage.blockTokens, blockTables: layout.blockTables, sequences: layout.sequences };
  const shape = { rows, heads: d.heads, kvHeads: d.kvHeads, headDim: d.headDim, scale: 1 / Math.sqrt(d.headDim) };
  // The whole block in one op where the backend takes it (CUDA: a decode step, in the attention kernel).
  const together = lora ? undefined : backend.qkNormRopeAttentionMatmul?.(
    s.projected,
    s.attention,
    s.query,
    s.key,
    s.value,
    w.attn_q_norm,
    w.attn_k_norm,
    positions,
    d.eps,
    d.ropeFreqBase,
    layout.slots,
    kv,
    shape,
    w.attn_output,
    residual,
    d.ropeScaling,
  );
  if (together) return together === "normed";
  // QK-norm: RMSNorm over each head's headDim values, before RoPE; then this step's K and V into
  // the cache. In one op where the backend has it, else in as few as it has.
  // With RoPE scaling (YaRN, linear) the fused ops take it too; a backend that does not apply it declines them.
  const normRopeWrite = backend.qkNormRopeWriteKV?.(s.query, s.key, s.value, w.attn_q_norm, w.attn_k_norm, positions, d.heads, d.kvHeads, d.headDim, d.eps, d.ropeFreqBase, keys, values, layout.slots, d.ropeScaling);
  if (!normRopeWrite) {
    if (!backend.qkNormRope?.(s.query, s.key, w.attn_q_norm, w.attn_k_norm, positions, d.heads, d.kvHeads, d.headDim, d.eps, d.ropeFreqBase, d.ropeScaling)) {
      backend.rmsNorm(s.query, s.query, w.attn_q_norm, rows * d.heads, d.eps);
      backend.rmsNorm(s.key, s.key, w.attn_k_norm, rows * d.kvHeads, d.eps);
      if (d.ropeScaling) {
        backend.ropeNeoxScaled!(s.query, positions, d.heads, d.headDim, d.ropeFreqBase, d.ropeScaling);
        backend.ropeNeoxScaled!(s.key, positions, d.kvHeads, d.headDim, d.ropeFreqBase, d.ropeScaling);
      } else {
        backend.ropeNeox(s.query, positions, d.heads, d.headDim, d.ropeFreqBase);
        backend.ropeNeox(s.key, positions, d.kvHeads, d.headDim, d.ropeFreqBase);
      }
    }
    writeKeysAndValues(backend, keys, values, layout.slots, s.key, s.value);
  }
  return attendAndProject(backend, s, w, kv, shape, rows, residual, lora, layer);
}

/** attention into s.attention, then projected = attention · attn_output (with the residual and next norm where the backend takes them). */
function attendAndProject(
  backend: Backend,
  s: Scratch,
  w: AttentionWeights,
  kv: KVLayerView,
  shape: AttentionShape,
  rows: number,
  residual: ResidualNorm | undefined,
  lora?: LoraApply,
  layer = 0,
): boolean {
  if (backend.attentionMatmul && !lora) return backend.attentionMatmul(s.projected, s.attention, s.query, kv, shape, w.attn_output, residual) === "normed";
  backend.attention(s.attention, s.query, kv, shape);
  backend.matmul(s.projected, s.attention, w.attn_output, rows);
  lora?.(`blk.${layer}.attn_output.weight`, s.projected, s.attention, rows);
  return false;
}

/** Adds the LoRA adapters' terms of the weight named `weight` to out = W x (rows rows); nothing when it has none. */
type LoraApply = (weight: string, out: DeviceBuffer, x: DeviceBuffer, rows: number) => void;

function writeKeysAndValues(backend: Backend, keys: KVStorage, values: KVStorage, slots: Int32Array, key: DeviceBuffer, value: DeviceBuffer): void {
  if (backend.writeKVPair) backend.writeKVPair(keys, values, slots, key, value);
  else {
    backend.writeKV(keys, slots, key);
    backend.writeKV(values, slots, value);
  }
}

// ---- MLP ----

/**
 * The feed-forward half of a decoder layer: projected = ffn(normed), where the layer has set
 * normed = RMSNorm(hidden) · ffn_norm and adds projected to hidden afterwards. Dense or MoE.
 */
export interface FeedForward {
  readonly ffn_norm: WeightHandle;
  /**
   * Most rows for which forward() may be recorded as a backend graph: it reads nothing back to the
   * host (MoE routing does, unless the backend routes on the device). 0 or absent: never.
   */
  readonly recordableRows?: number;
  /**
   * The FFN's first matmuls of `normed` (dense: gate and up), if it has them: the layer then runs
   * the norm and these together (Backend.rmsNormMatmuls) before forward(), which reads only their
   * outputs.
   */
  readonly projections?: { readonly outs: readonly DeviceBuffer[]; readonly weights: readonly WeightHandle[] };
  /**
   * A dense SwiGLU FFN's buffers and weights: the layer then first offers the norm and the whole FFN
   * to the backend as one op (Backend.rmsNormSwigluMatmul), and runs projections + forward() only
   * where it declines.
   */
  readonly swiglu?: {
    readonly gate: DeviceBuffer;
    readonly up: DeviceBuffer;
    readonly gateWeight: WeightHandle;
    readonly upWeight: WeightHandle;
    readonly downWeight: WeightHandle;
    /** The FFN's width (gate and up hold rows × width values). */
    readonly width: number;
  };
  forward(backend: Backend, s: Scratch, rows: number): void;
}

export interface FeedForwardFactory {
  /** Checks shapes and types (no allocation): the layer's tensors on `backend`, routed experts on `expertBackend`. */
  check(weights: ModelWeights, layer: number, backend: Backend, expertBackend: Backend): void;
  /** Loads the layer's FFN onto `backend` (routed experts onto `expertBackend`) with its buffers. */
  create(backend: Backend, weights: ModelWeights, layer: number, maxRows: number, expertBackend: Backend): FeedForward;
}

/** SwiGLU: down(silu(gate(x)) * up(x)). */
export function denseFeedForward(d: ModelDimensions, feedForwardLength: number): FeedForwardFactory {
  return {
    check(weights, layer, backend) {
      const blk = `blk.${layer}`;
      weights.check(`${blk}.ffn_norm.weight`, [d.embedding], backend);
      weights.check(`${blk}.ffn_gate.weight`, [d.embedding, feedForwardLength], backend);
      weights.check(`${blk}.ffn_up.weight`, [d.embedding, feedForwardLength], backend);
      weights.check(`${blk}.ffn_down.weight`, [feedForwardLength, d.embedding], backend);
    },
    create(backend, weights, layer, maxRows) {
      const load = (name: string) => weights.load(`blk.${layer}.${name}.weight`, backend);
      const ffn_norm = load("ffn_norm");
      const ffn_gate = load("ffn_gate");
      const ffn_up = load("ffn_up");
      const ffn_down = load("ffn_down");
      const gate = backend.allocate(maxRows * feedForwardLength); // [rows, ffn]
      const up = backend.allocate(maxRows * feedForwardLength); // [rows, ffn]
      return {
        ffn_norm,
        recordableRows: Number.POSITIVE_INFINITY,
        projections: { outs: [gate, up], weights: [ffn_gate, ffn_up] },
        swiglu: { gate, up, gateWeight: ffn_gate, upWeight: ffn_up, downWeight: ffn_down, width: feedForwardLength },
        forward(b, s, rows) {
          // gate and up hold the projections (run with the norm)
          if (b.swigluMatmul) b.swigluMatmul(s.projected, gate, up, ffn_down, rows);
          else {
            b.swiglu(gate, gate, up, rows * feedForwardLength);
            b.matmul(s.projected, gate, ffn_down, rows);
          }
        },
      };
    },
  };
}

// ---- decoder layer and model ----

interface DecoderLayer {
  readonly attention: AttentionWeights;
  readonly feedForward: FeedForward;
}

export interface ForwardOptions {
  /** Which rows of this call to return logits for: the last one (default), all, or given indices. */
  readonly logits?: "last" | "all" | readonly number[];
}

export interface TransformerOptions {
  /** Most tokens one forward step processes; longer inputs run in chunks. */
  readonly maxBatchTokens?: number;
  /** Called as weights are loaded, with the tensor bytes read so far and in all. */
  readonly onProgress?: (readBytes: number, totalBytes: number) => void;
  /**
   * Record decode steps (one token per sequence) as backend graphs and replay them (true, the
   * default), where the model runs on one backend that records graphs (CudaBackend) and its FFN
   * reads nothing back to the host (dense; MoE where the backend routes on the device, up to 64
   * sequences).
   */
  readonly decodeGraphs?: boolean;
  /** LoRA adapters applied at run time (llama.cpp's --lora / --lora-scaled); decode steps then run op by op. */
  readonly lora?: readonly LoraAdapterOptions[];
}

/** The result of a greedy batch entry (its token is in BatchEntry.greedy). */
const EMPTY_LOGITS = new Float32Array(0);

/** Decode graphs kept per model (least recently used dropped first): one per batch size, block-table width, KV pool and whether it records the LM head. */
const DECODE_GRAPH_LIMIT = 32;

/**
 * A recorded decode step and the host arrays it reads: the step's inputs are written into these
 * (same objects every time) and the graph replayed. Block tables are padded to a power-of-two
 * width per sequence (the key's stride), so that the graph fits every step until a sequence
 * outgrows them.
 */
interface DecodeStep {
  readonly tokens: Int32Array; // [rows]
  readonly positions: Int32Array; // [rows]
  readonly slots: Int32Array; // [rows]
  readonly blockTables: Int32Array; // [rows * stride]
  readonly sequences: Int32Array; // [rows, 4]
  graph: BackendGraph | undefined;
}

let nextStorageId = 0;
const storageIds = new WeakMap<object, number>();
function storageId(storage: object): number {
  let id = storageIds.get(storage);
  if (id === undefined) storageIds.set(storage, (id = nextStorageId++));
  return id;
}

export class Transformer {
  readonly dimensions: ModelDimensions;
  /** The token embedding's backend (the only backend when the model is not split). */
  readonly backend: Backend;
  /** The backend of each layer: its weights, buffers and KV blocks live there. */
  readonly layerBackends: readonly Backend[];
  /** The backend of each layer's routed experts (the layer's own unless split). */
  readonly expertBackends: readonly Backend[];
  /** The final norm's and LM head's backend. */
  readonly outputBackend: Backend;
  /** Every backend the model uses, each once, in order of first use. */
  readonly backends: readonly Backend[];
  private readonly layers: DecoderLayer[] = [];
  private readonly tokenEmbedding: WeightHandle;
  private readonly outputNorm: WeightHandle;
  private readonly output: WeightHandle;
  /** Scratch of each layer's backend (one object per backend, shared by its layers). */
  private readonly layerScratch: Scratch[];
  private readonly embeddingScratch: Scratch;
  private readonly outputScratch: Scratch;
  private readonly logits: DeviceBuffer; // [min(rows, LOGIT_ROWS), vocabulary] on the output backend
  /** Greedy tokens of a logits chunk (Backend.argmaxRows), and one row's logits where the backend has no argmaxRows or topKRows. */
  private readonly greedyTokens = new Int32Array(LOGIT_ROWS);
  private hostRowStorage: Float32Array | undefined;
  /** Best candidates of a logits chunk (Backend.topKRows), [rows, k]; grown to the largest k asked. */
  private topIds = new Int32Array(0);
  private topLogits = new Float32Array(0);
  /** Best candidates picked on the host where the output backend has no topKRows. */
  private readonly hostTopK = new HostTopK();
  /** Host memory the residual stream passes through at device boundaries (empty when not split). */
  private readonly staging: Float32Array;
  private readonly maxRows: number;
  /** Bytes of weights held by the backends, all together. */
  readonly weightBytes: number;
  /** Bytes of weights held by each backend. */
  readonly weightBytesByBackend: ReadonlyMap<Backend, number>;
  /** Recorded decode steps by `storage:rows:stride`, least recently used first; undefined when decode runs op by op. */
  private decodeSteps: Map<string, DecodeStep> | undefined;
  /** Most sequences a recorded decode step may hold (the FFNs' recordableRows). */
  private readonly recordableRows: number;
  /** The LoRA adapters' terms, when the model has adapters. */
  readonly lora: LoraWeights | undefined;
  /** Per layer: whether its attention / FFN projections are adapted (undefined: neither). */
  private readonly loraLayers: ({ readonly attention: boolean; readonly feedForward: boolean } | undefined)[] = [];
  /** Per backend: the LoRA terms' intermediate products (A x, then B (A x)). */
  private readonly loraScratch = new Map<Backend, { inner: DeviceBuffer; outer: DeviceBuffer }>();
  /** Row indices 0, 1, ..., for scatterAddRows (out += factor · B (A x)). */
  private loraRows = new Int32Array(0);
  /** The scales of sequences that give none (BatchEntry.loraScales): the load options' until setLoraScales. */
  private loraDefaultScales: readonly number[] = [];
  /** Per adapter: the factor of each row of the step being run (scatterAddRows' scales), and of each LM head row. */
  private loraRowFactors: Float32Array[] = [];
  private loraHeadFactors: Float32Array[] = [];
  private loraOuterWidth = 0;

  /**
   * `placement`: one backend for everything, or a backend per layer (and per layer's experts, and
   * for the embedding and LM head: see BackendPlacement).
   */
  constructor(
    placement: Backend | BackendPlacement,
    file: GGUFFile,
    dimensions: ModelDimensions,
    feedForward: FeedForwardFactory,
    options: TransformerOptions = {},
  ) {
    const d = dimensions;
    this.dimensions = d;
    const split = isBackendPlacement(placement) ? placement : undefined;
    if (split && split.layers.length !== d.layers) throw new RangeError(`the placement names ${split.layers.length} layers, the model has ${d.layers}`);
    if (split?.experts && split.experts.length !== d.layers) throw new RangeError(`the placement names experts of ${split.experts.length} layers, the model has ${d.layers}`);
    const single = split ? undefined : (placement as Backend);
    this.layerBackends = split ? [...split.layers] : Array.from({ length: d.layers }, () => single!);
    this.expertBackends = split?.experts ? [...split.experts] : this.layerBackends;
    this.backend = split ? (split.embedding ?? split.layers[0]!) : single!;
    this.outputBackend = split ? (split.output ?? split.layers[d.layers - 1] ?? this.backend) : single!;
    this.backends = [...new Set([this.backend, ...this.layerBackends, ...this.expertBackends, this.outputBackend])];

    if (d.ropeScaling) {
      const lacking = this.layerBackends.find((backend) => !backend.ropeNeoxScaled);
      if (lacking) throw new UnsupportedOpError("ropeNeoxScaled", lacking.name, `the model's RoPE scaling (${d.ropeScaling.extFactor ? "YaRN" : "linear"}, factor ${Math.round(1 / d.ropeScaling.freqScale)}) needs`);
    }
    const weights = new ModelWeights(file, this.backend, options.onProgress);
    // Check everything before loading anything, so a bad file fails before any large allocation.
    weights.check("token_embd.weight", [d.embedding, d.vocabulary], this.backend);
    weights.check("output_norm.weight", [d.embedding], this.outputBackend);
    const tied = !weights.has("output.weight");
    weights.check(tied ? "token_embd.weight" : "output.weight", [d.embedding, d.vocabulary], this.outputBackend);
    for (let layer = 0; layer < d.layers; layer++) {
      checkAttention(weights, d, layer, this.layerBackends[layer]!);
      feedForward.check(weights, layer, this.layerBackends[layer]!, this.expertBackends[layer]!);
    }

    const maxRows = options.maxBatchTokens ?? 512;
    this.maxRows = maxRows;
    this.tokenEmbedding = weights.load("token_embd.weight", this.backend);
    this.outputNorm = weights.load("output_norm.weight", this.outputBackend);
    // a tied LM head is the token embedding, uploaded again when the head runs on another backend
    this.output = !tied ? weights.load("output.weight", this.outputBackend) : this.outputBackend === this.backend ? this.tokenEmbedding : weights.load("token_embd.weight", this.outputBackend);
    const scratchOf = new Map<Backend, Scratch>();
    const scratch = (backend: Backend) => {
      let found = scratchOf.get(backend);
      if (!found) scratchOf.set(backend, (found = createScratch(backend, d, maxRows)));
      return found;
    };
    this.embeddingScratch = scratch(this.backend);
    for (let layer = 0; layer < d.layers; layer++) {
      const backend = this.layerBackends[layer]!;
      this.layers.push({
        attention: loadAttention(weights, layer, backend),
        feedForward: feedForward.create(backend, weights, layer, maxRows, this.expertBackends[layer]!),
      });
    }
    this.layerScratch = this.layerBackends.map(scratch);
    this.outputScratch = scratch(this.outputBackend);
    this.logits = this.outputBackend.allocate(Math.min(maxRows, LOGIT_ROWS) * d.vocabulary);
    this.staging = new Float32Array(scratchOf.size > 1 ? maxRows * d.embedding : 0);
    this.weightBytes = weights.loadedBytes;
    this.weightBytesByBackend = weights.loadedBytesByBackend;
    this.recordableRows = Math.min(...this.layers.map((layer) => layer.feedForward.recordableRows ?? 0));
    this.lora = options.lora && options.lora.length > 0
      ? loadLoraAdapters(options.lora, file, String(file.get("general.architecture")), (weight) => {
          const layer = /^blk\.(\d+)\./.exec(weight);
          return layer ? this.layerBackends[Number(layer[1])]! : this.outputBackend;
        })
      : undefined;
    if (this.lora) {
      this.loraDefaultScales = this.lora.adapters.map((adapter) => adapter.scale);
      this.loraRowFactors = this.lora.adapters.map(() => new Float32Array(maxRows));
      this.loraHeadFactors = this.lora.adapters.map(() => new Float32Array(Math.min(LOGIT_ROWS, maxRows)));
      for (const [weight, terms] of this.lora.terms) {
        const layer = /^blk\.(\d+)\.(attn|ffn)_/.exec(weight);
        if (layer) {
          const index = Number(layer[1]);
          const current = this.loraLayers[index] ?? { attention: false, feedForward: false };
          this.loraLayers[index] = layer[2] === "attn" ? { ...current, attention: true } : { ...current, feedForward: true };
        }
        for (const term of terms) this.loraOuterWidth = Math.max(this.loraOuterWidth, term.outputs * (weight === "output.weight" ? Math.min(LOGIT_ROWS, maxRows) : maxRows));
      }
    }
    const recordable = !this.lora && this.backends.length === 1 && typeof this.backend.captureGraph === "function" && this.recordableRows > 0;
    this.decodeSteps = options.decodeGraphs !== false && recordable ? new Map() : undefined;
  }

  /** The LoRA adapters, each with the scale sequences run with unless they give their own (BatchEntry.loraScales). */
  get loraAdapters(): readonly { readonly path: string; readonly scale: number }[] {
    return (this.lora?.adapters ?? []).map((adapter, i) => ({ path: adapter.path, scale: this.loraDefaultScales[i]! }));
  }

  /** Sets the adapters' scales for sequences that give none (llama.cpp server's POST /lora-adapters): one per adapter, in load order. */
  setLoraScales(scales: readonly number[]): void {
    this.checkLoraScales(scales);
    this.loraDefaultScales = [...scales];
  }

  /** Throws unless `scales` holds one finite number per LoRA adapter. */
  checkLoraScales(scales: ArrayLike<number>): void {
    const count = this.lora?.adapters.length ?? 0;
    if (scales.length !== count) throw new RangeError(`${scales.length} LoRA scales for ${count} adapter${count === 1 ? "" : "s"}`);
    for (let i = 0; i < scales.length; i++) {
      if (!Number.isFinite(scales[i])) throw new RangeError(`LoRA scale ${i} must be a finite number, got ${scales[i]}`);
    }
  }

  /** The factor of each row of the batch and adapter, from its entry's scales or the default ones. */
  private prepareLoraFactors(entries: readonly BatchEntry[]): void {
    const adapters = this.lora!.adapters;
    let row = 0;
    entries.forEach((entry, i) => {
      const scales = entry.loraScales ?? this.loraDefaultScales;
      if (entry.loraScales) {
        try {
          this.checkLoraScales(entry.loraScales);
        } catch (error) {
          throw new RangeError(`batch entry ${i}: ${(error as Error).message}`);
        }
      }
      adapters.forEach((adapter, a) => this.loraRowFactors[a]!.fill(loraFactor(adapter, scales[a]!), row, row + entry.tokens.length));
      row += entry.tokens.length;
    });
  }

  /**
   * Adds the LoRA terms of a weight (run on `backend`) to its product: out += f · B (A x) for each
   * adapter, f the row's factor (`factors`: per adapter, one per row; the step's rows by default).
   */
  private loraApply(backend: Backend, factors: readonly Float32Array[] = this.loraRowFactors): LoraApply {
    return (weight, out, x, rows) => {
      const terms = this.lora?.terms.get(weight);
      if (!terms) return;
      let scratch = this.loraScratch.get(backend);
      if (!scratch) {
        scratch = { inner: backend.allocate(this.maxRows * this.lora!.maxRank), outer: backend.allocate(this.loraOuterWidth) };
        this.loraScratch.set(backend, scratch);
      }
      if (this.loraRows.length < rows) this.loraRows = Int32Array.from({ length: this.maxRows }, (_, i) => i);
      for (const term of terms) {
        const scales = factors[term.adapter]!;
        backend.matmul(scratch.inner, x, term.a, rows);
        backend.matmul(scratch.outer, scratch.inner, term.b, rows);
        // as llama.cpp's graph: the term scaled, then added
        backend.scatterAddRows(out, scratch.outer, this.loraRows.subarray(0, rows), scales.subarray(0, rows), term.outputs);
      }
    };
  }

  /** One row's logits, for a greedy or top-candidates pick on the host (a backend without argmaxRows or topKRows). */
  private get hostRow(): Float32Array {
    return (this.hostRowStorage ??= new Float32Array(this.dimensions.vocabulary));
  }

  /** Whether decode steps are recorded and replayed as backend graphs (see TransformerOptions.decodeGraphs). */
  get recordsDecodeGraphs(): boolean {
    return this.decodeSteps !== undefined;
  }

  /** Frees the recorded decode graphs (they are recorded again when needed). */
  releaseDecodeGraphs(): void {
    if (!this.decodeSteps) return;
    for (const step of this.decodeSteps.values()) step.graph?.dispose();
    this.decodeSteps.clear();
  }

  /**
   * Context shift of a sequence's cache (see PagedKVCache.shift): forgets tokens [keep, keep +
   * discard) and moves the later rows down, their keys rotated by -discard positions as llama.cpp's
   * K shift does (ggml_rope_ext of the stored keys by each cell's position delta, through f32 and
   * back where they are stored as f16 or q8_0). With YaRN, that rope also scales every key by the
   * scaling's magnitude once more, the kept ones too (a rotation by 0), as llama.cpp's does for
   * Qwen3: its shift passes the context's attn_factor to ggml's YaRN rope, which multiplies it by
   * the magnitude. On a backend with rotateKV the rows move and rotate there; elsewhere they go
   * through the host.
   */
  shiftCache(cache: PagedKVCache, keep: number, discard: number): void {
    const d = this.dimensions;
    const type = cache.pool.type;
    const rotate = (_layer: number, rows: Uint8Array, delta: number): Uint8Array => {
      const stored = convertKVRows(rows, type, "f32", d.kvWidth);
      const keys = new Float32Array(stored.buffer, stored.byteOffset, stored.byteLength / 4);
      rotateNeox(keys, new Int32Array(keys.length / d.kvWidth).fill(delta), d.kvHeads, d.headDim, d.ropeFreqBase, d.ropeScaling);
      return convertKVRows(stored, "f32", type, d.kvWidth);
    };
    const rotateInPlace = (layer: number) => {
      const backend = cache.pool.layerBackends[layer]!;
      const keys = cache.pool.keys[layer]!;
      return backend.rotateKV && ((slots: Int32Array, delta: number) => backend.rotateKV!(keys, slots, delta, d.kvHeads, d.headDim, d.ropeFreqBase, d.ropeScaling));
    };
    cache.shift(keep, discard, rotate, { rewriteKept: (d.ropeScaling?.magnitude ?? 1) !== 1, rotateInPlace });
  }

  /** Most tokens one forward step (one batch) can hold. */
  get maxBatchTokens(): number {
    return this.maxRows;
  }

  /**
   * Runs `tokens` at positions cache.length, cache.length + 1, ... (prefill when there are many,
   * decode when there is one), in steps of at most maxBatchTokens, appends their keys and values
   * to `cache`, and returns logits for the requested rows: [requested rows, vocabulary].
   */
  forward(tokens: Int32Array, cache: KVCache, options: ForwardOptions = {}): Float32Array {
    const requested = options.logits ?? "last";
    const wanted = requestedRows(requested, tokens.length);
    const vocabulary = this.dimensions.vocabulary;
    const result = new Float32Array(wanted.length * vocabulary);
    const step = this.maxRows;
    for (let start = 0; start < tokens.length; start += step) {
      const end = Math.min(tokens.length, start + step);
      const inChunk = wanted.map((row, index) => ({ row: row - start, index })).filter(({ row }) => row >= 0 && row < end - start);
      // straight into `result` where the chunk's rows sit there back to back (no array of its own to fault in and copy)
      const first = inChunk[0]?.index ?? 0;
      const direct = inChunk.length > 0 && inChunk.every(({ index }, i) => index === first + i);
      const output = direct ? result.subarray(first * vocabulary, (first + inChunk.length) * vocabulary) : undefined;
      const [logits] = this.forwardBatch([{ tokens: tokens.subarray(start, end), cache, logits: inChunk.map(({ row }) => row), ...(output && { output }) }]);
      if (!direct) for (let i = 0; i < inChunk.length; i++) result.set(logits!.subarray(i * vocabulary, (i + 1) * vocabulary), inChunk[i]!.index * vocabulary);
    }
    return result;
  }

  /**
   * forward(tokens, cache) scoring given next tokens instead of returning logits: for each i,
   * log p(targets[i] | tokens up to rows[i]), from the logits of row rows[i] (indices into tokens),
   * on the backend where it can (BatchEntry.logprobs): one float per scored row comes back.
   */
  forwardLogprobs(tokens: Int32Array, cache: KVCache, rows: readonly number[], targets: Int32Array): Float64Array {
    if (targets.length !== rows.length) throw new RangeError(`${targets.length} targets for ${rows.length} rows`);
    const result = new Float64Array(rows.length);
    const step = this.maxRows;
    for (let start = 0; start < tokens.length; start += step) {
      const end = Math.min(tokens.length, start + step);
      const inChunk = rows.map((row, index) => ({ row: row - start, index })).filter(({ row }) => row >= 0 && row < end - start);
      const out = new Float64Array(inChunk.length);
      const chunkTargets = Int32Array.from(inChunk, ({ index }) => targets[index]!);
      this.forwardBatch([{ tokens: tokens.subarray(start, end), cache, logits: inChunk.map(({ row }) => row), logprobs: { targets: chunkTargets, out } }]);
      inChunk.forEach(({ index }, i) => (result[index] = out[i]!));
    }
    return result;
  }

  /**
   * forward(tokens, cache) with, instead of logits, every row's k best candidates (ids and logits in
   * descending order, equal logits by ascending id) and its log Σ exp, for log-probabilities:
   * on the backend where it can (BatchEntry.tops), so that 2k + 1 numbers per row come back.
   * k from 1 to min(vocabulary, TOP_K_ROWS_MAX).
   */
  forwardTops(tokens: Int32Array, cache: KVCache, k: number): TopCandidates[] {
    const tops = Array.from(tokens, () => ({ ids: new Int32Array(k), logits: new Float32Array(k), logSumExp: new Float64Array(1) }));
    const step = this.maxRows;
    for (let start = 0; start < tokens.length; start += step) {
      const end = Math.min(tokens.length, start + step);
      this.forwardBatch([{ tokens: tokens.subarray(start, end), cache, logits: "all", tops: tops.slice(start, end) }]);
    }
    return tops;
  }

  /**
   * forward(tokens, cache), returning instead of logits the greedy token after the last of them
   * (the sampler's argmax of its logits), picked on the backend where it can: a greedy decode
   * step then reads one int back instead of the vocabulary's logits.
   */
  forwardGreedy(tokens: Int32Array, cache: KVCache): number {
    if (tokens.length === 0) throw new RangeError("forwardGreedy needs at least one token");
    const token = new Int32Array(1);
    const step = this.maxRows;
    for (let start = 0; start < tokens.length; start += step) {
      const end = Math.min(tokens.length, start + step);
      const chunk = tokens.subarray(start, end);
      this.forwardBatch([end === tokens.length ? { tokens: chunk, cache, greedy: token } : { tokens: chunk, cache, logits: [] }]);
    }
    return token[0]!;
  }

  /**
   * forward(tokens, cache) returning, instead of logits, the hidden states after the final RMSNorm
   * of the requested rows ([rows, embedding]): what an embedding model pools (Model.embed).
   */
  forwardHidden(tokens: Int32Array, cache: KVCache, rows: "last" | "all" = "last"): Float32Array {
    const wanted = requestedRows(rows, tokens.length);
    const width = this.dimensions.embedding;
    const result = new Float32Array(wanted.length * width);
    const step = this.maxRows;
    for (let start = 0; start < tokens.length; start += step) {
      const end = Math.min(tokens.length, start + step);
      const inChunk = wanted.map((row, index) => ({ row: row - start, index })).filter(({ row }) => row >= 0 && row < end - start);
      const hidden = new Float32Array(inChunk.length * width);
      this.forwardBatch([inChunk.length === 0 ? { tokens: tokens.subarray(start, end), cache, logits: [] } : { tokens: tokens.subarray(start, end), cache, logits: inChunk.map(({ row }) => row), hidden }]);
      inChunk.forEach(({ index }, i) => result.set(hidden.subarray(i * width, (i + 1) * width), index * width));
    }
    return result;
  }

  /** A batch entry's top candidates: k ids and logits, k from 1 to min(vocabulary, TOP_K_ROWS_MAX). */
  private checkTopCandidates(top: TopCandidates): void {
    const k = top.ids.length;
    const most = Math.min(this.dimensions.vocabulary, TOP_K_ROWS_MAX);
    if (top.logits.length !== k || k < 1 || k > most) {
      throw new RangeError(`a top-candidates batch entry holds ${k} ids and ${top.logits.length} logits; both must hold k from 1 to ${most}`);
    }
    if (top.logSumExp !== undefined && top.logSumExp.length < 1) throw new RangeError("a top-candidates batch entry's logSumExp array is empty");
  }

  /** A split model's KV blocks must live on their layers' backends (Model.createCache and the engine see to it). */
  private checkStorageBackends(storage: KVCache["storage"]): void {
    const backends = (storage as { readonly layerBackends?: readonly Backend[] }).layerBackends;
    if (backends && backends.some((backend, layer) => backend !== this.layerBackends[layer])) {
      throw new Error("the KV pool's layers are not on the model's layer backends: create caches with model.createCache / createKVPool");
    }
  }

  /**
   * One forward step over several sequences at once (the seed's ForwardBatch): every entry's
   * tokens run at its own cache's positions; the weights see one matrix of all rows, attention
   * runs per sequence through its block table. All caches must share one pool, and the entries
   * hold at most maxBatchTokens tokens together. Returns each entry's requested logits rows.
   */
  forwardBatch(entries: readonly BatchEntry[]): Float32Array[] {
    const d = this.dimensions;
    if (entries.length === 0) return [];
    const rows = entries.reduce((sum, entry) => sum + entry.tokens.length, 0);
    if (rows > this.maxRows) throw new RangeError(`a batch of ${rows} tokens exceeds maxBatchTokens (${this.maxRows})`);
    const storage = entries[0]!.cache.storage;
    const wanted = entries.map((entry) => requestedRows(entry.logits ?? "last", entry.tokens.length));
    entries.forEach((entry, i) => {
      if (entry.tops !== undefined && entry.tops.length !== wanted[i]!.length) {
        throw new RangeError(`batch entry ${i}: ${entry.tops.length} tops for ${wanted[i]!.length} requested rows`);
      }
      const scoring = entry.logprobs;
      if (!scoring) return;
      const rows = wanted[i]!.length;
      if (scoring.targets.length !== rows || scoring.out.length !== rows) {
        throw new RangeError(`scoring batch entry ${i}: ${scoring.targets.length} targets and ${scoring.out.length} outputs for ${rows} requested rows`);
      }
      for (const target of scoring.targets) {
        if (target < 0 || target >= d.vocabulary) throw new RangeError(`scoring batch entry ${i}: target ${target} is outside the vocabulary (0..${d.vocabulary - 1})`);
      }
    });
    entries.forEach((entry, i) => {
      if (entry.hidden === undefined) return;
      if (entry.output !== undefined || entry.greedy !== undefined || entry.top !== undefined || entry.tops !== undefined || entry.logprobs !== undefined) {
        throw new Error("a batch entry with `hidden` takes neither `output`, `greedy`, `top`, `tops` nor `logprobs`");
      }
      if (entry.hidden.length !== wanted[i]!.length * d.embedding) throw new RangeError(`batch entry ${i}: hidden holds ${entry.hidden.length} floats, its rows need ${wanted[i]!.length * d.embedding}`);
    });
    for (const entry of entries) {
      if (entry.greedy !== undefined) {
        if (entry.logits !== undefined || entry.output !== undefined) throw new Error("a greedy batch entry takes neither `logits` nor `output`");
        if (entry.greedy.length < 1) throw new RangeError("a greedy batch entry's token array is empty");
      }
      if (entry.logprobs !== undefined) {
        if (entry.output !== undefined || entry.greedy !== undefined || entry.top !== undefined) throw new Error("a scoring batch entry takes neither `output`, `greedy` nor `top`");
      }
      if (entry.top !== undefined) {
        if (entry.logits !== undefined || entry.output !== undefined || entry.greedy !== undefined) throw new Error("a top-candidates batch entry takes neither `logits`, `output` nor `greedy`");
        this.checkTopCandidates(entry.top);
      }
      if (entry.tops !== undefined) {
        if (entry.output !== undefined || entry.greedy !== undefined || entry.top !== undefined || entry.logprobs !== undefined) {
          throw new Error("a batch entry with `tops` takes neither `output`, `greedy`, `top` nor `logprobs`");
        }
        for (const top of entry.tops) this.checkTopCandidates(top);
      }
      if (entry.cache.storage !== storage) throw new Error("the caches of one batch must share one KV pool");
      if (entry.tokens.length === 0) throw new RangeError("a batch entry has no tokens");
    }
    if (new Set(entries.map((entry) => entry.cache)).size !== entries.length) throw new Error("a cache appears twice in one batch");
    if (this.staging.length > 0) this.checkStorageBackends(storage);

    // Reserve every sequence's slots first, so a full cache fails before any compute.
    const tokens = new Int32Array(rows);
    const positions = new Int32Array(rows);
    const slots = new Int32Array(rows);
    const sequences = new Int32Array(entries.length * 4);
    const tables: number[] = [];
    let row = 0;
    for (let i = 0; i < entries.length; i++) {
      const { tokens: entryTokens, cache } = entries[i]!;
      const entrySlots = cache.prepare(entryTokens.length);
      tokens.set(entryTokens, row);
      slots.set(entrySlots, row);
      for (let r = 0; r < entryTokens.length; r++) positions[row + r] = cache.length + r;
      sequences.set([row, entryTokens.length, cache.length, tables.length], i * 4);
      for (const block of cache.blockTable) tables.push(block);
      row += entryTokens.length;
    }
    const blockTables = Int32Array.from(tables);
    // (Not for embeddings: their caches come and go, and a graph recorded per cache would push out the engine's.)
    const decode = this.decodeSteps !== undefined && rows === entries.length && rows <= this.recordableRows && entries.every((entry) => !entry.hidden);
    // A decode step that wants every row's logits records the LM head too (one chunk, rows in place).
    const headInGraph = decode && rows <= Math.min(LOGIT_ROWS, this.maxRows) && wanted.every((rowsOfEntry) => rowsOfEntry.length === 1);
    if (this.lora) this.prepareLoraFactors(entries);
    if (decode) {
      this.replayDecodeStep(storage, entries, tokens, positions, slots, blockTables, sequences, headInGraph);
    } else {
      this.runLayers(rows, tokens, positions, { cache: entries[0]!.cache, slots, blockTables, sequences });
    }
    const backend = this.outputBackend;
    const s = this.outputScratch;
    for (const entry of entries) entry.cache.advance(entry.tokens);

    // Hidden states asked for instead of logits are read where the final norm left them.
    for (let i = 0; i < entries.length; i++) {
      const hidden = entries[i]!.hidden;
      if (!hidden) continue;
      wanted[i]!.forEach((r, j) => {
        const offset = (sequences[i * 4]! + r) * d.embedding;
        if (backend.readInto) backend.readInto(s.normed, offset, d.embedding, hidden, j * d.embedding);
        else hidden.set(backend.read(s.normed, offset, d.embedding), j * d.embedding);
      });
    }
    // Only the requested rows go through the LM head, packed to the front of `projected`.
    const picked: number[] = [];
    for (let i = 0; i < entries.length; i++) if (!entries[i]!.hidden) for (const r of wanted[i]!) picked.push(sequences[i * 4]! + r);
    const results = wanted.map((rowsOfEntry, i) => {
      if (entries[i]!.greedy !== undefined || entries[i]!.top !== undefined || entries[i]!.tops !== undefined || entries[i]!.logprobs !== undefined || entries[i]!.hidden !== undefined) return EMPTY_LOGITS;
      const length = rowsOfEntry.length * d.vocabulary;
      const output = entries[i]!.output;
      if (output === undefined) return new Float32Array(length);
      if (output.length !== length) throw new RangeError(`batch entry ${i}: output holds ${output.length} floats, its logits need ${length}`);
      return output;
    });
    if (picked.length === 0) return results;
    // logits of picked row p go to results[entry of p] at the entry's own row index, or its greedy
    // token to greedy[0] of its entry
    const destination: [Float32Array, number][] = [];
    const greedyOf: (Int32Array | undefined)[] = [];
    const topOf: (TopCandidates | undefined)[] = [];
    const scoreOf: ({ target: number; out: Float64Array; index: number } | undefined)[] = [];
    for (let i = 0; i < entries.length; i++) {
      if (entries[i]!.hidden) continue;
      for (let j = 0; j < wanted[i]!.length; j++) {
        destination.push([results[i]!, j]);
        greedyOf.push(entries[i]!.greedy);
        topOf.push(entries[i]!.top ?? entries[i]!.tops?.[j]);
        const scoring = entries[i]!.logprobs;
        scoreOf.push(scoring ? { target: scoring.targets[j]!, out: scoring.out, index: j } : undefined);
      }
    }
    const chunkRows = Math.min(LOGIT_ROWS, this.maxRows);
    for (let first = 0; first < picked.length; first += chunkRows) {
      const count = Math.min(chunkRows, picked.length - first);
      // The chunk's normed rows, gathered to the front of `projected` (runs of consecutive rows in
      // one copy), or read where they are when they already are rows 0..count-1 (decode).
      let inPlace = first === 0;
      for (let k = 0; inPlace && k < count; k++) inPlace = picked[k] === k;
      let source = s.normed;
      if (!inPlace) {
        source = s.projected;
        for (let k = 0; k < count; ) {
          let run = 1;
          while (k + run < count && picked[first + k + run] === picked[first + k]! + run) run++;
          backend.copy(s.projected, k * d.embedding, s.normed, picked[first + k]! * d.embedding, run * d.embedding);
          k += run;
        }
      }
      if (!(headInGraph && inPlace && count === rows)) backend.matmul(this.logits, source, this.output, count);
      if (this.lora) {
        // each head row's factor is its hidden row's
        this.loraRowFactors.forEach((factors, a) => {
          for (let k = 0; k < count; k++) this.loraHeadFactors[a]![k] = factors[picked[first + k]!]!;
        });
        this.loraApply(backend, this.loraHeadFactors)("output.weight", this.logits, source, count);
      }
      let greedyRows = 0;
      let topK = 0; // the largest k of the chunk's top-candidates rows
      for (let k = 0; k < count; k++) {
        if (greedyOf[first + k]) greedyRows++;
        topK = Math.max(topK, topOf[first + k]?.ids.length ?? 0);
      }
      const greedyOnBackend = greedyRows > 0 && backend.argmaxRows !== undefined;
      const topOnBackend = topK > 0 && backend.topKRows !== undefined;
      if (greedyOnBackend) {
        // every row of the chunk: cheaper than a call per greedy row, and only ints come back
        const tokens = this.greedyTokens.subarray(0, count);
        backend.argmaxRows!(tokens, this.logits, count, d.vocabulary);
        for (let k = 0; k < count; k++) {
          const greedy = greedyOf[first + k];
          if (greedy) greedy[0] = tokens[k]!;
        }
      }
      if (topOnBackend) {
        // every row of the chunk at the largest k; a row's best k' are the first k' of its best k
        if (this.topIds.length < count * topK) {
          this.topIds = new Int32Array(chunkRows * topK);
          this.topLogits = new Float32Array(chunkRows * topK);
        }
        backend.topKRows!(this.topIds, this.topLogits, this.logits, count, d.vocabulary, topK);
        for (let k = 0; k < count; k++) {
          const top = topOf[first + k];
          if (!top) continue;
          top.ids.set(this.topIds.subarray(k * topK, k * topK + top.ids.length));
          top.logits.set(this.topLogits.subarray(k * topK, k * topK + top.ids.length));
        }
      }
      // Scored rows, and top rows that want their row's log Σ exp (taken at their best candidate c:
      // logSoftmaxAt gives x_c - log Σ exp(x), so log Σ exp(x) = x_c - that), in one call.
      let scoredRows = 0;
      for (let k = 0; k < count; k++) if (scoreOf[first + k] || (topOnBackend && topOf[first + k]?.logSumExp)) scoredRows++;
      const scoresOnBackend = scoredRows > 0 && backend.logSoftmaxAt !== undefined;
      if (scoresOnBackend) {
        // every row of the chunk (the others take target 0): one call, one float per row back
        const targets = new Int32Array(count);
        for (let k = 0; k < count; k++) targets[k] = scoreOf[first + k]?.target ?? (topOnBackend && topOf[first + k]?.logSumExp ? this.topIds[k * topK]! : 0);
        const scores = new Float32Array(count);
        backend.logSoftmaxAt!(scores, this.logits, count, d.vocabulary, targets);
        for (let k = 0; k < count; k++) {
          const score = scoreOf[first + k];
          if (score) score.out[score.index] = scores[k]!;
          const top = topOf[first + k];
          if (topOnBackend && top?.logSumExp) top.logSumExp[0] = this.topLogits[k * topK]! - scores[k]!;
        }
      }
      const onBackend = (k: number) =>
        (greedyOf[first + k] !== undefined && greedyOnBackend) ||
        (topOf[first + k] !== undefined && topOnBackend && (topOf[first + k]!.logSumExp === undefined || scoresOnBackend)) ||
        (scoreOf[first + k] !== undefined && scoresOnBackend);
      let hostRows = 0;
      for (let k = 0; k < count; k++) if (!onBackend(k)) hostRows++;
      if (hostRows === 0) continue;
      // straight into the results when the backend can (decode makes one of these per token)
      const chunk = backend.readInto ? undefined : backend.read(this.logits, 0, count * d.vocabulary);
      for (let k = 0; k < count; k++) {
        if (onBackend(k)) continue;
        const greedy = greedyOf[first + k];
        const top = topOf[first + k];
        const score = scoreOf[first + k];
        const [target, row] = greedy || top || score ? [this.hostRow, 0] : destination[first + k]!;
        if (chunk) target.set(chunk.subarray(k * d.vocabulary, (k + 1) * d.vocabulary), row * d.vocabulary);
        else backend.readInto!(this.logits, k * d.vocabulary, d.vocabulary, target, row * d.vocabulary);
        if (greedy) greedy[0] = argmax(this.hostRow, d.vocabulary);
        if (top) this.hostTopK.rows(top.ids, top.logits, this.hostRow, 0, 1, d.vocabulary, top.ids.length);
        if (top?.logSumExp) top.logSumExp[0] = logSumExp(this.hostRow);
        if (score) score.out[score.index] = this.hostRow[score.target]! - logSumExp(this.hostRow);
      }
    }
    return results;
  }

  /**
   * embedding → every layer (moving the residual stream where consecutive layers sit on different
   * backends) → the final RMSNorm into the output backend's scratch `normed`.
   */
  private runLayers(rows: number, tokens: Int32Array, positions: Int32Array, layout: BatchLayout): void {
    const d = this.dimensions;
    let backend = this.backend;
    let s = this.embeddingScratch;
    backend.embedding(s.hidden, this.tokenEmbedding, tokens);
    // `pending`: s.projected holds the last block's output, not yet added to the residual stream
    // (it is added together with the next RMSNorm, or before the stream moves to another backend).
    let pending = false;
    const moveTo = (target: Backend, targetScratch: Scratch) => {
      if (pending) backend.add(s.hidden, s.hidden, s.projected, rows * d.embedding);
      pending = false;
      transferBetweenBackends(backend, s.hidden, target, targetScratch.hidden, rows * d.embedding, this.staging);
      backend = target;
      s = targetScratch;
    };
    // The norm after a block's projection, offered to the op making the projection (a
    // ResidualNorm: CUDA does it in the projection's last block) where the norm runs on the same
    // backend next; when the op took it, the residual is added and the next norm finds normed made.
    const residualNorm = (weight: WeightHandle): ResidualNorm => ({ hidden: s.hidden, normed: s.normed, weight, eps: d.eps });
    for (let layer = 0; layer < this.layers.length; layer++) {
      const layerBackend = this.layerBackends[layer]!;
      if (layerBackend !== backend) moveTo(layerBackend, this.layerScratch[layer]!);
      const { attention, feedForward } = this.layers[layer]!;
      const adapted = this.loraLayers[layer];
      const lora = adapted ? this.loraApply(backend) : undefined;
      const normed = attentionBlock(backend, d, attention, s, rows, positions, layout, layer, pending, adapted?.attention ? undefined : residualNorm(feedForward.ffn_norm), adapted?.attention ? lora : undefined);
      const projections = feedForward.projections;
      const swiglu = feedForward.swiglu;
      const next = layer + 1 < this.layers.length ? this.layerBackends[layer + 1] : this.outputBackend;
      const nextNorm = next === backend ? residualNorm(layer + 1 < this.layers.length ? this.layers[layer + 1]!.attention.attn_norm : this.outputNorm) : undefined;
      if (adapted?.feedForward && projections && swiglu) {
        // Adapted FFN projections, op by op, each product with its adapters' terms.
        normAndMatmuls(backend, d, s, !normed, feedForward.ffn_norm, projections.outs, projections.weights, rows);
        lora!(`blk.${layer}.ffn_gate.weight`, swiglu.gate, s.normed, rows);
        lora!(`blk.${layer}.ffn_up.weight`, swiglu.up, s.normed, rows);
        backend.swiglu(swiglu.gate, swiglu.gate, swiglu.up, rows * swiglu.width);
        backend.matmul(s.projected, swiglu.gate, swiglu.downWeight, rows);
        lora!(`blk.${layer}.ffn_down.weight`, s.projected, swiglu.gate, rows);
        pending = true;
        continue;
      }
      // The norm and the whole dense FFN in one op where the backend takes it (CUDA: a decode step).
      const together =
        swiglu === undefined
          ? undefined
          : backend.rmsNormSwigluMatmul?.(
              s.normed,
              s.hidden,
              normed ? undefined : s.projected,
              feedForward.ffn_norm,
              d.eps,
              swiglu.gate,
              swiglu.up,
              swiglu.gateWeight,
              swiglu.upWeight,
              s.projected,
              swiglu.downWeight,
              rows,
              nextNorm,
            );
      if (together) {
        pending = together !== "normed";
        continue;
      }
      if (projections) normAndMatmuls(backend, d, s, !normed, feedForward.ffn_norm, projections.outs, projections.weights, rows);
      else addAndNorm(backend, d, s, !normed, feedForward.ffn_norm, rows);
      feedForward.forward(backend, s, rows);
      pending = true;
    }
    if (this.outputBackend !== backend) moveTo(this.outputBackend, this.outputScratch);
    addAndNorm(backend, d, s, pending, this.outputNorm, rows);
  }

  /**
   * A decode step (one token per sequence) through its recorded graph: the step's arrays are
   * copied into the graph's own (block tables padded to a power-of-two width per sequence) and the
   * graph replayed, recording it first when this batch size, width and pool have none yet. With
   * `head`, the graph ends with the LM head's matmul of every row into `logits` (then the backend
   * can hand it the final norm's rounding, and it is no launch of its own).
   */
  private replayDecodeStep(
    storage: object,
    entries: readonly BatchEntry[],
    tokens: Int32Array,
    positions: Int32Array,
    slots: Int32Array,
    blockTables: Int32Array,
    sequences: Int32Array,
    head: boolean,
  ): void {
    const steps = this.decodeSteps!;
    const rows = entries.length;
    let widest = 1;
    for (const entry of entries) widest = Math.max(widest, entry.cache.blockTable.length);
    const stride = 2 ** Math.ceil(Math.log2(widest));
    const key = `${storageId(storage)}:${rows}:${stride}:${head ? "head" : "layers"}`;
    let step = steps.get(key);
    if (step) {
      steps.delete(key); // most recently used last
    } else {
      step = {
        tokens: new Int32Array(rows),
        positions: new Int32Array(rows),
        slots: new Int32Array(rows),
        blockTables: new Int32Array(rows * stride),
        sequences: new Int32Array(rows * 4),
        graph: undefined,
      };
    }
    steps.set(key, step);
    if (steps.size > DECODE_GRAPH_LIMIT) {
      const [oldest, evicted] = steps.entries().next().value!;
      steps.delete(oldest);
      evicted.graph?.dispose();
    }
    step.tokens.set(tokens);
    step.positions.set(positions);
    step.slots.set(slots);
    step.sequences.set(sequences);
    step.blockTables.fill(0); // padding: a valid block id that no sequence reads
    for (let i = 0; i < rows; i++) {
      const offset = sequences[i * 4 + 3]!;
      const length = entries[i]!.cache.blockTable.length;
      step.blockTables.set(blockTables.subarray(offset, offset + length), i * stride);
      step.sequences[i * 4 + 3] = i * stride;
    }
    const layout: BatchLayout = { cache: entries[0]!.cache, slots: step.slots, blockTables: step.blockTables, sequences: step.sequences };
    const run = () => {
      this.runLayers(rows, step.tokens, step.positions, layout);
      if (head) this.outputBackend.matmul(this.logits, this.outputScratch.normed, this.output, rows);
    };
    if (step.graph === undefined) {
      step.graph = this.backend.captureGraph!(run);
      if (step.graph === undefined) {
        // the backend does not record graphs after all (turned off): decode op by op from now on
        this.decodeSteps = undefined;
        run();
        return;
      }
    }
    step.graph.replay();
  }
}

function isBackendPlacement(placement: Backend | BackendPlacement): placement is BackendPlacement {
  return Array.isArray((placement as BackendPlacement).layers);
}

function requestedRows(requested: "last" | "all" | readonly number[], count: number): number[] {
  const wanted = requested === "last" ? [count - 1] : requested === "all" ? Array.from({ length: count }, (_, i) => i) : [...requested];
  for (const row of wanted) {
    if (!Number.isInteger(row) || row < 0 || row >= count) throw new RangeError(`logits requested for row ${row} of ${count}`);
  }
  return wanted;
}
