/**
 * llama.cpp's command lines on memra generate / chat / serve, against llama.cpp's own parser
 * (__fixtures__/llama-args-goldens.json, written by tools/llamacpp/llama-args-goldens.ts): every flag
 * of llama-completion, llama-cli and llama-server is memra's own, rewritten, accepted or refused with
 * a reason; and each recorded command line means to memra what it means to llama.cpp.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import goldens from "./__fixtures__/llama-args-goldens.json";
import { chatParseOptions } from "./commands/chat";
import { embedParseOptions } from "./commands/embed";
import { imatrixParseOptions } from "./commands/imatrix";
import { perplexityParseOptions } from "./commands/perplexity";
import { normalizeKlDivergenceFlag } from "./commands/perplexity-kld-base";
import { generateParseOptions } from "./commands/generate";
import { serveParseOptions } from "./commands/serve";
import { processEscapes } from "./escapes";
import { type LlamaTool, type OptionSpecs, SWITCH_OR_VALUE, llamaArguments, llamaRuleFlags } from "./llama-arguments";
import { LLAMA_ENVIRONMENT } from "./llama-environment";
import { samplingOptionsOfFlags } from "./sampling-arguments";

const SPECS: Record<LlamaTool, OptionSpecs> = {
  completion: generateParseOptions,
  cli: chatParseOptions,
  server: serveParseOptions,
  perplexity: perplexityParseOptions,
  imatrix: imatrixParseOptions,
  embedding: embedParseOptions,
};
const COMMAND: Record<LlamaTool, string> = { completion: "generate", cli: "chat", server: "serve", perplexity: "perplexity", imatrix: "imatrix", embedding: "embed" };

interface LlamaOption {
  args: string[];
  negated: string[];
  value: string | null;
}

/** memra's option (name) a flag is, when it is one of its own. */
function ownOption(specs: OptionSpecs, flag: string): string | undefined {
  if (flag.startsWith("--")) return specs[flag.slice(2)] ? flag.slice(2) : undefined;
  return Object.entries(specs).find(([, spec]) => spec.short !== undefined && `-${spec.short}` === flag)?.[0];
}

function memraValues(tool: LlamaTool, args: readonly string[], notices: string[] = [], environment: Record<string, string> = {}): Record<string, unknown> {
  // as the command does: perplexity reads --kl-divergence's two forms first
  const prepared = tool === "perplexity" ? normalizeKlDivergenceFlag(args) : args;
  const translated = llamaArguments(tool, prepared, SPECS[tool], (message) => notices.push(message), environment);
  return parseArgs({ args: translated, options: SPECS[tool] as Parameters<typeof parseArgs>[0] extends { options?: infer O } ? O : never, strict: true }).values as Record<string, unknown>;
}

