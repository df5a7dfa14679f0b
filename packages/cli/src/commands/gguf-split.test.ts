/**
 * Split models against llama.cpp: split-goldens.json (tools/llamacpp/split-goldens.mjs) records the
 * shards `memra gguf-split` wrote, which llama.cpp loaded from the first shard (and from the merged
 * file) computing the unsplit model's distribution. Here: memra still writes those exact shards, and
 * memra loading them computes llama.cpp's distribution.
 */
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Backend, computeLogprobs, loadModel } from "@memra/core";
import { PROBABILITY_BOUNDS } from "@memra/core/internal";
import { CpuBackend } from "@memra/cpu-ffi";
import { GGUFSplitFile, SPLIT_KEYS, openGGUF, openGGUFModel, planSplit, writeGGUF } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import goldens from "../__fixtures__/split-goldens.json";

interface GoldenModel {
  id: string;
  preset: PresetName;
  options: Partial<SyntheticModelOptions>;
  input: string;
  prompt: number[];
  top: Array<[number, number]>;
  margin: number;
  splits: Array<{ args: string[]; shards: Array<{ name: string; sha256: string }>; merged: string }>;
}

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-split-"));
const models = goldens.models as GoldenModel[];
const inputs: Record<string, string> = {};
const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(async () => {
  for (const m of models) inputs[m.id] = await syntheticModelFile(resolveOptions(m.preset, m.options));
}, 120_000);

function run(...args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

/** memra's next-token top-5 after the prompt, as probabilities: the native CPU backend (else the reference) with an f32 KV cache, as llama.cpp's reference context. */
async function memraTop(path: string, prompt: number[]): Promise<Array<[number, number]>> {
  let backend: Backend | undefined;
  try {
    backend = CpuBackend.create({ threads: 2 });
  } catch (error) {
    if (process.env.MEMRA_REQUIRE_NATIVE === "1") throw error;
  }
  const model = loadModel(path, { kvType: "f32", ...(backend ? { backend } : {}) });
  try {
    return computeLogprobs(model, prompt, 5).positions.at(-1)!.top.map((c) => [c.id, Math.exp(c.logprob)]);
  } finally {
    model.dispose();
  }
}

// The golden suite's bounds for the models' weight types (f16 2e-3, q8_0 3e-2): llama.cpp's f16 and
// q8_0 activation roundings flip differently in a few places (golden-suite.ts). Measured on the
// native CPU backend: f16 7.5e-4, q8_0 MoE 5e-8.
const bound = (m: GoldenModel) => PROBABILITY_BOUNDS[m.options.weightType!]!.max;

describe.each(models.map((m) => [m.id, m] as const))("%s: split as llama.cpp loaded it", (_id, m) => {
  it("is the model the fixture was recorded from", () => {
    expect(sha256(inputs[m.id]!)).toBe(m.input);
  });

  it.each(m.splits.map((s) => [s.args.join(" "), s] as const))("memra gguf-split %s writes the shards llama.cpp loaded; memra computes its distribution from them", async (_args, s) => {
    const folder = mkdtempSync(join(directory, `${m.id}-`));
    const result = run("gguf-split", ...s.args, inputs[m.id]!, join(folder, "model"));
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`wrote ${s.shards.length} shards, \\d+ tensors\\n$`));
    const names = readdirSync(folder).sort();
    expect(names).toEqual(s.shards.map((shard) => shard.name));
    for (const shard of s.shards) expect(sha256(join(folder, shard.name)), shard.name).toBe(shard.sha256);

    const top = await memraTop(join(folder, names[0]!), m.prompt);
    if (m.margin >= 0.1) expect(top[0]![0]).toBe(m.top[0]![0]);
    for (const [id, p] of m.top) {
      const ours = top.find(([candidate]) => candidate === id);
      expect(ours, `token ${id}`).toBeDefined();
      expect(Math.abs(ours![1] - p), `token ${id}`).toBeLessThan(bound(m));
    }

    // --merge: the file llama.cpp loaded, with the original's tensors
    const merged = join(folder, "merged.gguf");
    expect(run("gguf-split", "--merge", join(folder, names[0]!), merged).code).toBe(0);
    expect(sha256(merged)).toBe(s.merged);
    const original = openGGUF(inputs[m.id]!);
    const back = openGGUF(merged);
    expect(back.tensors.map((t) => t.name)).toEqual(original.tensors.map((t) => t.name));
    for (const t of original.tensors) expect(Buffer.from(back.tensorData(t.name)).equals(Buffer.from(original.tensorData(t))), t.name).toBe(true);
    expect(back.getNumber(SPLIT_KEYS.count)).toBe(0);
  });
});

