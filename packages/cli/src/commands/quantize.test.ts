/**
 * `memra quantize` against llama-quantize: for every case of quantize-goldens.json (recorded by
 * tools/llamacpp/quantize-goldens.ts from llama.cpp's llama_model_quantize on the same synthetic
 * models) the output file must be llama.cpp's byte for byte: each tensor's type and bytes, then the
 * whole file (metadata, tensor order, offsets, padding). Cases with `input` quantize the model split
 * as gguf-split --split-max-tensors N splits it; with keepSplit their output is several files, each
 * compared the same way.
 */
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { createNativeQuantizer } from "@memra/cpu-ffi";
import {
  type QuantizationOptions,
  QuantizationError,
  ggmlTypeName,
  importanceOf,
  openGGUF,
  parseMetadataOverride,
  quantizationImportance,
  quantizeModel,
  readImatrix,
  splitGGUF,
  writeImatrix,
} from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticImatrix, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import goldens from "../__fixtures__/quantize-goldens.json";

interface GoldenFile {
  bytes: number;
  sha256: string;
  tensors: string[];
}

interface GoldenCase extends GoldenFile {
  model: string;
  type: string;
  /** the model split into shards of N tensors (gguf-split --split-max-tensors N), given by its first shard */
  input?: { splitMaxTensors: number };
  options?: Omit<QuantizationOptions, "type" | "metadataOverrides" | "importance" | "pruneLayers"> & {
    metadataOverrides?: Array<{ key: string; type: string; value: unknown }>;
    /** quantized with the model's syntheticImatrix, as llama-quantize --imatrix imatrix.gguf [--include-weights ...] */
    imatrix?: { include?: string[]; exclude?: string[]; file?: string };
    pruneLayers?: number[];
  };
  fileType: number;
  /** with keepSplit: each output file, named by what follows the prefix ("-00001-of-00004.gguf") */
  files?: Array<GoldenFile & { name: string }>;
}

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const ROOT = new URL("../../../../", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-quantize-"));
const cases = goldens.cases as GoldenCase[];
const models = goldens.models as Record<string, { preset: PresetName; options: Partial<SyntheticModelOptions> }>;
const inputs: Record<string, string> = {};
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const label = (c: GoldenCase) => `${c.model} ${c.type}${c.input ? ` ${JSON.stringify(c.input)}` : ""}${c.options ? ` ${JSON.stringify(c.options)}` : ""}`;
/** The model's synthetic importance matrix, written once as imatrix.gguf in its own folder (the name its metadata records). */
const imatrixFiles: Record<string, string> = {};
async function imatrixOf(model: string): Promise<string> {
  if (imatrixFiles[model] === undefined) {
    const folder = mkdtempSync(join(directory, `imatrix-${model}-`));
    writeImatrix(join(folder, "imatrix.gguf"), syntheticImatrix(openGGUF(inputs[model]!)));
    imatrixFiles[model] = join(folder, "imatrix.gguf");
  }
  return imatrixFiles[model]!;
}

/** The case's options as quantizeModel takes them: --override-kv specs parsed, the importance matrix read as llama-quantize reads it. */
async function optionsOf(c: GoldenCase): Promise<Omit<QuantizationOptions, "type">> {
  const { imatrix: selection, ...options } = c.options ?? {};
  const overrides = (options.metadataOverrides ?? []).map((o) => parseMetadataOverride(`${o.key}=${o.type}:${String(o.value)}`));
  if (!selection) return { ...options, metadataOverrides: overrides };
  const path = selection.file ? join(ROOT, selection.file) : await imatrixOf(c.model);
  const read = readImatrix(path);
  const chosen = quantizationImportance(importanceOf(read), { file: basename(path), datasets: read.datasets, chunkCount: read.chunkCount }, selection);
  return { ...options, metadataOverrides: [...overrides, ...chosen.metadata], importance: chosen.importance };
}

/** The model split as the case's input is (gguf-split --split-max-tensors N): the path of its first shard. */
const splitInputs: Record<string, string> = {};
async function inputOf(c: GoldenCase): Promise<string> {
  if (c.input === undefined) return inputs[c.model]!;
  const id = `${c.model}-${c.input.splitMaxTensors}`;
  if (splitInputs[id] === undefined) {
    const plan = await splitGGUF(openGGUF(inputs[c.model]!), join(mkdtempSync(join(directory, `split-${id}-`)), c.model), { maxTensors: c.input.splitMaxTensors });
    splitInputs[id] = plan.shards[0]!.path;
  }
  return splitInputs[id]!;
}

let native: ReturnType<typeof createNativeQuantizer> | undefined;

beforeAll(async () => {
  for (const [id, m] of Object.entries(models)) inputs[id] = await syntheticModelFile(resolveOptions(m.preset, m.options));
  try {
    native = createNativeQuantizer(2);
  } catch (error) {
    if (process.env.MEMRA_REQUIRE_NATIVE === "1") throw error;
  }
}, 120_000);
afterAll(() => native?.dispose());

function run(...args: string[]) {
  return runIn(undefined, ...args);
}
function runIn(cwd: string | undefined, ...args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdout: "pipe", stderr: "pipe", ...(cwd ? { cwd } : {}) });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

