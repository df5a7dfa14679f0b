/**
 * The placement options every model command shares (--gpu-layers, --cpu-moe, --gpu-mem, --cpu-mem),
 * parsed in one place, and the step from them to the backends a model loads onto: describe the
 * devices (CUDA reports free memory, RAM comes from the OS, --gpu-mem / --cpu-mem declare or cap
 * them), plan with @memra/core's planPlacement (which fails, naming the bytes, before any weight is
 * read), then create a backend per device the plan uses.
 */
import {
  type Backend,
  type BackendPlacement,
  type KVType,
  type ModelFootprint,
  type PlacementDevice,
  type PlacementPlan,
  ReferenceBackend,
  bindPlacement,
  devicesInUse,
  hostAvailableBytes,
  modelFootprint,
  planPlacement,
  type LoraAdapterOptions,
  type RopeScalingOptions,
  scaledContextLength,
} from "@memra/core";
import { applyMetadataOverrides, openGGUFModel, parseMetadataOverride, readModelConfig } from "@memra/gguf";
import { type BackendChoice, chooseBackend, chooseHostBackend, parsePlacementDeviceChoice } from "./backend-choice";
import { CliError } from "./cli-error";
import { parsePositiveInteger } from "./commands/model-arguments";

/** parseArgs option specs of the placement options. */
export const placementParseOptions = {
  "gpu-layers": { type: "string" },
  "cpu-moe": { type: "string" },
  "gpu-mem": { type: "string" },
  "cpu-mem": { type: "string" },
} as const;

/** parseArgs option specs of llama.cpp's RoPE scaling options and --override-kv (the commands that load a model). */
export const ropeScalingParseOptions = {
  "override-kv": { type: "string", multiple: true },
  "rope-scaling": { type: "string" },
  "rope-scale": { type: "string" },
  "yarn-orig-ctx": { type: "string" },
} as const;

/** parseArgs option spec of --chat-template (chat and serve; llama.cpp's --chat-template-file reaches it too). */
export const chatTemplateParseOptions = {
  "chat-template": { type: "string" },
} as const;

export const chatTemplateOptionHelp = `  --chat-template TEXT     a Jinja chat template instead of the GGUF's (--chat-template-file FILE: from a file)`;

/** parseArgs option specs of llama.cpp's LoRA options (the commands that load a model for generation). */
/** The order of --lora and --lora-scaled among parseArgs's tokens (PlacementValues.loraOrder). */
export function loraOrderOf(tokens: readonly { readonly kind: string; readonly name?: string }[] | undefined): string[] {
  return (tokens ?? []).flatMap((token) => (token.kind === "option" && (token.name === "lora" || token.name === "lora-scaled") ? [token.name] : []));
}

export const loraParseOptions = {
  lora: { type: "string", multiple: true },
  "lora-scaled": { type: "string", multiple: true },
  "lora-init-without-apply": { type: "boolean", default: false },
} as const;

export const loraOptionHelp = `  --lora FILE              apply a LoRA adapter (llama.cpp's GGUF form); repeat for several
  --lora-scaled FILE:S     a LoRA adapter at scale S (ids: --lora and --lora-scaled in command-line order)
  --lora-init-without-apply  load the adapters at scale 0 (serve: set scales by POST /lora-adapters or a request's lora)`;

export const ropeScalingOptionHelp = `  --rope-scaling TYPE      none, linear or yarn instead of the GGUF's RoPE scaling (llama.cpp's flag)
  --rope-scale N           the context's stretch factor (Qwen3 at 128K tokens: yarn with 4)
  --yarn-orig-ctx N        the context trained before scaling (Qwen3: 32768)
  --override-kv KEY=TYPE:VALUE  a metadata value instead of the file's (llama.cpp's flag; TYPE int, float,
                           bool or str; repeatable), e.g. qwen3.context_length=int:65536`;

export const placementOptionHelp = `  --gpu-layers N|auto|all  layers on the GPU(s), the last ones (default auto: as many as fit)
  --cpu-moe N|all          keep the experts of the first N layers (or all) in RAM (MoE models)
  --gpu-mem SIZE[,SIZE]    use the first GPUs, each capped at SIZE (e.g. 24GiB,24GiB); layers are
                           split across them in proportion to their memory
  --cpu-mem SIZE           RAM the model may use (default: what the OS reports available)`;

