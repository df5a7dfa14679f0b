/**
 * The placement plan (DESIGN.md "Dispatcher"): a device for every layer, and for every layer's
 * routed experts, from the devices' free memory, the user's limits, each layer's weight bytes, the
 * KV cache at the requested context and batch, and scratch. Pure: devices are descriptions (a
 * CUDA GPU reports its free memory, RAM comes from the OS, or a user declares either), so plans
 * are made and tested without the hardware.
 *
 * As llama.cpp's -ngl: the last `gpuLayers` layers go to the accelerators (split into contiguous
 * runs in proportion to their free memory, the first accelerator taking the earliest), the rest
 * to the host; `cpuMoe` keeps the experts of the first N layers on the host. The token embedding
 * runs on the first layer's device, the final norm and LM head on the last layer's.
 */
import { type KVType, kvRowBytes } from "../backend";
import type { ModelFootprint, TensorBytes } from "./model-footprint";
import { PlacementError, type PlacementShortfall, formatBytes } from "./placement-error";

export type PlacementDeviceKind = "cuda" | "cpu" | "reference";

export interface PlacementDevice {
  /** Unique: "cuda:0", "cpu", "reference". */
  readonly name: string;
  /** The reference backend holds weights as f32; the others as stored in the file. */
  readonly kind: PlacementDeviceKind;
  /** Bytes the device can give the model (free memory, or the user's limit when smaller). */
  readonly freeBytes: number;
}

/** Kept free on every accelerator (allocator slack, library workspaces). */
export const DEFAULT_ACCELERATOR_RESERVE_BYTES = 256 * 2 ** 20;

export interface PlacementOptions {
  /** Accelerators (GPUs) in order; layers are split across them in proportion to their free memory. */
  readonly devices: readonly PlacementDevice[];
  /** Where whatever is not on an accelerator goes (the CPU). */
  readonly host: PlacementDevice;
  /** Tokens of context per sequence. */
  readonly contextTokens: number;
  /** Sequences whose KV caches are held at once (the batch). Default 1. */
  readonly sequences?: number;
  /** KV element type. Default f16. */
  readonly kvType?: KVType;
  /** Tokens per KV block (the KV cache rounds up to whole blocks). Default 16. */
  readonly blockTokens?: number;
  /** Most tokens of one forward step (sizes the scratch buffers). Default 512. */
  readonly maxBatchTokens?: number;
  /** Layers on the accelerators: "auto" (default: as many as fit) or a number (all when it exceeds the layers). */
  readonly gpuLayers?: "auto" | number;
  /** Experts of the first N layers (all layers with `true`) stay on the host. */
  readonly cpuMoe?: true | number;
  /** Bytes kept free on each accelerator. Default DEFAULT_ACCELERATOR_RESERVE_BYTES. */
  readonly reserveBytes?: number;
}

export interface PlannedLayer {
  readonly layer: number;
  /** Device of the layer's attention, norms, router and dense FFN, and of its KV blocks. */
  readonly device: string;
  /** Device of the layer's routed experts (the layer's own for dense models). */
  readonly expertDevice: string;
  readonly weightBytes: number;
  readonly expertBytes: number;
  readonly kvBytes: number;
}

export interface DeviceUsage {
  readonly name: string;
  readonly kind: PlacementDeviceKind;
  readonly freeBytes: number;
  /** freeBytes less the reserve. */
  readonly availableBytes: number;
  /** Layers whose attention (and KV) this device holds. */
  readonly layers: number;
  /** Layers whose experts this device holds. */
  readonly expertLayers: number;
  readonly weightBytes: number;
  readonly kvBytes: number;
  readonly scratchBytes: number;
  readonly totalBytes: number;
}

export interface PlacementPlan {
  readonly layers: readonly PlannedLayer[];
  readonly embeddingDevice: string;
  /** Device of the final norm and LM head. */
  readonly outputDevice: string;
  /** Every device given, accelerators first, host last. */
  readonly devices: readonly DeviceUsage[];
  /** Layers on accelerators. */
  readonly gpuLayers: number;
  readonly contextTokens: number;
  readonly sequences: number;
  readonly kvType: KVType;
  /** KV tokens held per layer (context × sequences, rounded up to whole blocks). */
  readonly kvTokens: number;
  /** KV bytes of all layers. */
  readonly kvBytes: number;
  readonly maxBatchTokens: number;
}

/** Rows the LM head computes per matmul (Transformer's LOGIT_ROWS). */
const LOGIT_ROWS = 32;

