#!/usr/bin/env bun
/**
 * llama.cpp's Mirostat, Mirostat 2.0 and top-nσ samplers on seeded logit vectors, as golden fixtures
 * for @memra/sampler: node-llama-cpp 3.21.1's prebuilt libllama (linux-x64) called through bun:ffi
 * (llama_sampler_init_mirostat / _mirostat_v2 / _top_n_sigma / _temp, llama_sampler_apply on a
 * llama_token_data_array built in memory, llama_sampler_accept, llama_sampler_free).
 *
 *   bun tools/llamacpp/sampler-goldens.ts   (from the repository root)
 *
 * Writes packages/sampler/src/__fixtures__/llamacpp-sampler-goldens.json. The logits are not stored:
 * the tests rebuild them from the same settings (packages/sampler/src/__fixtures__/golden-logits.ts).
 * - top-nσ: per case and n, how many candidates keep a finite logit (the survivors are the logits at
 *   or above a threshold, so the count fixes the set), the lowest survivor's id and the highest
 *   masked one's, and the survivors' ids when there are few.
 * - Mirostat (v1, v2), llama.cpp's chain with Mirostat (temperature → mirostat): at each of the
 *   steps, each on fresh logits, the token llama.cpp picked, the candidates it kept (cur_p->size
 *   after apply: v1's k, v2's cut) and mu after the update (read from the sampler's context struct;
 *   its layout is checked against tau and eta before the first step).
 */
import { CString, FFIType, dlopen, ptr, read, toArrayBuffer } from "bun:ffi";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type LogitsSpec, logitsStream } from "../../packages/sampler/src/__fixtures__/golden-logits";

const BINS = join(import.meta.dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
const OUTPUT = join(import.meta.dir, "..", "..", "packages/sampler/src/__fixtures__/llamacpp-sampler-goldens.json");

const library = dlopen(join(BINS, "libllama.v0.4.0.so"), {
  llama_sampler_init_top_n_sigma: { args: [FFIType.f32], returns: FFIType.ptr },
  llama_sampler_init_temp: { args: [FFIType.f32], returns: FFIType.ptr },
  llama_sampler_init_mirostat: { args: [FFIType.i32, FFIType.u32, FFIType.f32, FFIType.f32, FFIType.i32], returns: FFIType.ptr },
  llama_sampler_init_mirostat_v2: { args: [FFIType.u32, FFIType.f32, FFIType.f32], returns: FFIType.ptr },
  llama_sampler_name: { args: [FFIType.ptr], returns: FFIType.ptr },
  llama_sampler_apply: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.void },
  llama_sampler_accept: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.void },
  llama_sampler_free: { args: [FFIType.ptr], returns: FFIType.void },
});
const llama = library.symbols;
type Pointer = NonNullable<ReturnType<typeof llama.llama_sampler_init_temp>>;

/** llama_token_data { int32 id; float logit; float p; } (12 bytes) */
const TOKEN_DATA_BYTES = 12;

/**
 * A llama_token_data_array { llama_token_data * data; size_t size; int64 selected; bool sorted; }
 * (32 bytes on x86-64) over the logits, ids 0..n-1, unsorted, as common_sampler's set_logits builds it.
 */
class TokenDataArray {
  readonly data: Uint8Array;
  readonly header = new Uint8Array(32);
  private readonly headerView = new DataView(this.header.buffer);

  constructor(logits: Float32Array) {
    this.data = new Uint8Array(logits.length * TOKEN_DATA_BYTES);
    const view = new DataView(this.data.buffer);
    for (let i = 0; i < logits.length; i++) {
      view.setInt32(i * TOKEN_DATA_BYTES, i, true);
      view.setFloat32(i * TOKEN_DATA_BYTES + 4, logits[i]!, true);
      view.setFloat32(i * TOKEN_DATA_BYTES + 8, 0, true);
    }
    this.headerView.setBigUint64(0, BigInt(ptr(this.data)), true);
    this.headerView.setBigUint64(8, BigInt(logits.length), true);
    this.headerView.setBigInt64(16, -1n, true);
    this.header[24] = 0;
  }

  get pointer(): Pointer {
    return ptr(this.header) as Pointer;
  }

  get size(): number {
    return Number(this.headerView.getBigUint64(8, true));
  }

  get selected(): number {
    return Number(this.headerView.getBigInt64(16, true));
  }