/** The output's tensors as the fixture lists them ("name type sha256-prefix"), then the whole file's hash. */
function describeFile(path: string) {
  const file = openGGUF(path);
  return {
    tensors: file.tensors.map((t) => `${t.name} ${ggmlTypeName(t.type)} ${sha256(file.tensorData(t)).slice(0, 16)}`),
    fileType: file.getNumber("general.file_type"),
    sha256: sha256(readFileSync(path)),
  };
}

function expectGolden(path: string, c: GoldenCase) {
  const ours = describeFile(path);
  // tensor by tensor first: a difference names the tensor and its type
  expect(ours.tensors).toEqual(c.tensors);
  expect(ours.fileType).toBe(c.fileType);
  expect(ours.sha256).toBe(c.sha256);
}

/** A --keep-split case: exactly the files llama.cpp wrote from the same prefix, each byte for byte. */
function expectGoldenShards(prefix: string, c: GoldenCase) {
  const folder = dirname(prefix);
  expect(readdirSync(folder).sort()).toEqual(c.files!.map((f) => `${basename(prefix)}${f.name}`));
  for (const [index, golden] of c.files!.entries()) {
    const ours = describeFile(`${prefix}${golden.name}`);
    expect(ours.tensors, golden.name).toEqual(golden.tensors);
    if (index === 0) expect(ours.fileType).toBe(c.fileType);
    expect(ours.sha256, golden.name).toBe(golden.sha256);
  }
}