function positiveInteger(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) throw new PlacementError(`${name} must be a positive integer, got ${value}`);
  return value;
}

/** Computes the plan, or throws PlacementError (naming the bytes) when nothing fits. */
export function planPlacement(footprint: ModelFootprint, options: PlacementOptions): PlacementPlan {
  const shape = footprint.shape;
  const layerCount = shape.layers;
  const sequences = positiveInteger(options.sequences ?? 1, "sequences");
  const contextTokens = positiveInteger(options.contextTokens, "contextTokens");
  const blockTokens = positiveInteger(options.blockTokens ?? 16, "blockTokens");
  const rows = positiveInteger(options.maxBatchTokens ?? 512, "maxBatchTokens");
  const kvType = options.kvType ?? "f16";
  const reserve = options.reserveBytes ?? DEFAULT_ACCELERATOR_RESERVE_BYTES;
  const accelerators = options.devices;
  const names = new Set([...accelerators.map((d) => d.name), options.host.name]);
  if (names.size !== accelerators.length + 1) throw new PlacementError(`device names must be unique, got ${[...accelerators, options.host].map((d) => d.name).join(", ")}`);

  const moe = shape.experts > 0;
  let cpuMoeLayers = 0;
  if (options.cpuMoe === true) cpuMoeLayers = layerCount;
  else if (options.cpuMoe !== undefined) {
    if (!Number.isInteger(options.cpuMoe) || options.cpuMoe < 0) throw new PlacementError(`cpuMoe must be true or a non-negative integer, got ${options.cpuMoe}`);
    cpuMoeLayers = Math.min(options.cpuMoe, layerCount);
  }

  const kvTokens = Math.ceil((contextTokens * sequences) / blockTokens) * blockTokens;
  const layerKVBytes = 2 * kvTokens * kvRowBytes(kvType, shape.kvWidth);
  const floats = (count: number) => count * 4;
  // Scratch as the Transformer allocates it: the residual stream and attention buffers on every
  // device that runs a layer; the FFN's buffers per layer; the logits on the LM head's device.
  const baseScratch = floats(rows * (3 * shape.embedding + 2 * shape.queryWidth + 2 * shape.kvWidth));
  const logitsScratch = floats(Math.min(rows, LOGIT_ROWS) * shape.vocabulary);
  const denseScratch = floats(2 * rows * shape.feedForwardLength);
  const routerScratch = floats(rows * shape.experts);
  const expertScratch = floats(rows * (2 * shape.embedding + 2 * shape.expertFeedForwardLength));
  const expertTransferScratch = floats(2 * rows * shape.embedding);

  const all = [...accelerators, options.host];
  const bytesOn = (device: { kind: PlacementDeviceKind }, bytes: TensorBytes) => (device.kind === "reference" ? bytes.f32 : bytes.stored);

  /** The assignment with the last `onAccelerators` layers on the accelerators. */
  const assign = (onAccelerators: number): PlacementPlan => {
    const layerDevice: number[] = new Array<number>(layerCount).fill(accelerators.length); // index into `all`
    if (onAccelerators > 0) {
      const weights = accelerators.map((d) => Math.max(0, d.freeBytes - reserve));
      const total = weights.reduce((a, b) => a + b, 0);
      const first = layerCount - onAccelerators;
      let cumulative = 0;
      let start = 0;
      for (let g = 0; g < accelerators.length; g++) {
        cumulative += weights[g]!;
        const end = g === accelerators.length - 1 ? onAccelerators : total > 0 ? Math.round((onAccelerators * cumulative) / total) : 0;
        for (let i = start; i < end; i++) layerDevice[first + i] = g;
        start = Math.max(start, end);
      }
    }
    const usage = all.map(() => ({ layers: 0, expertLayers: 0, weightBytes: 0, kvBytes: 0, scratchBytes: 0, runs: false }));
    const layers: PlannedLayer[] = [];
    for (let layer = 0; layer < layerCount; layer++) {
      const device = layerDevice[layer]!;
      const expertDevice = moe && layer < cpuMoeLayers ? accelerators.length : device;
      const footprintLayer = footprint.layers[layer]!;
      const u = usage[device]!;
      u.layers++;
      u.runs = true;
      const weightBytes = bytesOn(all[device]!, footprintLayer.weights);
      const expertBytes = bytesOn(all[expertDevice]!, footprintLayer.experts);
      u.weightBytes += weightBytes;
      u.kvBytes += layerKVBytes;
      if (moe) {
        u.scratchBytes += routerScratch;
        const e = usage[expertDevice]!;
        e.expertLayers++;
        e.weightBytes += expertBytes;
        e.scratchBytes += expertScratch + (expertDevice === device ? 0 : expertTransferScratch);
      } else {
        u.scratchBytes += denseScratch;
      }
      layers.push({ layer, device: all[device]!.name, expertDevice: all[expertDevice]!.name, weightBytes, expertBytes, kvBytes: layerKVBytes });
    }
    const embeddingDevice = layerDevice[0] ?? accelerators.length;
    const outputDevice = layerDevice[layerCount - 1] ?? accelerators.length;
    usage[embeddingDevice]!.weightBytes += bytesOn(all[embeddingDevice]!, footprint.tokenEmbedding);
    usage[embeddingDevice]!.runs = true;
    const head = usage[outputDevice]!;
    head.runs = true;
    head.weightBytes += bytesOn(all[outputDevice]!, footprint.outputNorm);
    // a tied LM head is the token embedding, uploaded again when it runs on another device
    if (footprint.output) head.weightBytes += bytesOn(all[outputDevice]!, footprint.output);
    else if (outputDevice !== embeddingDevice) head.weightBytes += bytesOn(all[outputDevice]!, footprint.tokenEmbedding);
    head.scratchBytes += logitsScratch;
    for (const u of usage) if (u.runs) u.scratchBytes += baseScratch;
    const devices: DeviceUsage[] = all.map((device, i) => {
      const u = usage[i]!;
      const isHost = i === accelerators.length;
      return {
        name: device.name,
        kind: device.kind,
        freeBytes: device.freeBytes,
        availableBytes: isHost ? device.freeBytes : Math.max(0, device.freeBytes - reserve),
        layers: u.layers,
        expertLayers: u.expertLayers,
        weightBytes: u.weightBytes,
        kvBytes: u.kvBytes,
        scratchBytes: u.scratchBytes,
        totalBytes: u.weightBytes + u.kvBytes + u.scratchBytes,
      };
    });
    return {
      layers,
      embeddingDevice: all[embeddingDevice]!.name,
      outputDevice: all[outputDevice]!.name,
      devices,
      gpuLayers: onAccelerators,
      contextTokens,
      sequences,
      kvType,
      kvTokens,
      kvBytes: layerKVBytes * layerCount,
      maxBatchTokens: rows,
    };
  };
  const shortfalls = (plan: PlacementPlan): PlacementShortfall[] =>
    plan.devices
      .filter((d) => d.totalBytes > d.availableBytes)
      .map((d) => ({ device: d.name, neededBytes: d.totalBytes, availableBytes: d.availableBytes, weightBytes: d.weightBytes, kvBytes: d.kvBytes, scratchBytes: d.scratchBytes }));

  const requested = options.gpuLayers ?? "auto";
  if (requested !== "auto") {
    if (!Number.isInteger(requested) || requested < 0) throw new PlacementError(`gpuLayers must be "auto" or a non-negative integer, got ${requested}`);
    if (requested > 0 && accelerators.length === 0) throw new PlacementError(`${requested} GPU layers requested, but there is no GPU`);
    const plan = assign(Math.min(requested, layerCount));
    const missing = shortfalls(plan);
    if (missing.length) throw new PlacementError(`${plan.gpuLayers} of ${layerCount} layers on ${accelerators.map((d) => d.name).join(", ") || "no GPU"} do not fit`, missing);
    return plan;
  }
  const most = accelerators.length === 0 ? 0 : layerCount;
  for (let onAccelerators = most; onAccelerators >= 0; onAccelerators--) {
    const plan = assign(onAccelerators);
    if (shortfalls(plan).length === 0) return plan;
  }
  // Nothing fits: report the plan that leans least on the accelerators (everything on the host).
  const hostOnly = assign(0);
  const available = all.reduce((sum, d, i) => sum + (i === accelerators.length ? d.freeBytes : Math.max(0, d.freeBytes - reserve)), 0);
  throw new PlacementError(
    `the model does not fit at ${contextTokens} tokens × ${sequences} sequence${sequences === 1 ? "" : "s"} ` +
      `(KV cache ${formatBytes(hostOnly.kvBytes)} ${kvType}; ${formatBytes(available)} available on all devices together)`,
    shortfalls(hostOnly),
  );
}