  /** The entries now live (the samplers may move the data pointer). */
  entries(): { id: number; logit: number; p: number }[] {
    const address = Number(this.headerView.getBigUint64(0, true));
    const bytes = new DataView(toArrayBuffer(address as Pointer, 0, this.size * TOKEN_DATA_BYTES));
    return Array.from({ length: this.size }, (_, i) => ({
      id: bytes.getInt32(i * TOKEN_DATA_BYTES, true),
      logit: bytes.getFloat32(i * TOKEN_DATA_BYTES + 4, true),
      p: bytes.getFloat32(i * TOKEN_DATA_BYTES + 8, true),
    }));
  }
}

function samplerName(sampler: Pointer): string {
  return new CString(llama.llama_sampler_name(sampler) as Pointer).toString();
}

/** The sampler's context (struct llama_sampler { iface *; ctx *; }). */
const contextOf = (sampler: Pointer) => read.ptr(sampler, 8) as Pointer;

/**
 * Byte offsets of tau, eta and mu in llama_sampler_mirostat { int32 n_vocab; uint32 seed, seed_cur;
 * float tau, eta; int32 m; float mu; mt19937 rng; } and llama_sampler_mirostat_v2 { uint32 seed,
 * seed_cur; float tau, eta, mu; mt19937 rng; } (src/llama-sampler.cpp of this release).
 */
const LAYOUT = { 1: { tau: 12, eta: 16, mu: 24 }, 2: { tau: 8, eta: 12, mu: 16 } } as const;

// --- top-nσ

interface TopNSigmaCase {
  readonly id: string;
  readonly logits: LogitsSpec;
}

const TOP_N_SIGMA_CASES: TopNSigmaCase[] = [
  { id: "normal-scale2-5000", logits: { kind: "normal", vocabularySize: 5000, seed: 11, parameter: 2 } },
  { id: "zipf-1.1-3000", logits: { kind: "zipf", vocabularySize: 3000, seed: 12, parameter: 1.1 } },
  { id: "peaked-1000", logits: { kind: "peaked", vocabularySize: 1000, seed: 13 } },
  { id: "flat-2000", logits: { kind: "flat", vocabularySize: 2000, seed: 14, parameter: 0.5 } },
  { id: "normal-banned-4096", logits: { kind: "normal", vocabularySize: 4096, seed: 15, parameter: 1, banned: 0.2 } },
];
const SIGMAS = [0.5, 1, 1.5, 2, 3, 5];
const LISTED_SURVIVORS = 40;

function topNSigmaGoldens() {
  return TOP_N_SIGMA_CASES.map(({ id, logits: spec }) => {
    const logits = logitsStream(spec)();
    const results = SIGMAS.map((n) => {
      const array = new TokenDataArray(logits);
      const sampler = llama.llama_sampler_init_top_n_sigma(n) as Pointer;
      if (samplerName(sampler) !== "top-n-sigma") throw new Error(`unexpected sampler ${samplerName(sampler)}`);
      llama.llama_sampler_apply(sampler, array.pointer);
      llama.llama_sampler_free(sampler);
      const entries = array.entries();
      if (entries.length !== logits.length) throw new Error("top-n-sigma changed the array's size");
      entries.forEach((entry, i) => {
        if (entry.id !== i) throw new Error("top-n-sigma moved candidates");
        if (entry.logit !== -Infinity && entry.logit !== logits[i]) throw new Error("top-n-sigma changed a kept logit");
      });
      const survivors = entries.filter((entry) => entry.logit !== -Infinity).sort((a, b) => b.logit - a.logit);
      const masked = entries.filter((entry) => entry.logit === -Infinity && logits[entry.id] !== -Infinity).sort((a, b) => logits[b.id]! - logits[a.id]!);
      return {
        n,
        kept: survivors.length,
        lowestKept: survivors.at(-1)!.id,
        highestMasked: masked.length > 0 ? masked[0]!.id : null,
        ...(survivors.length <= LISTED_SURVIVORS ? { keptIds: survivors.map((entry) => entry.id) } : {}),
      };
    });
    return { id, logits: spec, results };
  });
}

// --- Mirostat

interface MirostatCase {
  readonly id: string;
  readonly mode: 1 | 2;
  readonly logits: LogitsSpec;
  readonly temperature: number;
  readonly tau: number;
  readonly eta: number;
}

const STEPS = 50;
const MIROSTAT_SEED = 1234;
const MIROSTAT_M = 100;