describe("quantizeModel against llama-quantize (llama_model_quantize), byte for byte", () => {
  it("covers every file type memra writes, the mixes' rules and the options", () => {
    const types = new Set(cases.map((c) => c.type));
    for (const t of ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M", "COPY"]) {
      expect(types.has(t), t).toBe(true);
    }
    // the rules' inputs the models reach: fallbacks (rows of 64), 8 experts, untied output, GQA 4
    const typesOf = (model: string, type: string) => new Set(cases.find((c) => c.model === model && c.type === type && !c.options && !c.input)!.tensors.map((t) => t.split(" ")[1]));
    expect(typesOf("tiny", "Q4_K_M")).toContain("q5_0");
    expect(typesOf("moe8", "Q4_K_M")).toContain("q8_0");
    expect(typesOf("dense", "Q2_K")).toContain("q4_K");
    expect(typesOf("untied", "Q4_K_M")).toContain("q6_K");
    expect(typesOf("tiny", "IQ4_XS")).toContain("iq4_nl");
    expect(typesOf("tiny", "IQ3_S")).toContain("iq4_nl");
    expect(typesOf("dense", "IQ3_M")).toContain("q4_K");
    expect(typesOf("moe8", "IQ3_M")).toContain("q5_K");
    // --keep-split: several shards from a split input, dense and MoE, and pruned; --prune-layers on both, with importance
    const kept = cases.filter((c) => c.options?.keepSplit);
    expect(kept.filter((c) => c.input && c.files!.length > 1).map((c) => c.model)).toEqual(["dense", "dense", "moe8", "dense"]);
    expect(cases.filter((c) => c.input && !c.options).map((c) => c.type)).toEqual(["Q4_K_M", "Q8_0"]);
    const pruned = cases.filter((c) => c.options?.pruneLayers);
    for (const model of ["dense", "moe8", "suite-dense", "suite-moe"]) expect(pruned.some((c) => c.model === model), model).toBe(true);
    expect(pruned.filter((c) => c.options?.imatrix).map((c) => `${c.model} ${c.type}`)).toEqual(["dense Q4_K_M", "dense IQ2_XXS", "suite-dense Q4_K_M", "suite-moe Q4_K_M", "suite-moe IQ1_M"]);
  });

  it("--prune-layers: blocks renumbered in order, block_count the layers left (as llama.cpp writes them)", () => {
    const c = cases.find((x) => x.model === "dense" && x.type === "Q4_K_M" && x.options?.pruneLayers && !x.options.imatrix && !x.options.keepSplit)!;
    expect(c.options!.pruneLayers).toEqual([2, 5]);
    const layers = new Set(c.tensors.map((t) => /^blk\.(\d+)\./.exec(t)?.[1]).filter((l) => l !== undefined));
    expect([...layers]).toEqual(["0", "1", "2", "3", "4", "5"]);
    // the renumbered blk.2 is the input's blk.3: its attn_norm bytes (copied f32) are blk.3's in the unpruned file
    const whole = cases.find((x) => x.model === "dense" && x.type === "Q4_K_M" && !x.options && !x.input)!;
    const norm = (list: string[], name: string) => list.find((t) => t.startsWith(`${name} `))!.split(" ")[2];
    expect(norm(c.tensors, "blk.2.attn_norm.weight")).toBe(norm(whole.tensors, "blk.3.attn_norm.weight"));
    expect(norm(c.tensors, "blk.4.attn_norm.weight")).toBe(norm(whole.tensors, "blk.6.attn_norm.weight"));
  });

  it.each(cases.map((c) => [label(c), c] as const))("%s", async (_label, c) => {
    const folder = mkdtempSync(join(directory, "library-"));
    const output = join(folder, "out.gguf");
    const report = await quantizeModel(await inputOf(c), output, {
      type: c.type,
      ...(await optionsOf(c)),
      ...(native ? { quantizer: native.quantizer, dequantizer: native.dequantizer } : {}),
    });
    if (c.files) {
      expectGoldenShards(join(folder, "out"), c);
      expect(report.paths).toEqual(c.files.map((f) => join(folder, `out${f.name}`)));
    } else expectGolden(output, c);
  });

  it("writes the same files with the TypeScript quantizers alone (no native library)", async () => {
    // an f16 source converted and a k-quant mix; the native quantizers are checked against the
    // TypeScript ones bit for bit, type by type, in @memra/synthetic's native-quantize.test.ts
    const picked = [
      ...cases.filter((c) => c.model === "dense" && ["BF16", "Q3_K_M"].includes(c.type) && !c.options),
      // with an importance matrix: IQ3_XXS gives q5_K, q4_K, iq3_s, iq2_s and iq3_xxs tensors, all weighted
      ...cases.filter((c) => c.model === "untied" && c.type === "IQ3_XXS" && c.options?.imatrix),
    ];
    expect(picked).toHaveLength(3);
    for (const c of picked) {
      const output = join(directory, "typescript.gguf");
      await quantizeModel(inputs[c.model]!, output, { type: c.type, ...(await optionsOf(c)), slabValues: 100_000 });
      expectGolden(output, c);
    }
  }, 60_000);
});

