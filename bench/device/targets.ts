/**
 * Issue 8's targets from a device run's benchmark files (bench/device/run.sh writes them to $OUT as
 * bench-NAME.json): each target with its measured figure and whether it is met, the side-by-side
 * ratios against PyTorch, what each variant (a feature turned off, or a fusion that is off by default turned on) does to a shape's decode (and
 * what an opt-in kernel does to its prefill and batched decode), and the
 * kernels that take most of a profiled decode step. run.sh ends with
 *
 *   bun bench/device/targets.ts $OUT     # prints the report, writes $OUT/targets.json
 *
 * A figure a run did not produce (a step cut by the budget, a failed bench) is null, its target
 * unmet.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

type Bench = Record<string, unknown>;

export interface Target {
  readonly target: string;
  readonly bench: string;
  readonly field: string;
  readonly minimum?: number;
  readonly measured: number | null;
  /** minimum given: measured ≥ minimum; else reported only (null). */
  readonly met: boolean | null;
}

export interface TargetReport {
  readonly targets: Target[];
  /** Our tokens/s over PyTorch's (bf16, transformers) on the same shape. */
  readonly againstTorch: { shape: string; field: string; ratio: number | null }[];
  /** A shape's decode (tg128 after 16 prompt tokens) in a variant, over the default's: < 1 means the default's choice is the faster. */
  readonly variants: { shape: string; variant: string; ratio: number | null }[];
  /** A shape's prefill (pp512) and batched decode (64 sequences) in a variant, over the default's (the targets' bench): > 1 means the variant is the faster. */
  readonly prefillVariants: { shape: string; variant: string; field: string; ratio: number | null }[];
  /** The largest kernels of each profiled decode step (share of the step). */
  readonly profiles: { bench: string; stepUs: number; top: { kernel: string; usPerStep: number; share: number; launchesPerStep: number }[] }[];
  /** The card's ceilings through PyTorch (bench/device/ceilings.py), null where not measured. */
  readonly ceilings: { copyGBps: number | null; readGBps: number | null; bf16Tflops: number | null };
}

const TARGETS: readonly Omit<Target, "measured" | "met">[] = [
  { target: "Qwen3-0.6B-shaped q8_0 tg128 ≥ 1,000 tokens/s (batch 1)", bench: "qwen3-0.6b-q8_0", field: "tg128", minimum: 1000 },
  { target: "Qwen3-8B-shaped q8_0 tg128 ≥ 385 tokens/s", bench: "qwen3-8b-shape-q8_0", field: "tg128Scaled", minimum: 385 },
  { target: "Qwen3-8B-shaped q8_0 pp512 ≥ 10,000 tokens/s", bench: "qwen3-8b-shape-q8_0", field: "pp512Scaled", minimum: 10000 },
  { target: "batched decode of 64 sequences ≥ 20× batch 1 (0.6B)", bench: "qwen3-0.6b-q8_0", field: "batchSpeedup", minimum: 20 },
  { target: "batched decode of 64 sequences, × batch 1 (8B shape)", bench: "qwen3-8b-shape-q8_0", field: "batchSpeedup" },
  { target: "Qwen3-30B-A3B (scaled) q8_0 tg128, reported", bench: "qwen3-30b-a3b-scaled-q8_0", field: "tg128" },
  { target: "Qwen3-30B-A3B (scaled) q8_0 pp512, reported", bench: "qwen3-30b-a3b-scaled-q8_0", field: "pp512" },
];

/** The variants each shape's decode is timed with (bench `${prefix}-${variant}`, against `${prefix}-short`). */
const VARIANTS = [
  {
    shape: "0.6B",
    prefix: "qwen3-0.6b-q8_0",
    field: "tg128",
    variants: ["no-graphs", "no-pdl", "late-weights", "no-split", "qk-apart", "swiglu-fused", "norms-fused", "input-nodes", "no-repack", "no-wide"],
  },
  // where decode is bound by the weights' bandwidth, not by launches
  { shape: "8B", prefix: "qwen3-8b-shape-q8_0", field: "tg128Scaled", variants: ["no-repack", "no-wide"] },
] as const;

/** The variants each shape's prefill and batched decode are timed with (bench `${prefix}-${variant}`, the same arguments as `${prefix}`). */
const PREFILL_VARIANTS = [
  { shape: "0.6B", prefix: "qwen3-0.6b-q8_0", fields: ["pp512", "tg128_batch64"], variants: ["int8-pipeline"] },
  { shape: "8B", prefix: "qwen3-8b-shape-q8_0", fields: ["pp512Scaled", "tg128_batch64Scaled"], variants: ["int8-pipeline"] },
  // its experts' grouped GEMMs on 64-row tiles
  { shape: "30B-A3B", prefix: "qwen3-30b-a3b-scaled-q8_0", fields: ["pp512"], variants: ["int8-pipeline"] },
] as const;

const number = (bench: Bench | undefined, field: string): number | null => {
  const value = bench?.[field];
  return typeof value === "number" && Number.isFinite(value) ? value : null;
};

