import { openGGUF } from "@memra/gguf";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { parseByteSize, parsePlacementArguments, ranges } from "../placement-arguments";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
let moe = "";
let dense = "";

function run(args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

beforeAll(async () => {
  moe = await syntheticModelFile(resolveOptions("tiny-moe", { weightType: "q8_0" }));
  dense = await syntheticModelFile(resolveOptions("tiny", { weightType: "f32" }));
});

describe("placement arguments", () => {
  it("parses sizes, layer counts and --cpu-moe, naming the option when malformed", () => {
    expect(parseByteSize("24GiB", "--gpu-mem")).toBe(24 * 2 ** 30);
    expect(parseByteSize("24GB", "--gpu-mem")).toBe(24e9);
    expect(parseByteSize("1.5g", "--gpu-mem")).toBe(1.5 * 2 ** 30);
    expect(parseByteSize("4096", "--gpu-mem")).toBe(4096);
    expect(() => parseByteSize("24 parsecs", "--gpu-mem")).toThrow(/--gpu-mem: "24 parsecs" is not a size/);
    const parsed = parsePlacementArguments({ "gpu-mem": "24GiB,12GiB", "gpu-layers": "30", "cpu-moe": "all" });
    expect(parsed).toMatchObject({ gpuMemory: [24 * 2 ** 30, 12 * 2 ** 30], gpuLayers: 30, gpuLayersGiven: true, cpuMoe: true });
    expect(parsePlacementArguments({})).toMatchObject({ gpuLayers: "auto", gpuLayersGiven: false, cpuMoe: undefined, gpuMemory: undefined });
    expect(parsePlacementArguments({ "cpu-moe": "8" }).cpuMoe).toBe(8);
    expect(parsePlacementArguments({ "gpu-layers": "all" }).gpuLayers).toBe(Number.MAX_SAFE_INTEGER); // llama.cpp's -ngl all: the plan takes every layer
    expect(() => parsePlacementArguments({ "gpu-layers": "-1" })).toThrow(/--gpu-layers must be auto, all or a non-negative integer/);
    expect(() => parsePlacementArguments({ "cpu-moe": "some" })).toThrow(/--cpu-moe must be all or a non-negative integer/);
    expect(ranges([0, 1, 2, 5, 7, 8])).toBe("0-2, 5, 7-8");
  });
});

describe("memra plan", () => {
  it("is listed in the usage and has help", () => {
    expect(run(["--help"]).stdout).toMatch(/\n {2}plan +where each layer would run/);
    const help = run(["plan", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--gpu-mem SIZE[,SIZE]");
  });

  it("places every layer on a declared GPU that holds the model, with the file's exact weight bytes, as JSON", () => {
    const result = run(["plan", "-m", moe, "--gpu-mem", "24GiB", "--ctx", "1024", "--json"]);
    expect(result.code).toBe(0);
    const plan = JSON.parse(result.stdout);
    expect(plan.layers.map((l: { device: string }) => l.device)).toEqual(["cuda:0", "cuda:0"]);
    expect(plan.outputDevice).toBe("cuda:0");
    const gpu = plan.devices.find((d: { name: string }) => d.name === "cuda:0");
    expect(gpu.weightBytes).toBe(openGGUF(moe).tensorBytes);
    // 2 layers × K and V × 1024 tokens × 32 values of f16
    expect(plan.kvBytes).toBe(2 * 2 * 1024 * 32 * 2);
    expect(plan.devices.find((d: { name: string }) => d.name === "cpu").totalBytes).toBe(0);
  });

  it("keeps experts on the CPU with --cpu-moe and prints a readable plan", () => {
    const result = run(["plan", "-m", moe, "--gpu-mem", "24GiB", "--ctx", "1024", "--cpu-moe", "1"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("qwen3moe, 2 layers; 2 on GPUs");
    expect(result.stdout).toMatch(/\n {2}0 +cuda:0, experts on cpu\n {2}1 +cuda:0\n/);
    expect(result.stdout).toMatch(/\ncuda:0 +0-1 +1 /);
    expect(result.stdout).toMatch(/\ncpu +- +0 /);
    expect(result.stdout).toContain("KV cache: 1024 tokens × 1 sequence, f16: 256 KiB (128 KiB per layer)");
  });

  it("splits layers over two declared GPUs", () => {
    const plan = JSON.parse(run(["plan", "-m", moe, "--gpu-mem", "2GiB,2GiB", "--ctx", "256", "--json"]).stdout);
    expect(plan.layers.map((l: { device: string }) => l.device)).toEqual(["cuda:0", "cuda:1"]);
    expect(plan.embeddingDevice).toBe("cuda:0");
    expect(plan.outputDevice).toBe("cuda:1");
  });

  it("fails before loading, naming the bytes, when forced layers or the context do not fit", () => {
    // --ctx beyond the model's 4096 tokens is cut to them: KV of one layer = 2 × 4096 × 64 sequences × 64 bytes
    const small = run(["plan", "-m", moe, "--gpu-mem", "300MiB", "--gpu-layers", "1", "--ctx", "65536", "--parallel", "64"]);
    expect(small.code).toBe(1);
    expect(small.stderr).toMatch(/^memra plan: 1 of 2 layers on cuda:0 do not fit: cuda:0 needs [\d.]+ MiB \(weights [\d.]+ MiB, KV 32\.0 MiB, scratch [\d.]+ MiB\) but has 44\.0 MiB\n$/);
    const huge = run(["plan", "-m", moe, "--ctx", "4096", "--parallel", "100000", "--cpu-mem", "1GiB"]);
    expect(huge.code).toBe(1);
    expect(huge.stderr).toContain("memra plan: the model does not fit at 4096 tokens × 100000 sequences (KV cache 97.7 GiB f16");
    expect(huge.stderr).toContain("but has 1.00 GiB");
    const none = run(["plan", "-m", moe, "--device", "cpu", "--gpu-layers", "1"]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("1 GPU layers requested, but there is no GPU");
  });
});

describe("placement options of the model commands", () => {
  it("are in the help of generate, chat, serve and bench", () => {
    for (const command of ["generate", "chat", "serve", "bench"]) {
      const help = run([command, "--help"]).stdout;
      expect(help, command).toContain("--gpu-layers N|auto");
      expect(help, command).toContain("--cpu-moe N|all");
      expect(help, command).toContain("--gpu-mem SIZE[,SIZE]");
    }
  });

  it("generate runs split between the native CPU and the reference backend, greedy tokens as on the reference alone", () => {
    const args = ["generate", "-m", dense, "-p", "The quick brown fox", "-n", "6", "--temp", "0", "--json"];
    const split = run([...args, "--device", "cpu+reference", "--gpu-layers", "1"]);
    expect(split.code, split.stderr).toBe(0);
    expect(split.stderr).toContain("memra: cpu layers 1, reference layers 0");
    const alone = run([...args, "--device", "reference"]);
    expect(alone.code, alone.stderr).toBe(0);
    expect(JSON.parse(split.stdout).tokens).toEqual(JSON.parse(alone.stdout).tokens);
    expect(JSON.parse(split.stdout).tokens).toHaveLength(6);
  });

  it("rejects GPU options on a host-only device, and fails before loading when the context does not fit", () => {
    const cpu = run(["generate", "-m", dense, "-p", "Hi", "-n", "1", "--device", "reference", "--gpu-layers", "2"]);
    expect(cpu.code).toBe(1);
    expect(cpu.stderr).toContain("--gpu-layers and --gpu-mem need a GPU; --device reference has none");
    const full = run(["generate", "-m", dense, "-p", "Hi", "-n", "1", "--device", "reference", "--cpu-mem", "1MiB"]);
    expect(full.code).toBe(1);
    expect(full.stderr).toMatch(/^memra generate: the model does not fit at 4096 tokens × 1 sequence .*reference needs [\d.]+ MiB .* but has 1\.00 MiB\n$/);
  });
});