describe("memra quantize", () => {
  const golden = (model: string, type: string, imatrix = false) =>
    cases.find((c) => c.model === model && c.type === type && !c.input && (imatrix ? c.options?.imatrix && Object.keys(c.options).length === 1 && Object.keys(c.options.imatrix).length === 0 : !c.options))!;

  it("writes llama-quantize's file, printing each tensor and the sizes", () => {
    const output = join(directory, "cli.gguf");
    const result = run("quantize", inputs.dense!, output, "q4_k_m", "2");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expectGolden(output, golden("dense", "Q4_K_M"));
    const lines = result.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^\[ 1\/90\] output_norm\.weight +\[256\] +f32, copied/);
    expect(result.stdout).toMatch(/\] blk\.0\.ffn_down\.weight +\[512, 256\] +f16 -> q6_K /);
    expect(result.stdout).toMatch(/quant size: 2\.76 MiB \(4\.90 BPW\), Q4_K_M/);
    expect(lines.at(-1)).toMatch(/^wrote .*cli\.gguf \(2\.80 MiB\) in \d/);
  });

  it("names the output ggml-model-TYPE.gguf beside the input when none is given (Q4_K: the Q4_K_M mix)", () => {
    const folder = mkdtempSync(join(directory, "default-"));
    const input = join(folder, "model-f16.gguf");
    copyFileSync(inputs.dense!, input);
    const result = run("quantize", input, "Q4_K", "--json");
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary.path).toBe(join(folder, "ggml-model-Q4_K.gguf"));
    expect(summary.type).toBe("Q4_K_M");
    expect(summary.file_type).toBe(15);
    expectGolden(summary.path, golden("dense", "Q4_K_M"));
  });

  it("--dry-run prints the plan and writes nothing; the options reach the plan", () => {
    const folder = mkdtempSync(join(directory, "dry-"));
    const input = join(folder, "model.gguf");
    copyFileSync(inputs.untied!, input);
    const result = run("quantize", "--dry-run", "--json", "--leave-output-tensor", "--tensor-type", "attn_q=q8_0", input, "Q4_K_M");
    expect(result.code).toBe(0);
    expect(readdirSync(folder)).toEqual(["model.gguf"]);
    const summary = JSON.parse(result.stdout);
    expect(summary.path).toBeUndefined();
    // 4 attn_q q8_0; output.weight left f32 with the norms; the rest of the mix as llama.cpp's
    const types = new Map<string, number>();
    for (const line of cases.find((c) => c.model === "untied" && c.type === "Q4_K_M" && !c.options)!.tensors) {
      const type = line.split(" ")[1]!;
      types.set(type, (types.get(type) ?? 0) + 1);
    }
    expect(summary.tensor_types.q8_0).toBe(4);
    expect(summary.tensor_types.f32).toBe((types.get("f32") ?? 0) + 1);
    expect(summary.tensor_types.q4_K).toBe(types.get("q4_K")! - 4);
  });

  it("refuses what it cannot do with one line naming it, a non-zero exit and nothing written", () => {
    const folder = mkdtempSync(join(directory, "errors-"));
    const out = join(folder, "out.gguf");
    const q8 = inputs["dense-q8_0"]!;
    const cases: Array<[string[], RegExp]> = [
      [[inputs.dense!, out, "TQ1_0"], /quantization type TQ1_0 is not supported: ternary types are not implemented; one of: F32, F16, .*, IQ4_NL, IQ3_S, IQ3_M, IQ2_S, IQ2_M, IQ4_XS, IQ1_M, BF16, COPY\n$/],
      [[inputs.dense!, out, "IQ2_XS"], /IQ2_XS needs an importance matrix: tensor blk\.0\.attn_k\.weight would be iq2_xs \(compute one with memra imatrix, pass it with --imatrix\)/],
      [[inputs.dense!, out, "Q4_K_M", "--include-weights", "attn"], /--include-weights and --exclude-weights select entries of an importance matrix: give it with --imatrix FILE/],
      [[inputs.dense!, out, "Q4_K_M", "--imatrix", join(folder, "missing.dat")], /missing\.dat/],
      [[inputs.dense!, out, "Q9_Z"], /unknown quantization type "Q9_Z"; one of: /],
      [[inputs.dense!, "Q9_Z"], /unknown quantization type "Q9_Z"/],
      [[q8, out, "Q4_K_M"], /tensor token_embd\.weight is q8_0: requantizing is disabled \(allow it with allowRequantize \/ --allow-requantize\)/],
      [[inputs.dense!, inputs.dense!, "Q8_0"], /is the input file: write the quantized model elsewhere/],
      [[inputs.dense!, out, "Q8_0", "--tensor-type", "attn_v"], /--tensor-type takes PATTERN=TYPE, got "attn_v"/],
      [[inputs.dense!, out, "Q8_0", "--tensor-type", "attn_v=tq1_0"], /tensor type override "attn_v": memra cannot write tq1_0 tensors/],
      [[inputs.dense!, out, "Q8_0", "--tensor-type", "attn_v=iq3_xxs"], /Q8_0 needs an importance matrix: tensor blk\.0\.attn_v\.weight would be iq3_xxs/],
      [[inputs.dense!, out, "Q8_0", "--output-tensor-type", "q7"], /output tensor type: unknown ggml type "q7"/],
      [[inputs.dense!, out, "Q8_0", "0"], /the thread count must be a whole number from 1 to 1024, got "0"/],
      [[join(folder, "missing.gguf"), out, "Q8_0"], /cannot open .*missing\.gguf/],
    ];
    for (const [args, message] of cases) {
      const result = run("quantize", ...args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(result.stderr, args.join(" ")).toMatch(message);
      expect(readdirSync(folder), args.join(" ")).toEqual([]);
    }
  });

  it("reads a split model from its first shard: the unsplit model's file (llama.cpp drops the split keys too)", () => {
    const folder = mkdtempSync(join(directory, "split-"));
    expect(run("gguf-split", "--split-max-tensors", "25", inputs.dense!, join(folder, "dense")).code).toBe(0);
    const output = join(directory, "from-split.gguf");
    const result = run("quantize", join(folder, "dense-00001-of-00004.gguf"), output, "Q4_K_M");
    expect(result.stderr).toBe("");
    expectGolden(output, golden("dense", "Q4_K_M"));
  });

  it("--override-kv writes the metadata as llama-quantize does (an int as the uint32 of its magnitude)", () => {
    const c = cases.find((x) => x.options?.metadataOverrides && !x.options.imatrix)!;
    const output = join(directory, "overridden.gguf");
    const flags = c.options!.metadataOverrides!.flatMap((o) => ["--override-kv", `${o.key}=${o.type}:${String(o.value)}`]);
    const result = run("quantize", ...flags, inputs[c.model]!, output, c.type);
    expect(result.stderr).toBe("");
    expectGolden(output, c);
    const file = openGGUF(output);
    expect(file.metadata.get("qwen3.context_length")).toEqual({ type: "uint32", value: 8192 });
    expect(file.metadata.get("memra.new_key")).toEqual({ type: "uint32", value: 7 });
    expect(file.getString("general.name")).toBe("overridden");
    const bad = run("quantize", "--override-kv", "general.name=string:x", inputs[c.model]!, output, c.type);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/KV override "general\.name=string:x": the type is int, float, bool or str, not "string"/);
  });

  it("--imatrix FILE: llama-quantize --imatrix's file, byte for byte, its metadata naming FILE as given", async () => {
    const imatrix = await imatrixOf("dense");
    const folder = join(imatrix, "..");
    for (const c of [golden("dense", "IQ2_XXS", true), cases.find((x) => x.model === "dense" && x.options?.imatrix?.exclude)!]) {
      const output = join(directory, "cli-imatrix.gguf");
      const selection = c.options!.imatrix!.exclude?.flatMap((name) => ["--exclude-weights", name]) ?? [];
      const result = runIn(folder, "quantize", "--imatrix", "imatrix.gguf", ...selection, inputs.dense!, output, c.type, "2");
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      expectGolden(output, c);
      expect(result.stdout).toMatch(/\d+ tensors quantized with the importance matrix/);
      const file = openGGUF(output);
      expect(file.getString("quantize.imatrix.file")).toBe("imatrix.gguf");
      expect(file.getString("quantize.imatrix.dataset")).toBe("synthetic");
    }
  });

  it("--imatrix with llama-imatrix's own file of a golden-suite model: llama-quantize's file", () => {
    for (const c of cases.filter((x) => x.options?.imatrix?.file)) {
      const output = join(directory, "cli-llama-imatrix.gguf");
      const imatrix = join(ROOT, c.options!.imatrix!.file!);
      const prune = c.options!.pruneLayers ? ["--prune-layers", c.options!.pruneLayers.join(",")] : [];
      const result = runIn(dirname(imatrix), "quantize", "--imatrix", basename(imatrix), ...prune, inputs[c.model]!, output, c.type, "2");
      expect(result.stderr, label(c)).toBe("");
      expectGolden(output, c);
    }
  });

  it("--imatrix errors: both selections, another model's matrix; --dry-run only warns that a type needs one", async () => {
    const folder = mkdtempSync(join(directory, "imatrix-errors-"));
    const out = join(folder, "out.gguf");
    const dense = await imatrixOf("dense");
    const errors: Array<[string[], RegExp]> = [
      [["--imatrix", dense, "--include-weights", "attn", "--exclude-weights", "ffn", inputs.dense!, out, "Q4_K_M"], /give --include-weights or --exclude-weights, not both/],
      [["--imatrix", dense, inputs.untied!, out, "Q4_K_M"], /the importance matrix has 512 values for blk\.0\.ffn_down\.weight, which needs 768 \(768 columns × 1 matrices\)/],
      [["--imatrix", dense, "--include-weights", "attn_q", inputs.dense!, out, "IQ1_S"], /the importance matrix has no entry for blk\.0\.attn_k\.weight, which IQ1_S makes iq1_s: that type needs one/],
    ];
    for (const [args, message] of errors) {
      const result = run("quantize", ...args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(result.stderr, args.join(" ")).toMatch(message);
      expect(readdirSync(folder), args.join(" ")).toEqual([]);
    }
    const dry = run("quantize", "--dry-run", inputs.dense!, "IQ1_M");
    expect(dry.code).toBe(0);
    expect(dry.stderr).toBe("memra quantize: IQ1_M will need an importance matrix (--imatrix) to be written\n");
    expect(dry.stdout).toMatch(/blk\.0\.attn_q\.weight +\[256, 256\] +f16 -> iq1_m/);
  });

  it("--keep-split writes llama-quantize's shards from a split model's first shard, named from OUTPUT less .gguf", async () => {
    for (const c of cases.filter((x) => x.options?.keepSplit && x.input && !x.options.pruneLayers)) {
      const folder = mkdtempSync(join(directory, "cli-keep-split-"));
      const result = run("quantize", "--keep-split", await inputOf(c), join(folder, "out.gguf"), c.type, "2");
      expect(result.stderr, label(c)).toBe("");
      expect(result.code).toBe(0);
      expectGoldenShards(join(folder, "out"), c);
      expect(result.stdout).toMatch(new RegExp(`wrote ${c.files!.length} files, .*out-00001-of-0000${c.files!.length}\\.gguf to out-0000${c.files!.length}-of-0000${c.files!.length}\\.gguf \\(`));
    }
  });

  it("--keep-split without OUTPUT: ggml-model-TYPE-0000i-of-0000n.gguf beside the first shard; a model of one file gives shard 1 of 1", async () => {
    const c = cases.find((x) => x.model === "dense" && x.type === "Q8_0" && x.options?.keepSplit)!;
    const folder = mkdtempSync(join(directory, "cli-keep-split-default-"));
    const shards = dirname(await inputOf(c));
    for (const name of readdirSync(shards)) copyFileSync(join(shards, name), join(folder, name));
    const result = run("quantize", "--keep-split", "--json", join(folder, "dense-00001-of-00004.gguf"), "Q8_0");
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary.paths).toEqual(c.files!.map((f) => join(folder, `ggml-model-Q8_0${f.name}`)));
    for (const [i, golden] of c.files!.entries()) expect(sha256(readFileSync(summary.paths[i])), golden.name).toBe(golden.sha256);

    const single = cases.find((x) => x.options?.keepSplit && !x.input)!;
    const out = mkdtempSync(join(directory, "cli-keep-split-single-"));
    expect(run("quantize", "--keep-split", inputs[single.model]!, join(out, "single.gguf"), single.type).code).toBe(0);
    expect(single.files!.map((f) => f.name)).toEqual(["-00001-of-00001.gguf"]);
    expectGoldenShards(join(out, "single"), single);
  });

  it("--prune-layers L,... (any order, repeated) writes llama-quantize's file; with --keep-split its shards", async () => {
    const c = cases.find((x) => x.model === "dense" && x.type === "Q4_K_M" && x.options?.pruneLayers && !x.options.imatrix && !x.options.keepSplit)!;
    const output = join(directory, "pruned.gguf");
    const result = run("quantize", "--prune-layers", "5,2", "--prune-layers", "5", inputs.dense!, output, "Q4_K_M");
    expect(result.stderr).toBe("");
    expectGolden(output, c);
    expect(openGGUF(output).metadata.get("qwen3.block_count")).toEqual({ type: "uint32", value: 6 });
    const split = cases.find((x) => x.options?.keepSplit && x.options.pruneLayers)!;
    const folder = mkdtempSync(join(directory, "cli-pruned-split-"));
    expect(run("quantize", "--keep-split", "--prune-layers", "2,5", await inputOf(split), join(folder, "pruned"), split.type).code).toBe(0);
    expectGoldenShards(join(folder, "pruned"), split);
    const dry = run("quantize", "--dry-run", "--json", "--prune-layers", "0", inputs.dense!, "Q8_0");
    expect(JSON.parse(dry.stdout).tensors).toBe(90 - 11);
  });

  it("--prune-layers and --keep-split errors: one line, nothing written", async () => {
    const folder = mkdtempSync(join(directory, "prune-errors-"));
    const out = join(folder, "out.gguf");
    const errors: Array<[string[], RegExp]> = [
      [["--prune-layers", "8", inputs.dense!, out, "Q8_0"], /prune layers: the model has 8 layers \(0 to 7\), so there is no layer 8/],
      [["--prune-layers", "0,1,2,3,4,5,6,7", inputs.dense!, out, "Q8_0"], /prune layers: pruning all 8 layers would leave no model/],
      [["--prune-layers", "1,x", inputs.dense!, out, "Q8_0"], /--prune-layers takes layer numbers separated by commas, e\.g\. 20,21; got "x" in "1,x"/],
      [["--prune-layers=-1", inputs.dense!, out, "Q8_0"], /--prune-layers takes layer numbers .*got "-1"/],
      [["--prune-layers", "1,,2", inputs.dense!, out, "Q8_0"], /--prune-layers takes layer numbers .*got ""/],
    ];
    for (const [args, message] of errors) {
      const result = run("quantize", ...args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(result.stderr, args.join(" ")).toMatch(message);
      expect(readdirSync(folder), args.join(" ")).toEqual([]);
    }
    // shards of one tensor each: pruning layer 0 empties shards 2 to 12, which llama.cpp cannot write (it crashes)
    const shards = mkdtempSync(join(directory, "one-tensor-shards-"));
    const plan = await splitGGUF(openGGUF(inputs.dense!), join(shards, "dense"), { maxTensors: 1 });
    const result = run("quantize", "--keep-split", "--prune-layers", "0", plan.shards[0]!.path, out, "Q8_0");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/keeping the split: no tensor is left in shard 2 of 90 once the layers are pruned/);
    expect(readdirSync(folder)).toEqual([]);
  });

  it("--allow-requantize requantizes a quantized model", () => {
    const output = join(directory, "requantized.gguf");
    const result = run("quantize", "--allow-requantize", inputs["dense-q8_0"]!, output, "Q4_K_M");
    expect(result.code).toBe(0);
    expectGolden(output, cases.find((c) => c.model === "dense-q8_0" && c.type === "Q4_K_M")!);
  });
});