export interface PlacementArguments {
  readonly gpuLayers: "auto" | number;
  /** Whether --gpu-layers was given. */
  readonly gpuLayersGiven: boolean;
  readonly cpuMoe: true | number | undefined;
  /** --gpu-mem, bytes per GPU. */
  readonly gpuMemory: readonly number[] | undefined;
  readonly cpuMemory: number | undefined;
}

const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 2 ** 10,
  kib: 2 ** 10,
  kb: 1e3,
  m: 2 ** 20,
  mib: 2 ** 20,
  mb: 1e6,
  g: 2 ** 30,
  gib: 2 ** 30,
  gb: 1e9,
  t: 2 ** 40,
  tib: 2 ** 40,
  tb: 1e12,
};

/** "24GiB" → 25769803776, "24GB" → 24e9, "512M" → 536870912 (K/M/G/T alone are binary), naming the option when malformed. */
export function parseByteSize(text: string, name: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = match ? UNITS[match[2]!.toLowerCase()] : undefined;
  if (!match || unit === undefined) throw new CliError(`${name}: "${text}" is not a size (e.g. 24GiB, 8GB, 512MiB)`);
  return Math.floor(Number(match[1]) * unit);
}

export function parsePlacementArguments(values: { "gpu-layers"?: string | undefined; "cpu-moe"?: string | undefined; "gpu-mem"?: string | undefined; "cpu-mem"?: string | undefined }): PlacementArguments {
  const layers = values["gpu-layers"];
  let gpuLayers: "auto" | number = "auto";
  if (layers === "all") gpuLayers = Number.MAX_SAFE_INTEGER; // every layer (the plan takes at most the model's)
  else if (layers !== undefined && layers !== "auto") {
    gpuLayers = Number(layers);
    if (layers.trim() === "" || !Number.isInteger(gpuLayers) || gpuLayers < 0) throw new CliError(`--gpu-layers must be auto, all or a non-negative integer, got "${layers}"`);
  }
  const moe = values["cpu-moe"];
  let cpuMoe: true | number | undefined;
  if (moe !== undefined) {
    if (moe === "all") cpuMoe = true;
    else {
      cpuMoe = Number(moe);
      if (moe.trim() === "" || !Number.isInteger(cpuMoe) || cpuMoe < 0) throw new CliError(`--cpu-moe must be all or a non-negative integer, got "${moe}"`);
    }
  }
  const gpuMemory = values["gpu-mem"]?.split(",").map((item) => parseByteSize(item, "--gpu-mem"));
  const cpuMemory = values["cpu-mem"] === undefined ? undefined : parseByteSize(values["cpu-mem"], "--cpu-mem");
  return { gpuLayers, gpuLayersGiven: layers !== undefined, cpuMoe, gpuMemory, cpuMemory };
}

/** What the plan needs besides the devices. */
export interface PlanRequest {
  readonly contextTokens: number;
  readonly sequences?: number;
  readonly kvType?: KVType;
  readonly maxBatchTokens?: number;
}

