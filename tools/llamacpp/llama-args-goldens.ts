#!/usr/bin/env bun
/**
 * Goldens for memra's reading of llama.cpp's command lines (packages/cli/src/llama-arguments.ts):
 * llama.cpp's own parser (common/arg.cpp in node-llama-cpp 3.21.1's libllama-common.so, asked by
 * tools/llamacpp/llama-args.cpp) lists every flag of llama-completion, llama-cli and llama-server and
 * says what it makes of each command line below. Run from the repository root after
 * `tools/llamacpp/build-llama-args.sh`:
 *
 *   bun tools/llamacpp/llama-args-goldens.ts    # → packages/cli/src/__fixtures__/llama-args-goldens.json
 *                                               #   and packages/cli/src/llama-environment.ts (LLAMA_ARG_* names)
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const BINARY = join(import.meta.dir, "build", "llama-args");
const OUT = join(ROOT, "packages", "cli", "src", "__fixtures__", "llama-args-goldens.json");
const ENV_OUT = join(ROOT, "packages", "cli", "src", "llama-environment.ts");
type Tool = "completion" | "cli" | "server" | "perplexity" | "imatrix" | "embedding";
interface LlamaOption {
  args: string[];
  negated: string[];
  value: string | null;
  env: string | null;
}

// Files the command lines name: llama.cpp checks a chat template (it must render), not the others.
const scratch = mkdtempSync(join(tmpdir(), "llama-args-"));
const TEMPLATE = join(scratch, "template.jinja");
const TEMPLATE_TEXT =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
writeFileSync(TEMPLATE, TEMPLATE_TEXT);
const SYSTEM = join(scratch, "system.txt");
writeFileSync(SYSTEM, "You are terse.\n");
mkdirSync("/tmp/slots", { recursive: true }); // llama-server checks that --slot-save-path is a folder

/** The command lines; `{template}` and `{system}` name the files above (the test writes its own). */
const CASES: { tool: Tool; args: string[]; env?: Record<string, string> }[] = [
  { tool: "completion", args: ["-m", "m.gguf", "-p", "Hello\\nworld\\t\\x41", "-n", "64", "-c", "2048", "-s", "42", "--temp", "0.7", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.1", "-t", "2"] },
  // escapes at their edges: an unknown one, an escaped backslash, \x with one digit, at the end, a final backslash
  { tool: "completion", args: ["-m", "m.gguf", "-p", "a\\qb\\\\n\\x4g\\x41\\x4\\", "-r", "\\'\\\"\\r"] },
  { tool: "completion", args: ["-m", "m.gguf", "-p", "x", "--repeat-penalty", "1.1", "--repeat-last-n", "32", "--presence-penalty", "0.5", "--frequency-penalty", "0.25", "--typical", "0.9"] },
  {
    tool: "completion",
    args: ["-m", "m.gguf", "-p", "x", "--dry-multiplier", "0.8", "--dry-base", "2", "--dry-allowed-length", "3", "--dry-sequence-breaker", "\\n", "--dry-sequence-breaker", "##", "--xtc-probability", "0.5", "--xtc-threshold", "0.2"],
  },
  { tool: "completion", args: ["-m", "m.gguf", "-p", "x", "--mirostat", "2", "--mirostat-lr", "0.2", "--mirostat-ent", "4", "--top-nsigma", "1.5", "-l", "15043+1", "-l", "300-inf", "--logit-bias", "7-0.5", "--ignore-eos"] },
  { tool: "completion", args: ["-m", "m.gguf", "-p", "x", "-ngl", "-1", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-r", "User:", "-r", "\\n\\n", "--context-shift", "--keep", "-1", "-s", "-1", "-n", "-1", "-c", "0"] },
  {
    tool: "completion",
    args: ["-m", "m.gguf", "-p", "x", "-ngl", "all", "--temperature", "0", "--typical-p", "0.5", "--rope-scaling", "yarn", "--rope-scale", "4", "--yarn-orig-ctx", "32768"],
  },
  { tool: "completion", args: ["-m", "m.gguf", "--file", "{system}", "--n-predict", "5", "--gpu-layers", "12", "--ctx-size", "512", "--seed", "7", "--prompt-cache", "p.bin", "--prompt-cache-ro", "--no-escape"] },
  { tool: "cli", args: ["-m", "m.gguf", "-sys", "Be brief.", "-p", "Hi\\n", "-n", "256", "-rea", "off", "-c", "8192", "-ngl", "99", "--temp", "0.6", "--top-k", "20", "--top-p", "0.95", "--min-p", "0", "--jinja"] },
  { tool: "cli", args: ["-m", "m.gguf", "-p", "hi", "--reasoning-budget", "0", "--chat-template-file", "{template}", "-sysf", "{system}", "-ctk", "f32", "-ctv", "f32"] },
  { tool: "cli", args: ["-m", "m.gguf", "-p", "hi", "-rea", "on", "--chat-template", TEMPLATE_TEXT, "-s", "3", "--dry-multiplier", "0.5", "-md", "d.gguf", "--spec-draft-n-max", "8", "--spec-draft-p-min", "0.5"] },
  {
    tool: "server",
    args: ["-m", "m.gguf", "-c", "16384", "-np", "4", "-ngl", "99", "-fa", "on", "--jinja", "-ctk", "q8_0", "-ctv", "q8_0", "--host", "0.0.0.0", "--port", "8081", "-a", "qwen3", "--api-key", "k1", "--metrics", "-t", "2", "--temp", "0.6", "--top-k", "20", "--top-p", "0.95", "--min-p", "0", "-n", "1024", "--reasoning-format", "none", "-rea", "off", "--slot-save-path", "/tmp/slots", "-cb", "--no-webui"],
  },
  { tool: "server", args: ["-m", "m.gguf", "--lora", "a.gguf", "--lora-scaled", "b.gguf:0.5", "--lora-init-without-apply", "-s", "7", "--presence-penalty", "1.5", "--override-kv", "qwen3.context_length=int:65536", "--reasoning-budget", "0", "--chat-template-file", "{template}"] },
  { tool: "server", args: ["-m", "m.gguf", "--parallel", "2", "--ctx-size", "0", "--n-gpu-layers", "auto", "--alias", "q", "--reasoning-format", "deepseek", "--seed", "-1", "--ignore-eos", "-cmoe"] },
  // LLAMA_ARG_* environment variables: read first, the command line wins
  {
    tool: "server",
    args: ["-c", "4096", "--no-context-shift"],
    env: { LLAMA_ARG_MODEL: "env.gguf", LLAMA_ARG_CTX_SIZE: "2048", LLAMA_ARG_N_PARALLEL: "2", LLAMA_ARG_PORT: "9000", LLAMA_ARG_HOST: "0.0.0.0", LLAMA_ARG_N_GPU_LAYERS: "all", LLAMA_ARG_FLASH_ATTN: "on", LLAMA_ARG_MMAP: "false", LLAMA_API_KEY: "env-key", LLAMA_ARG_CONTEXT_SHIFT: "1", LLAMA_ARG_ALIAS: "envalias", LLAMA_ARG_CACHE_TYPE_K: "q8_0", LLAMA_ARG_CACHE_TYPE_V: "q8_0", LLAMA_ARG_THREADS: "2", LLAMA_ARG_JINJA: "1", LLAMA_ARG_ENDPOINT_METRICS: "1" },
  },
  { tool: "completion", args: ["-p", "x", "-n", "3"], env: { LLAMA_ARG_MODEL: "env.gguf", LLAMA_ARG_N_PREDICT: "9", LLAMA_ARG_CTX_SIZE: "128", LLAMA_ARG_N_GPU_LAYERS: "0" } },
  { tool: "perplexity", args: ["-m", "m.gguf", "-f", "{system}", "-c", "512", "-b", "512", "--chunks", "10", "-ngl", "99", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-t", "2", "--kl-divergence-base", "base.kld"] },
  { tool: "perplexity", args: ["-m", "m.gguf", "--kl-divergence-base", "base.kld", "--kl-divergence", "--temp", "0.5", "-s", "3"] },
  { tool: "perplexity", args: ["-m", "m.gguf", "-f", "{system}", "--hellaswag", "--hellaswag-tasks", "100", "--ctx-size", "256", "--batch-size", "256"] },
  { tool: "perplexity", args: ["-m", "m.gguf", "-f", "{system}", "--ppl-stride", "64", "--ppl-output-type", "1", "-c", "128", "--save-all-logits", "all.kld", "--winogrande", "--winogrande-tasks", "5", "-ub", "64"] },
  {
    tool: "imatrix",
    args: ["-m", "m.gguf", "-f", "{system}", "-o", "out.gguf", "-c", "256", "-b", "512", "-ub", "128", "--chunks", "20", "-ofreq", "5", "--save-frequency", "10", "--chunk", "2", "--process-output", "--parse-special", "--output-format", "dat", "-ngl", "99"],
  },
  { tool: "imatrix", args: ["--in-file", "{system}", "--in-file", "{template}", "--show-statistics", "-m", "m.gguf", "--no-ppl", "--output-frequency", "3"] },
  { tool: "embedding", args: ["-m", "m.gguf", "-p", "first text\\nsecond text", "--embd-normalize", "-1", "--pooling", "last", "-c", "512"] },
  { tool: "embedding", args: ["-m", "m.gguf", "-p", "a|b|c", "--embd-separator", "|", "--embd-normalize", "2", "--pooling", "mean", "-ngl", "99"] },
];

/** llama-args with `env` added to an environment without LLAMA_* variables. */
function run(args: string[], env: Record<string, string> = {}): string {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("LLAMA_")));
  const result = Bun.spawnSync([BINARY, ...args], { stdout: "pipe", stderr: "pipe", env: { ...clean, ...env } });
  if (result.exitCode !== 0) throw new Error(`llama-args ${args.join(" ")} exited with ${result.exitCode}:\n${result.stderr.toString()}`);
  return result.stdout.toString();
}

const resolve = (args: string[]) => args.map((arg) => arg.replace("{template}", TEMPLATE).replace("{system}", SYSTEM));
const options = Object.fromEntries((["completion", "cli", "server", "perplexity", "imatrix", "embedding"] as const).map((tool) => [tool, JSON.parse(run(["options", tool]))]));
const cases = CASES.map(({ tool, args, env }) => {
  // the scratch files' paths back to their placeholders (the test writes files of its own)
  const printed = run(["parse", tool, ...resolve(args)], env).trim().split("\n").at(-1)!;
  const parsed = JSON.parse(printed.replaceAll(TEMPLATE, "{template}").replaceAll(SYSTEM, "{system}"));
  if (parsed.error) throw new Error(`llama.cpp refused ${tool} ${args.join(" ")}`);
  return { tool, args, ...(env ? { env } : {}), parsed };
});
// One line per flag and per command line: the file reads (and diffs) as lists.
const lines = [
  "{",
  ` "source": "llama.cpp common/arg.cpp (node-llama-cpp 3.21.1 libllama-common.so) via tools/llamacpp/llama-args.cpp",`,
  ` "files": ${JSON.stringify({ template: TEMPLATE_TEXT, system: "You are terse.\n" })},`,
  ` "options": {`,
  Object.entries(options)
    .map(([tool, list]) => `  ${JSON.stringify(tool)}: [\n${(list as LlamaOption[]).map(({ args, negated, value, env }) => `   ${JSON.stringify({ args, negated, value, ...(env ? { env } : {}) })}`).join(",\n")}\n  ]`)
    .join(",\n"),
  " },",
  ` "cases": [`,
  cases.map((entry) => `  ${JSON.stringify(entry)}`).join(",\n"),
  " ]",
  "}",
];
writeFileSync(OUT, `${lines.join("\n")}\n`);

// llama.cpp's environment variables (LLAMA_ARG_*), for memra's reading of them (llama-arguments.ts)
const environment = new Map<string, { flags: string[]; negated: string[]; value: boolean; tools: Tool[] }>();
for (const [tool, list] of Object.entries(options) as [Tool, LlamaOption[]][]) {
  for (const option of list) {
    if (!option.env) continue;
    const entry = environment.get(option.env) ?? { flags: option.args, negated: option.negated, value: option.value !== null, tools: [] };
    if (entry.flags.join() !== option.args.join()) throw new Error(`${option.env} stands for ${entry.flags} and ${option.args}`);
    entry.tools.push(tool);
    environment.set(option.env, entry);
  }
}
writeFileSync(
  ENV_OUT,
  [
    "// Written by tools/llamacpp/llama-args-goldens.ts from llama.cpp's own parser (common/arg.cpp): do not edit.",
    "",
    "/** llama.cpp's environment variables: name, the flags of its option, their negations (a bool option), whether the option takes a value, the tools that read it. */",
    "export const LLAMA_ENVIRONMENT: readonly (readonly [string, readonly string[], readonly string[], boolean, string])[] = [",
    ...[...environment].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, e]) => `  ${JSON.stringify([name, e.flags, e.negated, e.value, e.tools.join(",")])},`),
    "];",
    "",
  ].join("\n"),
);
console.log(`wrote ${OUT}: ${Object.values(options).reduce((n, list) => n + list.length, 0)} options, ${cases.length} command lines`);