describe("quantizeModel's output file", () => {
  it("appears only once complete: a failure midway leaves no file and an existing one untouched", async () => {
    const folder = mkdtempSync(join(directory, "failure-"));
    const output = join(folder, "out.gguf");
    writeFileSync(output, "the previous file");
    let calls = 0;
    const failing = quantizeModel(inputs.dense!, output, {
      type: "Q4_K_M",
      quantizer: () => {
        if (++calls === 20) throw new Error("disk on fire");
        return false;
      },
    });
    await expect(failing).rejects.toThrow("disk on fire");
    expect(calls).toBe(20);
    expect(readdirSync(folder)).toEqual(["out.gguf"]);
    expect(readFileSync(output, "utf8")).toBe("the previous file");
  });

  it("refuses architectures whose llama.cpp rules it does not follow, naming the key", async () => {
    const { GGUFFile } = await import("@memra/gguf");
    const file = openGGUF(inputs.tiny!);
    const llama = new GGUFFile({ ...file, metadata: new Map([...file.metadata, ["general.architecture", { type: "string", value: "llama" }]]) });
    await expect(quantizeModel(llama, join(directory, "never.gguf"), { type: "Q8_0" })).rejects.toThrow(
      new QuantizationError("general.architecture is llama: memra quantizes qwen3 and qwen3moe models (llama.cpp's rules for those)"),
    );
    const noLayers = new Map(file.metadata);
    noLayers.delete("qwen3.block_count");
    await expect(quantizeModel(new GGUFFile({ ...file, metadata: noLayers }), join(directory, "never.gguf"), { type: "Q8_0" })).rejects.toThrow(
      /qwen3\.block_count is missing: llama\.cpp's quantization rules need it/,
    );
    expect(existsSync(join(directory, "never.gguf"))).toBe(false);
  });
});