/** CUDA devices 0, 1, ... (the first `limit`) with their free memory, each as a created backend; none when there is no GPU. */
async function cudaDevices(limit: number | undefined, required: boolean): Promise<{ backend: Backend; freeBytes: number }[]> {
  const cuda = await import("@memra/cuda-ffi"); // loads nothing native at import
  if (!cuda.cudaAvailable()) {
    if (required) throw new CliError(`--device cuda: ${cuda.cudaUnavailableReason() ?? "no CUDA GPU"}`);
    return [];
  }
  const count = cuda.openMemraCudaLibrary().deviceCount();
  if (limit !== undefined && limit > count) throw new CliError(`--gpu-mem names ${limit} GPUs, ${count} found`);
  const found: { backend: Backend; freeBytes: number }[] = [];
  try {
    for (let device = 0; device < (limit ?? count); device++) {
      const backend = cuda.CudaBackend.create({ device });
      found.push({ backend, freeBytes: backend.memoryInfo().freeBytes });
    }
  } catch (error) {
    for (const gpu of found) gpu.backend.dispose();
    throw new CliError(`CUDA device ${found.length}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return found;
}

export interface PlannedDevices {
  readonly footprint: ModelFootprint;
  readonly devices: readonly PlacementDevice[];
  readonly host: PlacementDevice;
}

/**
 * The devices a plan is made for, without creating anything: GPUs declared by --gpu-mem (or, when
 * absent, the CUDA GPUs present and their free memory) and the host. `--device cpu+reference`
 * (for testing) makes the native CPU backend the "GPU" and the reference backend the host.
 */
export async function describeDevices(
  choice: BackendChoice | "cpu+reference",
  args: PlacementArguments,
  path: string,
  hostKind: "cpu" | "reference" = choice === "reference" ? "reference" : "cpu",
): Promise<PlannedDevices & { cuda: { backend: Backend; freeBytes: number }[] }> {
  const footprint = modelFootprint(openGGUFModel(path));
  const ram = args.cpuMemory ?? hostAvailableBytes();
  if (choice === "cpu+reference") {
    return { footprint, devices: [{ name: "cpu", kind: "cpu", freeBytes: ram }], host: { name: "reference", kind: "reference", freeBytes: ram }, cuda: [] };
  }
  const host: PlacementDevice = { name: hostKind, kind: hostKind, freeBytes: ram };
  if (choice === "cpu" || choice === "reference") return { footprint, devices: [], host, cuda: [] };
  const cuda = await cudaDevices(args.gpuMemory?.length, choice === "cuda");
  const devices = cuda.map((gpu, index) => ({ name: `cuda:${index}`, kind: "cuda" as const, freeBytes: Math.min(gpu.freeBytes, args.gpuMemory?.[index] ?? Number.POSITIVE_INFINITY) }));
  return { footprint, devices, host, cuda };
}

/** planPlacement over described devices, with the arguments' options. */
export function makePlan(planned: PlannedDevices, args: PlacementArguments, request: PlanRequest): PlacementPlan {
  return planPlacement(planned.footprint, {
    devices: planned.devices,
    host: planned.host,
    contextTokens: request.contextTokens,
    ...(request.sequences === undefined ? {} : { sequences: request.sequences }),
    ...(request.kvType === undefined ? {} : { kvType: request.kvType }),
    ...(request.maxBatchTokens === undefined ? {} : { maxBatchTokens: request.maxBatchTokens }),
    gpuLayers: args.gpuLayers,
    ...(args.cpuMoe === undefined ? {} : { cpuMoe: args.cpuMoe }),
  });
}

export interface ChosenPlacement {
  /** What to pass to loadModel: one backend, or a backend per layer. */
  readonly load: ({ readonly backend: Backend } | { readonly placement: BackendPlacement }) & { readonly ropeScaling?: RopeScalingOptions };
  /** The backend of the LM head (for reports). */
  readonly primary: Backend;
  readonly plan: PlacementPlan;
}

/**
 * The backends a model command loads onto. Without a GPU (or with --device cpu / reference), one
 * host backend, after a plan has checked that the model and its KV cache fit in RAM. With CUDA
 * present (--device auto or cuda), the plan places layers on CudaBackend instances and the rest on
 * the host backend. `notice` reports GPU options that have no GPU to apply to.
 */
export async function choosePlacement(
  path: string,
  choice: BackendChoice | "cpu+reference",
  threads: number | undefined,
  args: PlacementArguments,
  request: PlanRequest,
  notice: (message: string) => void,
): Promise<ChosenPlacement> {
  // The host backend first: whether the native library loads decides how its weights are sized.
  const hostBackend =
    choice === "cpu+reference" || choice === "reference" ? new ReferenceBackend() : choice === "cpu" ? await chooseBackend(threads, "cpu") : await chooseHostBackend(threads);
  let described: Awaited<ReturnType<typeof describeDevices>>;
  let plan: PlacementPlan;
  try {
    described = await describeDevices(choice, args, path, hostBackend.name === "reference" ? "reference" : "cpu");
  } catch (error) {
    hostBackend.dispose();
    throw error;
  }
  if (described.devices.length === 0 && choice !== "cpu+reference" && (args.gpuMemory !== undefined || (args.gpuLayersGiven && args.gpuLayers !== 0))) {
    if (choice === "cpu" || choice === "reference") {
      hostBackend.dispose();
      throw new CliError(`--gpu-layers and --gpu-mem need a GPU; --device ${choice} has none`);
    }
    notice("memra: no CUDA GPU here: --gpu-layers / --gpu-mem ignored, every layer on the CPU");
  }
  const effective = described.devices.length === 0 && choice !== "cpu+reference" ? { ...args, gpuLayers: "auto" as const } : choice === "cuda" && !args.gpuLayersGiven ? { ...args, gpuLayers: described.footprint.shape.layers } : args;
  try {
    plan = makePlan(described, effective, request);
  } catch (error) {
    for (const gpu of described.cuda) gpu.backend.dispose();
    hostBackend.dispose();
    throw error;
  }
  const used = new Set(devicesInUse(plan));
  const backends: Record<string, Backend> = {};
  described.cuda.forEach((gpu, index) => {
    if (used.has(`cuda:${index}`)) backends[`cuda:${index}`] = gpu.backend;
    else gpu.backend.dispose();
  });
  if (used.has(described.host.name)) backends[described.host.name] = hostBackend;
  else hostBackend.dispose();
  if (choice === "cpu+reference" && used.has("cpu")) backends.cpu = await chooseBackend(threads, "cpu");
  const names = Object.keys(backends);
  const primary = backends[plan.outputDevice]!;
  if (names.length === 1) return { load: { backend: primary }, primary, plan };
  return { load: { placement: bindPlacement(plan, backends) }, primary, plan };
}

/** "cuda:0 layers 24-47, cpu layers 0-23 (experts 0-47)": where the layers run, for a notice. */
export function describePlan(plan: PlacementPlan): string {
  return plan.devices
    .filter((d) => d.layers > 0 || d.expertLayers > 0)
    .map((d) => {
      const layers = ranges(plan.layers.filter((l) => l.device === d.name).map((l) => l.layer));
      const experts = ranges(plan.layers.filter((l) => l.expertDevice === d.name && l.expertBytes > 0).map((l) => l.layer));
      const own = plan.layers.filter((l) => l.device === d.name && l.expertBytes > 0).map((l) => l.layer);
      const expertNote = experts && experts !== ranges(own) ? ` (experts ${experts})` : "";
      return `${d.name} ${layers ? `layers ${layers}` : "no layers"}${expertNote}`;
    })
    .join(", ");
}

/** [0,1,2,5,6] → "0-2, 5-6". */
export function ranges(values: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < values.length; ) {
    let j = i;
    while (j + 1 < values.length && values[j + 1] === values[j]! + 1) j++;
    parts.push(i === j ? `${values[i]}` : `${values[i]}-${values[j]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

/** The option values a model command passes to placeModel. */
export interface PlacementValues {
  readonly device?: string | undefined;
  readonly ctx?: string | undefined;
  readonly "gpu-layers"?: string | undefined;
  readonly "cpu-moe"?: string | undefined;
  readonly "gpu-mem"?: string | undefined;
  readonly "cpu-mem"?: string | undefined;
  readonly "override-kv"?: readonly string[] | undefined;
  readonly "rope-scaling"?: string | undefined;
  readonly "rope-scale"?: string | undefined;
  readonly "yarn-orig-ctx"?: string | undefined;
  /** The chat template's text (chat and serve's --chat-template). */
  readonly "chat-template"?: string | undefined;
  readonly lora?: readonly string[] | undefined;
  readonly "lora-scaled"?: readonly string[] | undefined;
  readonly "lora-init-without-apply"?: boolean | undefined;
  /** The order --lora and --lora-scaled were given in (loraOrderOf): adapters are numbered in it. */
  readonly loraOrder?: readonly string[] | undefined;
}

/** --lora and --lora-scaled as loadModel's lora option (undefined when neither is given). */
export function parseLoraArguments(values: PlacementValues): LoraAdapterOptions[] | undefined {
  const plain: LoraAdapterOptions[] = (values.lora ?? []).map((path) => ({ path }));
  const scaled: LoraAdapterOptions[] = [];
  for (const item of values["lora-scaled"] ?? []) {
    const colon = item.lastIndexOf(":");
    const scale = colon < 0 ? Number.NaN : Number(item.slice(colon + 1));
    if (colon <= 0 || item.slice(colon + 1).trim() === "" || !Number.isFinite(scale)) throw new CliError(`--lora-scaled takes FILE:SCALE, got "${item}"`);
    scaled.push({ path: item.slice(0, colon), scale });
  }
  // Numbered in command-line order, as llama.cpp numbers them (ids of a request's `lora`).
  const order = values.loraOrder;
  let adapters = [...plain, ...scaled];
  if (order && order.length === adapters.length) {
    let [next, nextScaled] = [0, 0];
    adapters = order.map((flag) => (flag === "lora-scaled" ? scaled[nextScaled++]! : plain[next++]!));
  }
  if (values["lora-init-without-apply"]) {
    if (adapters.length === 0) throw new CliError("--lora-init-without-apply needs --lora or --lora-scaled");
    return adapters.map(({ path }) => ({ path, scale: 0 }));
  }
  return adapters.length > 0 ? adapters : undefined;
}

/** --rope-scaling, --rope-scale and --yarn-orig-ctx as loadModel's ropeScaling, or undefined when none is given (the GGUF's then). */
export function parseRopeScalingArguments(values: PlacementValues, fileType: RopeScalingOptions["type"] | undefined): RopeScalingOptions | undefined {
  const type = values["rope-scaling"];
  if (type === undefined && values["rope-scale"] === undefined && values["yarn-orig-ctx"] === undefined) return undefined;
  if (type !== undefined && type !== "none" && type !== "linear" && type !== "yarn") throw new CliError(`--rope-scaling must be none, linear or yarn, got "${type}"`);
  const factor = values["rope-scale"] === undefined ? undefined : Number(values["rope-scale"]);
  if (factor !== undefined && !(factor > 0 && Number.isFinite(factor))) throw new CliError(`--rope-scale must be a positive number, got "${values["rope-scale"]}"`);
  const original = values["yarn-orig-ctx"] === undefined ? undefined : parsePositiveInteger(values["yarn-orig-ctx"], "--yarn-orig-ctx", 1);
  const resolvedType = type ?? fileType ?? (values["yarn-orig-ctx"] !== undefined ? "yarn" : "linear");
  return { type: resolvedType, ...(factor === undefined ? {} : { factor }), ...(original === undefined ? {} : { originalContextLength: original }) };
}

/**
 * The backend(s) a model command loads onto, from its --device, --ctx and placement options: a
 * plan (which fails before any weight is read when nothing fits), then the backends it uses.
 * `contextTokens` is --ctx, defaulting to the model's context length, at most `defaultContext`.
 * When the layers are split, one notice line says where they run.
 */
export async function placeModel(
  path: string,
  values: PlacementValues,
  threads: number | undefined,
  request: { readonly defaultContext?: number; readonly sequences?: number; readonly kvType?: KVType; readonly maxBatchTokens?: number },
  notice: (message: string) => void,
): Promise<ChosenPlacement & { readonly contextTokens: number }> {
  const placement = parsePlacementArguments(values);
  const choice = parsePlacementDeviceChoice(values.device);
  const metadataOverrides = (values["override-kv"] ?? []).map(parseMetadataOverride);
  // --chat-template (chat, serve): the template text instead of the GGUF's, longer than --override-kv's 127 bytes
  if (values["chat-template"] !== undefined) metadataOverrides.push({ key: "tokenizer.chat_template", type: "str", value: values["chat-template"] });
  const config = readModelConfig(applyMetadataOverrides(openGGUFModel(path), metadataOverrides));
  const ropeScaling = parseRopeScalingArguments(values, config.ropeScalingType);
  // A scaled context reaches factor × the trained one (llama.cpp lets --ctx-size go there too).
  const modelContext = scaledContextLength(config, config.keyLength, ropeScaling);
  // --ctx 0: the model's context length (llama.cpp's -c 0)
  const contextTokens = values.ctx?.trim() === "0" ? modelContext : Math.min(parsePositiveInteger(values.ctx, "--ctx", Math.min(modelContext, request.defaultContext ?? 8192)), modelContext);
  const chosen = await choosePlacement(path, choice, threads, placement, { ...request, contextTokens }, notice);
  if ("placement" in chosen.load) notice(`memra: ${describePlan(chosen.plan)}`);
  const lora = parseLoraArguments(values);
  return {
    ...chosen,
    load: { ...chosen.load, ...(ropeScaling ? { ropeScaling } : {}), ...(lora ? { lora } : {}), ...(metadataOverrides.length > 0 ? { metadataOverrides } : {}) },
    contextTokens,
  };
}