/** The report of the benches, by name (bench-NAME.json without its affixes). */
export function deviceTargets(benches: Readonly<Record<string, Bench>>): TargetReport {
  const targets = TARGETS.map((t) => {
    const measured = number(benches[t.bench], t.field);
    return { ...t, measured, met: t.minimum === undefined ? null : measured !== null && measured >= t.minimum };
  });
  const ratio = (a: number | null, b: number | null) => (a !== null && b !== null && b > 0 ? a / b : null);
  const againstTorch = [
    { shape: "qwen3-0.6b", ours: "qwen3-0.6b-q8_0", torch: "torch-qwen3-0.6b", field: "tg128" },
    { shape: "qwen3-0.6b", ours: "qwen3-0.6b-q8_0", torch: "torch-qwen3-0.6b", field: "pp512" },
    { shape: "qwen3-8b-shape", ours: "qwen3-8b-shape-q8_0", torch: "torch-qwen3-8b-shape", field: "tg128Scaled" },
    { shape: "qwen3-8b-shape", ours: "qwen3-8b-shape-q8_0", torch: "torch-qwen3-8b-shape", field: "pp512Scaled" },
  ].map(({ shape, ours, torch, field }) => ({ shape, field, ratio: ratio(number(benches[ours], field), number(benches[torch], field)) }));
  // the variants decode 128 tokens after a 16-token prompt, as the default settings do in
  // PREFIX-short (the targets' benches decode after 512)
  const variants = VARIANTS.flatMap(({ shape, prefix, field, variants: names }) => {
    const base = number(benches[`${prefix}-short`], field);
    return names.map((variant) => ({ shape, variant, ratio: ratio(number(benches[`${prefix}-${variant}`], field), base) }));
  });
  const prefillVariants = PREFILL_VARIANTS.flatMap(({ shape, prefix, fields, variants: names }) =>
    names.flatMap((variant) =>
      fields.map((field) => ({ shape, variant, field, ratio: ratio(number(benches[`${prefix}-${variant}`], field), number(benches[prefix], field)) })),
    ),
  );
  // a bench's decode profile, and its prefill and batched-decode ones (forward.bench.ts --profile)
  const profiles = Object.entries(benches).flatMap(([name, bench]) =>
    (["profile", "prefillProfile", "batchProfile"] as const)
      .filter((field) => typeof bench[field] === "object" && bench[field] !== null)
      .map((field) => {
        const profile = bench[field] as { stepUs: number; kernels: { kernel: string; usPerStep: number; share: number; launchesPerStep: number }[] };
        const label = field === "profile" ? name : `${name} (${field === "prefillProfile" ? "prefill" : "batched decode"})`;
        return { bench: label, stepUs: profile.stepUs, top: profile.kernels.slice(0, 8) };
      }),
  );
  const ceilings = { copyGBps: number(benches.ceilings, "copyGBps"), readGBps: number(benches.ceilings, "readGBps"), bf16Tflops: number(benches.ceilings, "bf16Tflops") };
  return { targets, againstTorch, variants, prefillVariants, profiles, ceilings };
}

/** The report as lines of text. */
export function formatTargets(report: TargetReport): string {
  const figure = (value: number | null, digits = 1) => (value === null ? "—" : value.toFixed(digits));
  const lines = ["issue 8 targets:"];
  for (const t of report.targets) lines.push(`  ${t.met === null ? "    " : t.met ? "MET " : "NOT "} ${t.target}: ${figure(t.measured)} (${t.bench}.${t.field})`);
  const c = report.ceilings;
  lines.push(`ceilings (PyTorch): copy ${figure(c.copyGBps, 0)} GB/s, read ${figure(c.readGBps, 0)} GB/s, bf16 ${figure(c.bf16Tflops, 0)} TFLOP/s`);
  lines.push("against PyTorch (ours / theirs):");
  for (const r of report.againstTorch) lines.push(`  ${r.shape} ${r.field}: ${figure(r.ratio, 2)}×`);
  lines.push("prefill and batched decode of a variant / default (> 1: the variant is the faster):");
  for (const v of report.prefillVariants) lines.push(`  ${v.shape} ${v.variant} ${v.field}: ${figure(v.ratio, 3)}`);
  lines.push("tg128 of a variant / default (< 1: the default's choice is the faster):");
  for (const v of report.variants) lines.push(`  ${v.shape} ${v.variant}: ${figure(v.ratio, 3)}`);
  for (const p of report.profiles) {
    lines.push(`profile ${p.bench}: ${p.stepUs.toFixed(0)} µs a step`);
    for (const k of p.top) lines.push(`  ${(k.share * 100).toFixed(1).padStart(5)}%  ${k.usPerStep.toFixed(1).padStart(8)} µs  ${String(k.launchesPerStep).padStart(5)}×  ${k.kernel}`);
  }
  return lines.join("\n");
}

/** bench-NAME.json files of a directory, by NAME (unreadable ones left out). */
export function readBenches(directory: string): Record<string, Bench> {
  const benches: Record<string, Bench> = {};
  if (!existsSync(directory)) return benches;
  for (const file of readdirSync(directory)) {
    const match = /^bench-(.+)\.json$/.exec(file);
    if (!match) continue;
    try {
      benches[match[1]!] = JSON.parse(readFileSync(join(directory, file), "utf8")) as Bench;
    } catch {
      // a bench cut off mid-write: its figures are missing from the report
    }
  }
  return benches;
}

if (import.meta.main) {
  const directory = process.argv[2] ?? "bench/device/out";
  const report = deviceTargets(readBenches(directory));
  writeFileSync(join(directory, "targets.json"), `${JSON.stringify(report)}\n`);
  console.log(formatTargets(report));
}
