import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { deviceTargets, formatTargets, readBenches } from "./targets";

describe("the device run's target report", () => {
  const benches = {
    "qwen3-0.6b-q8_0": { tg128: 1200, pp512: 30000, batchSpeedup: 18.5 },
    "qwen3-0.6b-q8_0-short": { tg128: 1250 },
    "qwen3-0.6b-q8_0-no-split": { tg128: 1000 },
    "qwen3-0.6b-q8_0-qk-apart": { tg128: 1300 },
    "qwen3-8b-shape-q8_0-short": { tg128Scaled: 400 },
    "qwen3-8b-shape-q8_0-no-repack": { tg128Scaled: 300 },
    "qwen3-8b-shape-q8_0": { tg128Scaled: 384.9, pp512Scaled: 12000, batchSpeedup: 30, tg128_batch64Scaled: 4000 },
    "qwen3-8b-shape-q8_0-int8-pipeline": { pp512Scaled: 15000, tg128_batch64Scaled: 3000 },
    "torch-qwen3-0.6b": { tg128: 400, pp512: "n/a" },
    ceilings: { copyGBps: 4321.4, readGBps: 4010, bf16Tflops: "n/a" },
    "qwen3-8b-shape-q8_0-profile": {
      profile: {
        steps: 4,
        stepUs: 2500,
        kernels: Array.from({ length: 10 }, (_, i) => ({ kernel: `k${i}`, usPerStep: 100 - i, share: (100 - i) / 2500, launchesPerStep: 36 })),
      },
      batchProfile: { steps: 4, stepUs: 9000, kernels: [{ kernel: "gemm", usPerStep: 6000, share: 0.75, launchesPerStep: 144 }] },
    },
  };

  it("says which targets a run meets, from the figures it has, and what it lacks", () => {
    const report = deviceTargets(benches);
    const byField = (bench: string, field: string) => report.targets.find((t) => t.bench === bench && t.field === field)!;
    expect(byField("qwen3-0.6b-q8_0", "tg128")).toMatchObject({ measured: 1200, met: true });
    expect(byField("qwen3-8b-shape-q8_0", "tg128Scaled")).toMatchObject({ measured: 384.9, met: false }); // just under 385
    expect(byField("qwen3-8b-shape-q8_0", "pp512Scaled")).toMatchObject({ measured: 12000, met: true });
    expect(byField("qwen3-0.6b-q8_0", "batchSpeedup")).toMatchObject({ measured: 18.5, met: false });
    expect(byField("qwen3-8b-shape-q8_0", "batchSpeedup")).toMatchObject({ measured: 30, met: null }); // reported only
    expect(byField("qwen3-30b-a3b-scaled-q8_0", "tg128")).toMatchObject({ measured: null, met: null }); // not run
    expect(report.againstTorch.find((r) => r.shape === "qwen3-0.6b" && r.field === "tg128")!.ratio).toBe(3);
    expect(report.againstTorch.find((r) => r.shape === "qwen3-0.6b" && r.field === "pp512")!.ratio).toBeNull(); // not a number
    // variants against the default settings after the same 16-token prompt
    const variant = (shape: string, name: string) => report.variants.find((v) => v.shape === shape && v.variant === name)!.ratio;
    expect(variant("0.6B", "no-split")).toBe(0.8);
    expect(variant("0.6B", "qk-apart")).toBe(1.04);
    expect(variant("0.6B", "no-pdl")).toBeNull();
    expect(variant("0.6B", "no-repack")).toBeNull();
    expect(variant("8B", "no-repack")).toBe(0.75); // the 8B shape's own baseline (tg128Scaled)
    // an opt-in kernel's prefill and batched decode against the targets' bench of the same shape
    const prefill = (shape: string, field: string) => report.prefillVariants.find((v) => v.shape === shape && v.variant === "int8-pipeline" && v.field === field)!.ratio;
    expect(prefill("8B", "pp512Scaled")).toBe(1.25);
    expect(prefill("8B", "tg128_batch64Scaled")).toBe(0.75);
    expect(prefill("0.6B", "pp512")).toBeNull(); // not run
    expect(report.profiles).toHaveLength(2);
    expect(report.profiles[0]!.top.map((k) => k.kernel)).toEqual(["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"]);
    expect(report.profiles[1]).toMatchObject({ bench: "qwen3-8b-shape-q8_0-profile (batched decode)", stepUs: 9000 });
    const text = formatTargets(report);
    expect(text).toContain("MET  Qwen3-0.6B-shaped q8_0 tg128 ≥ 1,000 tokens/s (batch 1): 1200.0");
    expect(text).toContain("NOT  Qwen3-8B-shaped q8_0 tg128 ≥ 385 tokens/s: 384.9");
    expect(text).toContain("profile qwen3-8b-shape-q8_0-profile: 2500 µs a step");
    expect(text).toContain("  8B no-repack: 0.750");
    expect(text).toContain("  8B int8-pipeline pp512Scaled: 1.250");
    expect(report.ceilings).toEqual({ copyGBps: 4321.4, readGBps: 4010, bf16Tflops: null });
    expect(text).toContain("ceilings (PyTorch): copy 4321 GB/s, read 4010 GB/s, bf16 — TFLOP/s");
    expect(formatTargets(deviceTargets({}))).toContain("ceilings (PyTorch): copy — GB/s, read — GB/s, bf16 — TFLOP/s");
  });

  it("reads bench-NAME.json files, leaving out one cut off mid-write", () => {
    const directory = mkdtempSync(join(tmpdir(), "memra-targets-"));
    writeFileSync(join(directory, "bench-qwen3-0.6b-q8_0.json"), JSON.stringify({ tg128: 999 }));
    writeFileSync(join(directory, "bench-qwen3-8b-shape-q8_0.json"), '{"tg128Scaled": 4');
    writeFileSync(join(directory, "summary.json"), "{}");
    const read = readBenches(directory);
    expect(read).toEqual({ "qwen3-0.6b-q8_0": { tg128: 999 } });
    expect(deviceTargets(read).targets[0]).toMatchObject({ measured: 999, met: false });
    expect(readBenches(join(directory, "missing"))).toEqual({});
  });
});
