import { basename } from "node:path";
import { parseArgs } from "node:util";
import { type KVType, type PlacementPlan, formatBytes, hostAvailableBytes, modelFootprint } from "@memra/core";
import { openGGUFModel, readModelConfig } from "@memra/gguf";
import { parsePlacementDeviceChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { type PlannedDevices, describeDevices, makePlan, parsePlacementArguments, placementOptionHelp, placementParseOptions, ranges } from "../placement-arguments";
import { parsePositiveInteger, requireModelPath } from "./model-arguments";

export const planUsage = `usage: memra plan -m MODEL [--ctx N] [--parallel N] [--gpu-mem 24GiB,24GiB] [--gpu-layers N] [--cpu-moe N] [--json]

Prints where each layer of MODEL would run (and its experts, for MoE models), the bytes each device
would hold (weights, KV cache, scratch) and the KV cache size, without loading any weight. With
--gpu-mem the GPUs are declared, not queried, so a plan can be made on a machine without them;
otherwise the CUDA GPUs present are asked for their free memory. generate, chat, serve and bench
take the same options and place the model this way.

options:
  -m, --model FILE         GGUF model
  --ctx N                  tokens of context per sequence (default and most: the model's; default at most 8192)
  --parallel N             sequences held at once (default 1)
  --kv-type TYPE           KV cache element type: f16 (default), f32, q8_0
  --batch N                most tokens of one forward step (default 512; sizes the scratch)
${placementOptionHelp}
  --device D               auto (default), cuda, cpu or reference: the host backend kind, and whether GPUs are asked
  --json                   the plan as one JSON object

examples:
  memra plan -m qwen3-30b-a3b-q4_k_m.gguf --gpu-mem 24GiB --ctx 32768
  memra plan -m qwen3-30b-a3b-q4_k_m.gguf --gpu-mem 24GiB,24GiB --cpu-moe 8 --json`;

const KV_TYPES: readonly KVType[] = ["f16", "f32", "q8_0"];

export async function planCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      ctx: { type: "string" },
      parallel: { type: "string" },
      "kv-type": { type: "string", default: "f16" },
      batch: { type: "string" },
      ...placementParseOptions,
      device: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${planUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, planUsage);
  const kvType = values["kv-type"] as KVType;
  if (!KV_TYPES.includes(kvType)) throw new CliError(`--kv-type must be one of ${KV_TYPES.join(", ")}, got "${values["kv-type"]}"`);
  const placement = parsePlacementArguments(values);
  const choice = parsePlacementDeviceChoice(values.device);
  const file = openGGUFModel(path);
  const config = readModelConfig(file);
  const contextTokens = Math.min(parsePositiveInteger(values.ctx, "--ctx", Math.min(config.contextLength, 8192)), config.contextLength);
  const sequences = parsePositiveInteger(values.parallel, "--parallel", 1);
  const maxBatchTokens = parsePositiveInteger(values.batch, "--batch", 512);

  let planned: PlannedDevices;
  if (placement.gpuMemory !== undefined && choice !== "cpu" && choice !== "reference" && choice !== "cpu+reference") {
    // declared GPUs: nothing is asked of the driver
    const ram = placement.cpuMemory ?? hostAvailableBytes();
    planned = {
      footprint: modelFootprint(file),
      devices: placement.gpuMemory.map((freeBytes, index) => ({ name: `cuda:${index}`, kind: "cuda", freeBytes })),
      host: { name: "cpu", kind: "cpu", freeBytes: ram },
    };
  } else {
    const described = await describeDevices(choice, placement, path);
    for (const gpu of described.cuda) gpu.backend.dispose();
    planned = described;
  }
  const plan = makePlan(planned, placement, { contextTokens, sequences, kvType, maxBatchTokens });
  if (values.json) {
    io.stdout(`${JSON.stringify({ model: path, architecture: config.architecture, ...plan })}\n`);
    return;
  }
  io.stdout(formatPlan(basename(path), config.architecture, plan));
}

/** The plan as text: a line per run of layers on one device, then a table of bytes per device. */
export function formatPlan(model: string, architecture: string, plan: PlacementPlan): string {
  const lines: string[] = [];
  const layers = plan.layers.length;
  const moe = plan.layers.some((l) => l.expertBytes > 0);
  lines.push(`${model}: ${architecture}, ${layers} layers; ${plan.gpuLayers} on GPU${plan.gpuLayers === 1 ? "" : "s"}`);
  lines.push(
    `KV cache: ${plan.contextTokens} tokens × ${plan.sequences} sequence${plan.sequences === 1 ? "" : "s"}, ${plan.kvType}: ` +
      `${formatBytes(plan.kvBytes)} (${formatBytes(layers ? plan.kvBytes / layers : 0)} per layer)`,
  );
  lines.push("");
  lines.push("layers:");
  for (let start = 0; start < layers; ) {
    const { device, expertDevice } = plan.layers[start]!;
    let end = start;
    while (end + 1 < layers && plan.layers[end + 1]!.device === device && plan.layers[end + 1]!.expertDevice === expertDevice) end++;
    const span = start === end ? `${start}` : `${start}-${end}`;
    lines.push(`  ${span.padEnd(8)} ${device}${moe && expertDevice !== device ? `, experts on ${expertDevice}` : ""}`);
    start = end + 1;
  }
  lines.push(`  token embedding on ${plan.embeddingDevice}; output norm and LM head on ${plan.outputDevice}`);
  lines.push("");
  const rows = [["device", "layers", ...(moe ? ["experts"] : []), "weights", "KV", "scratch", "total", "available"]];
  for (const d of plan.devices) {
    const own = plan.layers.filter((l) => l.device === d.name).map((l) => l.layer);
    const experts = plan.layers.filter((l) => l.expertDevice === d.name && l.expertBytes > 0).map((l) => l.layer);
    rows.push([
      d.name,
      ranges(own) || "-",
      ...(moe ? [ranges(experts) || "-"] : []),
      formatBytes(d.weightBytes),
      formatBytes(d.kvBytes),
      formatBytes(d.scratchBytes),
      formatBytes(d.totalBytes),
      formatBytes(d.availableBytes),
    ]);
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((cells) => cells[column]!.length)));
  for (const cells of rows) lines.push(cells.map((cell, column) => (column === 0 || column === 1 || (moe && column === 2) ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join("  ").trimEnd());
  return `${lines.join("\n")}\n`;
}