describe("openGGUFModel", () => {
  const m = models[0]!;
  let folder: string;
  let first: string;
  beforeAll(() => {
    folder = mkdtempSync(join(directory, "open-"));
    expect(run("gguf-split", "--split-max-tensors", "10", inputs[m.id]!, join(folder, "model")).code).toBe(0);
    first = join(folder, readdirSync(folder).sort()[0]!);
  });

  it("reads every shard's tensors as the unsplit file's, and counts every shard's bytes", () => {
    const split = openGGUFModel(first);
    const original = openGGUF(inputs[m.id]!);
    expect(split).toBeInstanceOf(GGUFSplitFile);
    expect(split.paths).toHaveLength(5);
    expect(split.tensors.map((t) => t.name)).toEqual(original.tensors.map((t) => t.name));
    for (const t of original.tensors) expect(Buffer.from(split.tensorData(t.name)).equals(Buffer.from(original.tensorData(t)))).toBe(true);
    expect(split.fileBytes).toBe(split.paths.reduce((sum, p) => sum + readFileSync(p).byteLength, 0));
    expect(openGGUFModel(inputs[m.id]!)).not.toBeInstanceOf(GGUFSplitFile);
  });

  it("refuses a later shard, a missing or misnumbered shard, a duplicated tensor and a wrong tensor count, naming the file", () => {
    const shard = (i: number) => join(folder, `model-0000${i}-of-00005.gguf`);
    expect(() => openGGUFModel(shard(3))).toThrow(`${shard(3)} is shard 3 of 5 of a split model: open the first shard (${shard(1)})`);
    const result = run("generate", "-m", shard(2), "-p", "x", "-n", "1");
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`memra generate: ${shard(2)} is shard 2 of 5 of a split model: open the first shard (${shard(1)})\n`);

    // a shard missing
    const moved = join(folder, "away.gguf");
    renameSync(shard(4), moved);
    expect(() => openGGUFModel(first)).toThrow(new RegExp(`^shard 4 of 5: cannot open ${shard(4)}`));
    renameSync(moved, shard(4));

    // shard 3's file in shard 4's place: split.no says 3
    const saved = join(folder, "saved.gguf");
    copyFileSync(shard(4), saved);
    copyFileSync(shard(3), shard(4));
    expect(() => openGGUFModel(first)).toThrow(`${shard(4)} says it is shard 3, expected 4`);

    // shard 3's tensors in a file numbered 4: every one of them twice
    const three = openGGUF(shard(3));
    const renumbered = new Map(three.metadata);
    renumbered.set(SPLIT_KEYS.index, { type: "uint16", value: 3 });
    writeFileSync(shard(4), writeGGUF({ metadata: renumbered, tensors: three.tensors.map((t) => ({ name: t.name, type: t.type, shape: t.shape, data: three.tensorData(t) })) }));
    expect(() => openGGUFModel(first)).toThrow(new RegExp(`tensor "${three.tensors[0]!.name.replace(/\./g, "\\.")}" is in two shards`));

    // shard 4 without its tensors: 80 of 90
    writeFileSync(shard(4), writeGGUF({ metadata: renumbered, tensors: [] }));
    expect(() => openGGUFModel(first)).toThrow(/split\.tensors\.count is \d+ but the 5 shards hold \d+ tensors/);
    copyFileSync(saved, shard(4));
    expect(openGGUFModel(first).tensors).toHaveLength(openGGUF(inputs[m.id]!).tensors.length);
  });

  it("memra inspect names a shard; gguf-split --dry-run writes nothing; bad sizes are refused", () => {
    expect(run("inspect", first).stdout).toMatch(/^shard 1 of 5 of a split model \(\d+ tensors in all\)/m);
    const dry = mkdtempSync(join(directory, "dry-"));
    const result = run("gguf-split", "--dry-run", "--split-max-size", "2M", inputs[m.id]!, join(dry, "x"));
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/would write \d+ shards/);
    expect(readdirSync(dry)).toEqual([]);
    for (const [args, message] of [
      [["--split-max-size", "2K"], /--split-max-size takes a whole number with M or G/],
      [["--split-max-tensors", "0"], /--split-max-tensors must be a whole number of at least 1, got "0"/],
      [["--split-max-tensors", "4", "--split-max-size", "1M"], /give --split-max-tensors or --split-max-size, not both/],
      [["--merge"], /is not a split model/],
    ] as const) {
      const r = run("gguf-split", ...args, inputs[m.id]!, join(dry, "y"));
      expect(r.code, args.join(" ")).toBe(1);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
    expect(readdirSync(dry)).toEqual([]);
    // a size below the first tensor's: gguf-split's "one of splits have 0 tensors"
    expect(() => planSplit(openGGUF(inputs[m.id]!), join(dry, "z"), { maxBytes: 1000 })).toThrow(/a shard would hold no tensor \(maxBytes 1000 is below the first tensor's \d+ bytes\)/);
  });
});