describe("llama.cpp's flags on memra generate, chat and serve", () => {
  for (const tool of ["completion", "cli", "server", "perplexity", "imatrix", "embedding"] as const) {
    it(`every flag of llama-${tool} is memra ${COMMAND[tool]}'s own, rewritten to one of its options, accepted or refused; values taken as llama.cpp takes them`, () => {
      const rules = llamaRuleFlags(tool);
      const options = (goldens.options as Record<string, LlamaOption[]>)[tool]!;
      expect(options.length).toBeGreaterThan(100);
      const unhandled: string[] = [];
      const valueMismatch: string[] = [];
      for (const option of options) {
        for (const [flag, takesValue] of [...option.args.map((f) => [f, option.value !== null] as const), ...option.negated.map((f) => [f, false] as const)]) {
          const rule = rules.get(flag);
          const own = ownOption(SPECS[tool], flag);
          if (rule) {
            if (rule.value !== takesValue) valueMismatch.push(flag);
            // a flag rewritten to one of memra's options: the command has that option
            if (rule.to !== undefined && SPECS[tool][rule.to] === undefined) unhandled.push(`${flag} (→ --${rule.to})`);
          } else if (own !== undefined) {
            if ((SPECS[tool][own]!.type === "string") !== takesValue && !SWITCH_OR_VALUE.includes(flag)) valueMismatch.push(flag);
          } else {
            unhandled.push(flag);
          }
        }
      }
      expect(unhandled.join(" ")).toBe("");
      expect(valueMismatch).toEqual([]);
    });
  }

  const scratch = mkdtempSync(join(tmpdir(), "memra-llama-args-"));
  const files = { template: join(scratch, "template.jinja"), system: join(scratch, "system.txt") };
  writeFileSync(files.template, goldens.files.template);
  writeFileSync(files.system, goldens.files.system);
  const resolve = (args: readonly string[]) => args.map((arg) => arg.replace("{template}", files.template).replace("{system}", files.system));

  for (const [index, golden] of goldens.cases.entries()) {
    const tool = golden.tool as LlamaTool;
    const environment = (golden as { env?: Record<string, string> }).env;
    const shown = `${environment ? `${Object.keys(environment).length} LLAMA_* variables, ` : ""}llama-${tool} ${golden.args.slice(environment ? 0 : 2, 8).join(" ")} ...`;
    it(`command line ${index + 1} (${shown}) means to memra ${COMMAND[tool]} what it means to llama.cpp`, () => {
      const p = golden.parsed;
      const v = memraValues(tool, resolve(golden.args), [], (golden as { env?: Record<string, string> }).env ?? {}) as Record<string, string | undefined> & Record<string, unknown>;
      expect(v.model).toBe(p.model);
      if (tool === "perplexity" || tool === "imatrix" || tool === "embedding") {
        scoringToolMeans(tool, v, p);
        return;
      }
      const s = samplingOptionsOfFlags(v as never);
      const escape = (text: string) => (v["no-escape"] ? text : processEscapes(text));
      if (tool === "completion") {
        const prompt = escape(v.file !== undefined ? goldens.files.system.replace(/\n$/, "") : (v.prompt as string));
        expect(prompt).toBe(p.prompt);
        expect(((v.stop as string[] | undefined) ?? []).map(escape)).toEqual(p.antiprompt);
        expect(Number(v.keep ?? 0)).toBe(p.n_keep);
        expect(v["prompt-cache"] ?? "").toBe(p.path_prompt_cache);
        expect(Boolean(v["prompt-cache-ro"])).toBe(p.prompt_cache_ro);
      }
      if (tool === "cli") {
        expect(escape(v.prompt as string)).toBe(p.prompt);
        expect(v.system ?? "").toBe(p.system_prompt);
      }
      if (tool !== "cli") expect(Boolean(v["context-shift"])).toBe(p.ctx_shift);
      if (tool !== "completion") {
        expect(v["chat-template"] ?? "").toBe(p.chat_template);
        expect(Boolean(v["no-think"])).toBe(p.enable_reasoning === 0 || p.reasoning_budget === 0);
      }
      if (tool === "server") {
        expect(Number(v["n-predict"] ?? -1)).toBe(p.n_predict);
        expect(v.host).toBe(p.hostname);
        expect(Number(v.port)).toBe(p.port);
        expect(v["api-key"] === undefined ? [] : (v["api-key"] as string).split(",")).toEqual(p.api_keys);
        expect(v.alias ?? "").toBe(p.model_alias);
        expect(v["slot-save-path"] ?? "").toBe(p.slot_save_path.replace(/\/$/, "")); // llama.cpp appends a "/"
        expect({ none: 0, auto: 1, "deepseek-legacy": 2, deepseek: 3 }[(v["reasoning-format"] as string | undefined) ?? "deepseek"]).toBe(p.reasoning_format);
        expect(Boolean(v["lora-init-without-apply"])).toBe(p.lora_init_without_apply);
        if (v.parallel !== undefined) expect(Number(v.parallel)).toBe(p.n_parallel);
      } else {
        expect(Number(v["max-tokens"] ?? -1)).toBe(p.n_predict);
      }
      expect(Number(v.ctx ?? 0)).toBe(p.n_ctx);
      if (v.threads !== undefined) expect(Number(v.threads)).toBe(p.threads);
      const layers = (v["gpu-layers"] as string | undefined) ?? "auto";
      expect(layers === "auto" ? -1 : layers === "all" ? -2 : Number(layers)).toBe(p.n_gpu_layers);
      expect(v["kv-type"]).toBe(p.cache_type_k);
      expect(v["kv-type"]).toBe(p.cache_type_v);
      expect({ none: 0, linear: 1, yarn: 2 }[(v["rope-scaling"] as string | undefined) ?? ""] ?? -1).toBe(p.rope_scaling_type);
      expect(v["rope-scale"] === undefined ? 0 : 1 / Number(v["rope-scale"])).toBeCloseTo(p.rope_freq_scale, 6);
      expect(Number(v["yarn-orig-ctx"] ?? 0)).toBe(p.yarn_orig_ctx);
      expect(((v["override-kv"] as string[] | undefined) ?? []).map((spec) => spec.slice(0, spec.indexOf("=")))).toEqual(p.kv_overrides);
      const lora = [...((v.lora as string[] | undefined) ?? []).map((file) => `${file}@1`), ...((v["lora-scaled"] as string[] | undefined) ?? []).map((spec) => spec.replace(/:([^:]*)$/, "@$1"))];
      expect(lora.sort()).toEqual([...p.lora].sort());
      expect(v["model-draft"] ?? "").toBe(p.draft_model);
      if (v["draft-max"] !== undefined) expect(Number(v["draft-max"])).toBe(p.draft_max);
      if (v["draft-p-min"] !== undefined) expect(Number(v["draft-p-min"])).toBeCloseTo(p.draft_p_min, 6);
      // The sampler's defaults are llama.cpp's: what memra leaves out is what llama.cpp's default is.
      expect(s.seed ?? 0xffffffff).toBe(p.seed);
      expect(s.temperature ?? 0.8).toBeCloseTo(p.temp, 6);
      expect(s.topK ?? 40).toBe(p.top_k);
      expect(s.topP ?? 0.95).toBeCloseTo(p.top_p, 6);
      expect(s.minP ?? 0.05).toBeCloseTo(p.min_p, 6);
      expect(s.typicalP ?? 1).toBeCloseTo(p.typ_p, 6);
      expect(s.penaltyLastN ?? 64).toBe(p.penalty_last_n);
      expect(s.repeatPenalty ?? 1).toBeCloseTo(p.penalty_repeat, 6);
      expect(s.frequencyPenalty ?? 0).toBeCloseTo(p.penalty_freq, 6);
      expect(s.presencePenalty ?? 0).toBeCloseTo(p.penalty_present, 6);
      expect(s.dry?.multiplier ?? 0).toBeCloseTo(p.dry_multiplier, 6);
      expect(s.dry?.base ?? 1.75).toBeCloseTo(p.dry_base, 6);
      expect(s.dry?.allowedLength ?? 2).toBe(p.dry_allowed_length);
      expect(s.dry?.penaltyLastN ?? 64).toBe(p.dry_penalty_last_n);
      expect(s.dry?.sequenceBreakers?.map(escape) ?? ["\n", ":", '"', "*"]).toEqual(p.dry_sequence_breakers);
      expect(s.xtc?.probability ?? 0).toBeCloseTo(p.xtc_probability, 6);
      expect(s.xtc?.threshold ?? 0.1).toBeCloseTo(p.xtc_threshold, 6);
      expect(s.topNSigma ?? -1).toBeCloseTo(p.top_n_sigma, 6);
      expect(s.mirostat?.mode ?? 0).toBe(p.mirostat);
      expect(s.mirostat?.tau ?? 5).toBeCloseTo(p.mirostat_tau, 6);
      expect(s.mirostat?.eta ?? 0.1).toBeCloseTo(p.mirostat_eta, 6);
      expect(Boolean(s.ignoreEos)).toBe(p.ignore_eos);
      const bias = [...((s.logitBias as Map<number, number> | undefined) ?? new Map<number, number>())];
      expect(bias).toEqual(p.logit_bias.map((entry: string) => [Number(entry.split(":")[0]), Number(entry.split(":")[1]!.replace("inf", "Infinity"))]));
    });
  }

  /** A scoring tool's command line: what memra perplexity / imatrix / embed read from it is what llama.cpp's tool reads. */
  function scoringToolMeans(tool: "perplexity" | "imatrix" | "embedding", v: Record<string, unknown>, p: Record<string, any>): void {
    const number = (value: unknown, fallback: number) => (value === undefined ? fallback : Number(value));
    if (tool === "embedding") {
      expect(v.text).toEqual(p.prompt.split(p.embd_sep).filter((text: string) => text !== ""));
      expect(Boolean(v["no-normalize"])).toBe(p.embd_normalize === -1);
      expect({ none: 0, mean: 1, cls: 2, last: 3, rank: 4 }[(v.pooling as string | undefined) ?? ""] ?? -1).toBe(p.pooling_type);
      return;
    }
    expect(v.file ?? "").toBe(resolve([p.prompt_file])[0]);
    expect(number(v.chunks, -1)).toBe(p.n_chunks);
    expect(number(v["batch-size"], 2048)).toBe(p.n_batch);
    if (v.threads !== undefined) expect(Number(v.threads)).toBe(p.threads);
    if (tool === "perplexity") {
      if (v.ctx !== undefined) expect(Number(v.ctx)).toBe(p.n_ctx);
      expect(v["kv-type"] ?? "f16").toBe(p.cache_type_k);
      expect(v["kv-type"] ?? "f16").toBe(p.cache_type_v);
      expect(v["kl-divergence-base"] ?? "").toBe(p.logits_file);
      expect(v["kl-divergence"] === "").toBe(p.kl_divergence); // the switch, as normalizeKlDivergenceFlag writes it
      expect(number(v["ppl-stride"], 0)).toBe(p.ppl_stride);
      expect(number(v["ppl-output-type"], 0)).toBe(p.ppl_output_type);
      expect(Boolean(v.hellaswag)).toBe(p.hellaswag);
      expect(number(v["hellaswag-tasks"], 400)).toBe(p.hellaswag_tasks);
      expect(Boolean(v.winogrande)).toBe(p.winogrande);
      expect(number(v["winogrande-tasks"], 0)).toBe(p.winogrande_tasks);
      expect(Boolean(v["multiple-choice"])).toBe(p.multiple_choice);
      return;
    }
    if (v["ctx-size"] !== undefined) expect(Number(v["ctx-size"])).toBe(p.n_ctx);
    expect(number(v["ubatch-size"], 512)).toBe(p.n_ubatch);
    expect(v.output).toBe(p.out_file || "imatrix.gguf"); // llama-imatrix's default when -o is not given
    expect(v["in-file"] ?? []).toEqual(resolve(p.in_files));
    expect(number(v["output-frequency"], 10)).toBe(p.n_out_freq);
    expect(number(v["save-frequency"], 0)).toBe(p.n_save_freq);
    expect(number(v.chunk ?? v["from-chunk"], 0)).toBe(p.i_chunk);
    expect({ dat: 1, gguf: -1 }[(v["output-format"] as string | undefined) ?? ""] ?? 0).toBe(p.imat_dat);
    expect(Boolean(v["process-output"])).toBe(p.process_output);
    expect(Boolean(v["parse-special"])).toBe(p.parse_special);
    expect(Boolean(v["show-statistics"])).toBe(p.show_statistics);
  }

  it("LLAMA_ARG_* variables: the command line wins; a boolean reads llama.cpp's words; one memra cannot honour is ignored with its reason, not refused", () => {
    const notices: string[] = [];
    const v = memraValues("server", ["--port", "7000"], notices, { LLAMA_ARG_PORT: "9000", LLAMA_ARG_CONTEXT_SHIFT: "1", LLAMA_ARG_NO_CONTEXT_SHIFT: "", LLAMA_ARG_HF_REPO: "Qwen/x", LLAMA_ARG_FLASH_ATTN: "off", HF_TOKEN: "secret", LLAMA_ARG_BATCH: "1024" });
    expect(v.port).toBe("7000");
    expect(v["context-shift"]).toBe(false); // LLAMA_ARG_NO_X wins, as in llama.cpp
    expect(notices).toEqual([
      "memra: llama.cpp flags that change nothing here: LLAMA_ARG_BATCH=1024 (memra chooses how many prompt tokens each step evaluates)",
      "memra: ignoring llama.cpp environment variables it cannot honour: LLAMA_ARG_FLASH_ATTN=off (-fa off: memra has one attention path, fused as flash attention is (-fa on|auto); it cannot be turned off); LLAMA_ARG_HF_REPO (-hf: memra downloads nothing: give a local GGUF file with -m)",
    ]);
    expect(memraValues("server", [], [], { LLAMA_ARG_CONTEXT_SHIFT: "enabled" })["context-shift"]).toBe(true);
    expect(() => memraValues("server", [], [], { LLAMA_ARG_CONTEXT_SHIFT: "yes" })).toThrow(/LLAMA_ARG_CONTEXT_SHIFT=yes: a llama\.cpp boolean variable is on, enabled, true, 1, off, disabled, false or 0/);
  });

  it("llama-environment.ts is the fixture's variables (regenerate both with tools/llamacpp/llama-args-goldens.ts)", () => {
    const expected = new Map<string, string>();
    for (const [tool, list] of Object.entries(goldens.options as Record<string, (LlamaOption & { env?: string })[]>)) {
      for (const option of list) if (option.env) expected.set(option.env, `${option.args} ${option.negated} ${option.value !== null} ${[expected.get(option.env)?.split(" ").at(-1), tool].filter(Boolean).join(",")}`);
    }
    expect(new Map(LLAMA_ENVIRONMENT.map(([name, flags, negated, value, tools]) => [name, `${flags} ${negated} ${value} ${tools}`]))).toEqual(expected);
  });

  it("refuses what memra cannot honour, naming the flag and the reason", () => {
    expect(() => memraValues("completion", ["-p", "x", "-fa", "off"])).toThrow(/llama\.cpp's -fa off is not supported by memra: memra has one attention path/);
    expect(() => memraValues("server", ["-ctk", "q8_0", "-ctv", "f16"])).toThrow(/-ctk q8_0 and -ctv f16: memra stores keys and values in one type/);
    expect(() => memraValues("server", ["--cache-reuse", "256"])).toThrow(/--cache-reuse is not supported by memra: memra reuses a cached prefix in whole blocks/);
    expect(() => memraValues("cli", ["-hf", "Qwen/Qwen3-0.6B-GGUF"])).toThrow(/-hf is not supported by memra: memra downloads nothing/);
    expect(() => memraValues("cli", ["--reasoning-budget", "512"])).toThrow(/--reasoning-budget 512 is not supported by memra/);
    expect(() => memraValues("cli", ["--chat-template", "chatml"])).toThrow(/memra renders Jinja template text only/);
    expect(() => memraValues("completion", ["-ngl", "many"])).toThrow(/-ngl must be a number of layers, auto or all, got "many"/);
    expect(() => memraValues("server", ["-c"])).toThrow(/-c needs a value/);
    expect(() => memraValues("server", ["-dev", "Vulkan0"])).toThrow(/-dev Vulkan0: memra has no per-device choice/);
  });

  it("accepts what changes nothing here, with one notice naming each flag; memra's own spellings are untouched", () => {
    const notices: string[] = [];
    const v = memraValues("server", ["-b", "2048", "-ub", "512", "--mlock", "--jinja", "-fa", "auto", "-cb", "--metrics", "-dev", "none", "--cpu-moe", "3", "-kvu"], notices);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/^memra: llama\.cpp flags that change nothing here: -b 2048 \(memra chooses .*\); -ub 512 \(.*\); --mlock \(memra maps the GGUF/);
    expect(v.device).toBe("cpu");
    expect(v["cpu-moe"]).toBe("3");
    expect(memraValues("server", ["--cpu-moe"])["cpu-moe"]).toBe("all");
    expect(memraValues("completion", ["-p", "x", "--gpu-layers", "all", "--device", "auto"])).toMatchObject({ "gpu-layers": "all", device: "auto" });
    expect(memraValues("completion", ["-p", "-x", "--top-nsigma", "-1", "--keep", "-1"])).toMatchObject({ prompt: "-x", "top-nsigma": "-1", keep: "-1" });
  });
});
