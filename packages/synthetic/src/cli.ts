#!/usr/bin/env bun
/**
 * memra-synthetic: writes a deterministic synthetic Qwen3 / Qwen3-MoE GGUF.
 *   bun packages/synthetic/src/cli.ts --preset tiny --type q8_0 [--seed 1] [--untied] [--out FILE]
 *   bun packages/synthetic/src/cli.ts --preset small --options '{"heads":4,"kvHeads":1,"headDim":128}'
 * --options takes a JSON object of SyntheticModelOptions overriding the preset (and the flags);
 * --lora a JSON object of SyntheticLoraOptions: an adapter for the model is written too, its path printed last.
 * Without --out the file goes to the cache and its path is printed.
 */
import { parseArgs } from "node:util";
import { writeGGUFFile } from "@memra/gguf";
import { syntheticModelFile } from "./model-cache";
import { type SyntheticLoraOptions, syntheticLoraFile } from "./synthetic-lora";
import {
  PRESETS,
  type PresetName,
  type SyntheticModelOptions,
  WEIGHT_TYPES,
  type WeightType,
  buildSyntheticModel,
  resolveOptions,
} from "./synthetic-model";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "tiny" },
    type: { type: "string", default: "f32" },
    seed: { type: "string", default: "1" },
    layers: { type: "string" },
    untied: { type: "boolean", default: false },
    options: { type: "string" },
    lora: { type: "string" },
    out: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help) {
  console.log(`usage: memra-synthetic [--preset ${Object.keys(PRESETS).join("|")}] [--type ${WEIGHT_TYPES.join("|")}] [--seed N] [--layers N] [--untied] [--options JSON] [--out FILE]`);
  process.exit(0);
}
if (!(values.preset! in PRESETS)) {
  console.error(`memra-synthetic: unknown preset "${values.preset}" (one of ${Object.keys(PRESETS).join(", ")})`);
  process.exit(1);
}
if (!WEIGHT_TYPES.includes(values.type as WeightType)) {
  console.error(`memra-synthetic: unknown weight type "${values.type}" (one of ${WEIGHT_TYPES.join(", ")})`);
  process.exit(1);
}
const options = resolveOptions(values.preset as PresetName, {
  weightType: values.type as WeightType,
  seed: Number(values.seed),
  tiedEmbeddings: !values.untied,
  ...(values.layers ? { layers: Number(values.layers) } : {}),
  ...parseOverrides(values.options),
});

function parseOverrides(json: string | undefined): Partial<SyntheticModelOptions> {
  if (json === undefined) return {};
  try {
    const parsed: unknown = JSON.parse(json);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object");
    return parsed as Partial<SyntheticModelOptions>;
  } catch (error) {
    console.error(`memra-synthetic: --options must be a JSON object (${error instanceof Error ? error.message : String(error)})`);
    process.exit(1);
  }
}
try {
  if (values.out) {
    await writeGGUFFile(values.out, buildSyntheticModel(options));
    console.log(values.out);
  } else {
    console.log(await syntheticModelFile(options));
  }
  // --lora JSON (SyntheticLoraOptions): also an adapter for the model, its path on the last line.
  if (values.lora) console.log(await syntheticLoraFile(options, JSON.parse(values.lora) as SyntheticLoraOptions));
} catch (error) {
  console.error(`memra-synthetic: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