const MIROSTAT_SETTINGS: Omit<MirostatCase, "mode" | "id">[] = [
  { logits: { kind: "zipf", vocabularySize: 5000, seed: 101, parameter: 1.1 }, temperature: 1, tau: 5, eta: 0.1 },
  { logits: { kind: "zipf", vocabularySize: 2000, seed: 102, parameter: 1.3 }, temperature: 0.7, tau: 3, eta: 0.2 },
  { logits: { kind: "normal", vocabularySize: 4096, seed: 103, parameter: 3 }, temperature: 1.5, tau: 5, eta: 0.1 },
  { logits: { kind: "peaked", vocabularySize: 1000, seed: 104 }, temperature: 1, tau: 2, eta: 0.3 },
  { logits: { kind: "flat", vocabularySize: 3000, seed: 105, parameter: 0.5 }, temperature: 1, tau: 5, eta: 0.1 },
  { logits: { kind: "zipf", vocabularySize: 5000, seed: 106, parameter: 1.0, banned: 0.1 }, temperature: 0.8, tau: 4, eta: 0.15 },
  { logits: { kind: "normal", vocabularySize: 5000, seed: 107, parameter: 1 }, temperature: 1, tau: 8, eta: 0.1 },
];

const MIROSTAT_CASES: MirostatCase[] = ([1, 2] as const).flatMap((mode) =>
  MIROSTAT_SETTINGS.map((setting) => {
    const { kind, vocabularySize, parameter, banned } = setting.logits;
    const id = `v${mode}-${kind}${parameter === undefined ? "" : `-${parameter}`}${banned ? "-banned" : ""}-${vocabularySize}-t${setting.temperature}`;
    return { id, mode, ...setting };
  }),
);

function mirostatGoldens() {
  return MIROSTAT_CASES.map((c) => {
    const vocabularySize = c.logits.vocabularySize;
    const mirostat = (
      c.mode === 1
        ? llama.llama_sampler_init_mirostat(vocabularySize, MIROSTAT_SEED, c.tau, c.eta, MIROSTAT_M)
        : llama.llama_sampler_init_mirostat_v2(MIROSTAT_SEED, c.tau, c.eta)
    ) as Pointer;
    const temperature = llama.llama_sampler_init_temp(c.temperature) as Pointer;
    const name = samplerName(mirostat);
    if (name !== (c.mode === 1 ? "mirostat" : "mirostat-v2")) throw new Error(`unexpected sampler ${name}`);
    const layout = LAYOUT[c.mode];
    const context = contextOf(mirostat);
    if (read.f32(context, layout.tau) !== Math.fround(c.tau) || read.f32(context, layout.eta) !== Math.fround(c.eta)) throw new Error("unexpected mirostat context layout");
    const initialMu = read.f32(context, layout.mu);
    if (initialMu !== Math.fround(2 * Math.fround(c.tau))) throw new Error(`mu starts at ${initialMu}, not 2·tau`);
    const next = logitsStream(c.logits);
    const tokens: number[] = [];
    const kept: number[] = [];
    const mu: number[] = [];
    for (let step = 0; step < STEPS; step++) {
      const array = new TokenDataArray(next());
      llama.llama_sampler_apply(temperature, array.pointer);
      llama.llama_sampler_apply(mirostat, array.pointer);
      const selected = array.selected;
      if (selected < 0 || selected >= array.size) throw new Error(`step ${step}: selected ${selected} of ${array.size}`);
      const token = array.entries()[selected]!.id;
      llama.llama_sampler_accept(temperature, token);
      llama.llama_sampler_accept(mirostat, token);
      tokens.push(token);
      kept.push(array.size);
      mu.push(read.f32(context, layout.mu));
    }
    llama.llama_sampler_free(mirostat);
    llama.llama_sampler_free(temperature);
    return { ...c, m: MIROSTAT_M, seed: MIROSTAT_SEED, initialMu, tokens, kept, mu };
  });
}

const goldens = {
  source: "llama.cpp through node-llama-cpp 3.21.1's prebuilt libllama.v0.4.0.so (linux-x64); tools/llamacpp/sampler-goldens.ts",
  topNSigma: topNSigmaGoldens(),
  mirostat: mirostatGoldens(),
};
writeFileSync(OUTPUT, `${JSON.stringify(goldens)}\n`);
const bytes = JSON.stringify(goldens).length;
console.log(`wrote ${OUTPUT} (${bytes} bytes): ${goldens.topNSigma.length} top-n-sigma cases, ${goldens.mirostat.length} mirostat trajectories`);
for (const c of goldens.mirostat) console.log(`${c.id}: kept ${c.kept.slice(0, 12).join(",")}... mu ${c.mu.at(-1)}`);
for (const c of goldens.topNSigma) console.log(`${c.id}: kept ${c.results.map((r) => `${r.n}:${r.kept}`).join(" ")}`);
