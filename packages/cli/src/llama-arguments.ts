/**
 * llama.cpp's command lines for `memra generate` (llama-completion), `memra chat` (llama-cli),
 * `memra serve` (llama-server), `memra perplexity` (llama-perplexity), `memra imatrix`
 * (llama-imatrix) and `memra embed` (llama-embedding): their flags (common/arg.cpp) turned into
 * memra's options before parseArgs reads them. Every flag those tools take is one of:
 *
 * - memra's own option of the same name (`--temp`, `-m`, `--port`, ...): passed on;
 * - another spelling of a memra option (`-c` → `--ctx`, `-ngl` → `--gpu-layers`, `-ctk`/`-ctv` →
 *   `--kv-type`, `--chat-template-file` → the template as `--chat-template`, ...): rewritten;
 * - what memra always does (`--jinja`, `-fa on`, `-cb`, `--metrics`, ...): accepted, nothing to do;
 * - a tuning that changes no result here (`-b`, `--mlock`, `--numa`, ...): accepted with a notice;
 * - something memra cannot honour: a CliError naming the flag and why.
 *
 * llama.cpp's LLAMA_ARG_* environment variables are read as the flags they stand for, before the
 * command line, which wins (llama-environment.ts, written from llama.cpp's parser); one memra
 * cannot honour is ignored with its reason, as it was not asked for on this command line.
 *
 * Values are joined to their flag, memra's own options' too (`-ngl -1` → `--gpu-layers=auto`,
 * `--seed -1` → `--seed=-1`, `--top-nsigma -1` → `--top-nsigma=-1`), so that parseArgs does not
 * read a negative number as a flag. llama-args-goldens.json (llama.cpp's own
 * parser, run by tools/llamacpp/llama-args-goldens.ts) checks that every flag of the six tools is
 * one of the above and that the rewritten command lines mean what llama.cpp makes of them.
 */
import { readFileSync } from "node:fs";
import { CliError } from "./cli-error";
import { processEscapes } from "./escapes";
import { LLAMA_ENVIRONMENT } from "./llama-environment";

export type LlamaTool = "completion" | "cli" | "server" | "perplexity" | "imatrix" | "embedding";

/** parseArgs option specs, as the commands declare them. */
export type OptionSpecs = Readonly<Record<string, { readonly type: "string" | "boolean"; readonly short?: string; readonly multiple?: boolean }>>;

/** What a llama.cpp flag becomes. */
type Action =
  /** memra's arguments for it (`value`: the flag's value, "" for a switch). */
  | { readonly kind: "rename"; readonly to: string; readonly map: (value: string, flag: string) => readonly string[] }
  /** memra does this anyway; `accepts` (value flags): the values that say so. */
  | { readonly kind: "accept"; readonly accepts?: (value: string) => boolean; readonly otherwise?: string }
  /** No effect here; told on stderr. */
  | { readonly kind: "notice"; readonly why: string }
  | { readonly kind: "refuse"; readonly why: string };

interface Rule {
  readonly flags: readonly string[];
  /** Whether the flag takes a value (as llama.cpp's). */
  readonly value: boolean;
  /** The tools it applies to (default: all); the others fall through to the next rule. */
  readonly tools?: readonly LlamaTool[];
  readonly action: Action;
}

/** memra's option `to`: `--to=VALUE` (converted by `convert`) for a value flag, `--to` for a switch. */
const rename = (to: string, convert?: (value: string, flag: string) => string): Action => ({
  kind: "rename",
  to,
  map: (value, flag) => (convert ? [`--${to}=${convert(value, flag)}`] : value === "" ? [`--${to}`] : [`--${to}=${value}`]),
});
/** Arguments of memra's own made from the value. */
const mapped = (to: string, map: (value: string, flag: string) => readonly string[]): Action => ({ kind: "rename", to, map });
const accept = (accepts?: (value: string) => boolean, otherwise?: string): Action => ({ kind: "accept", ...(accepts ? { accepts } : {}), ...(otherwise ? { otherwise } : {}) });
const notice = (why: string): Action => ({ kind: "notice", why });
const refuse = (why: string): Action => ({ kind: "refuse", why });
/** llama.cpp's words for a boolean (common_arg_utils::is_truthy / is_falsey). */
const TRUTHY = ["on", "enabled", "true", "1"];
const FALSEY = ["off", "disabled", "false", "0"];
/** -fa, -fit: on, or auto (memra's answer to auto is on). */
const on = (value: string) => [...TRUTHY, "auto"].includes(value.toLowerCase());

/** A file a flag names (- standard input), less one final newline, as llama.cpp reads -f and -sysf. */
export function readFlagFile(file: string, flag: string): string {
  try {
    return readFileSync(file === "-" ? 0 : file, "utf8").replace(/\n$/, "");
  } catch (error) {
    throw new CliError(`${flag} "${file}": ${(error as Error).message}`);
  }
}

/** -ngl: N, auto (or -1) or all (or any number below -1), as llama.cpp reads it. */
function gpuLayers(value: string, flag: string): string {
  const v = value.trim().toLowerCase();
  if (v === "auto" || v === "-1") return "auto";
  if (v === "all" || (/^-\d+$/.test(v) && Number(v) <= -2)) return "all";
  if (!/^\d+$/.test(v)) throw new CliError(`${flag} must be a number of layers, auto or all, got "${value}"`);
  return v;
}

/** -dev: none is the CPU, CUDA devices the GPU(s). */
function device(value: string, flag: string): string {
  if (["auto", "cuda", "cpu", "reference", "cpu+reference"].includes(value)) return value; // memra's own --device
  const devices = value.split(",").map((d) => d.trim());
  if (devices.length === 1 && devices[0]!.toLowerCase() === "none") return "cpu";
  if (devices.every((d) => /^cuda\d+$/i.test(d))) return "cuda";
  throw new CliError(`${flag} ${value}: memra has no per-device choice; give none (the CPU) or CUDA0[,CUDA1...] (the GPUs; split them with --gpu-mem), or memra's --device auto|cuda|cpu`);
}

/** A chat template given as text (llama.cpp also takes names of built-in templates: memra renders Jinja only). */
function templateText(text: string, flag: string): string {
  if (!/\{[{%]/.test(text)) throw new CliError(`${flag} "${text}": memra renders Jinja template text only, not llama.cpp's built-in template names; give the template (or --chat-template-file FILE)`);
  return text;
}

/** --embd-normalize: 2 (euclidean) is memra embed's, -1 none; memra has no other norm. */
function embeddingNormalize(value: string, flag: string): readonly string[] {
  if (value.trim() === "2") return [];
  if (value.trim() === "-1") return ["--no-normalize"];
  throw new CliError(`llama.cpp's ${flag} ${value} is not supported by memra: memra embed normalizes to unit euclidean length (2) or not at all (-1)`);
}

/** -rea on|off|auto: off is Qwen3's non-thinking mode. */
function reasoning(value: string, flag: string): readonly string[] {
  const v = value.trim().toLowerCase();
  if (FALSEY.includes(v)) return ["--no-think"];
  if (on(v)) return [];
  throw new CliError(`${flag} must be on, off or auto, got "${value}"`);
}

/** --reasoning-budget: 0 is no thinking, -1 no limit; memra has no budget between. */
function reasoningBudget(value: string, flag: string): readonly string[] {
  if (value.trim() === "0") return ["--no-think"];
  if (value.trim() === "-1") return [];
  throw new CliError(`llama.cpp's ${flag} ${value} is not supported by memra: it has no reasoning budget but 0 (no thinking) and -1 (no limit)`);
}

/** --cpu-moe: llama.cpp's switch (all experts in RAM), or memra's --cpu-moe N|all. */
const CPU_MOE_VALUE = /^(all|\d+)$/;

const LOAD = "memra maps the GGUF and copies the weights to its backend; there is no load mode to choose";
const AFFINITY = "memra's CPU thread pool has no affinity, polling or priority settings";
const DOWNLOAD = "memra downloads nothing: give a local GGUF file with -m";
const MEDIA = "memra runs text models (Qwen3, Qwen3-MoE); there is no multimodal projector";
const ROPE = "give the value with --override-kv ARCH.rope... (e.g. qwen3.rope.freq_base=float:N), or --rope-scaling / --rope-scale / --yarn-orig-ctx";
const DRAFT_PLACEMENT = "the draft model runs on the device choice of the main model";
const CONVERSATION = "memra generate completes the prompt as it is; `memra chat` holds conversations";
const PRESET = "llama.cpp's presets download models; memra takes a local GGUF with -m";
const SPEC_TYPE = "memra's speculative decoding is a draft model (--model-draft) or prompt lookup (--lookup)";

/** The tools that score text (perplexity, imatrix, embedding): they sample and generate nothing. */
const SCORING: readonly LlamaTool[] = ["perplexity", "imatrix", "embedding"];
const SAMPLING_FLAGS = [
  "-s", "--seed", "--temp", "--temperature", "--top-k", "--top-p", "--min-p", "--top-nsigma", "--top-n-sigma", "--xtc-probability", "--xtc-threshold",
  "--typical", "--typical-p", "--repeat-last-n", "--repeat-penalty", "--presence-penalty", "--frequency-penalty", "--dry-multiplier", "--dry-base",
  "--dry-allowed-length", "--dry-penalty-last-n", "--dry-sequence-breaker", "--mirostat", "--mirostat-lr", "--mirostat-ent", "-l", "--logit-bias",
  "--samplers", "--sampler-seq", "--sampling-seq", "--adaptive-target", "--adaptive-decay", "--dynatemp-range", "--dynatemp-exp",
  "--grammar", "--grammar-file", "-j", "--json-schema", "-jf", "--json-schema-file", "-n", "--predict", "--n-predict", "--keep",
];
const SCORES = "it scores the text and generates nothing";
const ONE_BACKEND = "memra's scoring commands run on one backend: --device auto takes a GPU when there is one";

/** The embedding texts of -p / -f: llama-embedding's prompt split at --embd-separator (default a newline). */
function embeddingTexts(text: string, separator: string): string[] {
  return text.split(separator).filter((piece) => piece !== "");
}

/** Every flag of llama-completion, llama-cli, llama-server, llama-perplexity, llama-imatrix and llama-embedding that is not memra's own option of the same name. */
const RULES: readonly Rule[] = [
  // --- the scoring tools (first: they share the flags below with other meanings)
  { flags: SAMPLING_FLAGS, value: true, tools: SCORING, action: notice(SCORES) },
  { flags: ["--ignore-eos", "-bs", "--backend-sampling", "--context-shift", "--no-context-shift"], value: false, tools: SCORING, action: notice(SCORES) },
  { flags: ["-p", "--prompt"], value: true, tools: ["perplexity", "imatrix"], action: refuse("give the text as -f FILE") },
  { flags: ["-p", "--prompt"], value: true, tools: ["embedding"], action: mapped("llama-prompt", (text) => [text]) },
  { flags: ["-f", "--file"], value: true, tools: ["embedding"], action: mapped("llama-prompt", (file, flag) => [readFlagFile(file, flag)]) },
  { flags: ["--embd-separator"], value: true, tools: ["embedding"], action: rename("llama-separator") },
  { flags: ["--embd-normalize"], value: true, tools: ["embedding"], action: mapped("no-normalize", embeddingNormalize) },
  { flags: ["--embd-output-format"], value: true, tools: ["embedding"], action: refuse("memra embed prints one JSON array per text and line") },
  { flags: ["--cls-separator"], value: true, tools: ["embedding"], action: notice("memra rerank takes the query and the documents apart") },
  { flags: ["--attention"], value: true, tools: ["embedding"], action: accept((value) => value === "causal", "Qwen3's attention is causal") },
  { flags: ["-c", "--ctx-size"], value: true, tools: ["imatrix"], action: rename("ctx-size") },
  { flags: ["-c", "--ctx-size", "-b", "--batch-size", "-ub", "--ubatch-size"], value: true, tools: ["embedding"], action: notice("memra embed evaluates each text whole, in a cache of its size") },
  { flags: ["-ub", "--ubatch-size"], value: true, tools: ["imatrix"], action: rename("ubatch-size") },
  { flags: ["-ub", "--ubatch-size"], value: true, tools: ["perplexity"], action: notice("memra evaluates -b tokens a step") },
  { flags: ["-ctk", "--cache-type-k", "-ctv", "--cache-type-v"], value: true, tools: ["embedding"], action: notice("memra embed keeps the text's keys and values in f16") },
  { flags: ["-np", "--parallel"], value: true, tools: SCORING, action: notice("memra evaluates one text or window at a time") },
  { flags: ["-ngl", "--gpu-layers", "--n-gpu-layers", "-ncmoe", "--n-cpu-moe"], value: true, tools: SCORING, action: notice(ONE_BACKEND) },
  { flags: ["-cmoe", "--cpu-moe"], value: false, tools: SCORING, action: notice(ONE_BACKEND) },
  { flags: ["--lora", "--lora-scaled"], value: true, tools: SCORING, action: refuse("memra's scoring commands load no LoRA adapter") },
  { flags: ["--rope-scaling", "--rope-scale", "--yarn-orig-ctx"], value: true, tools: SCORING, action: refuse("give the RoPE scaling with --override-kv ARCH.rope.scaling.* (e.g. qwen3.rope.scaling.type=str:yarn)") },
  { flags: ["--log-disable"], value: false, tools: SCORING, action: accept() },
  { flags: ["--no-escape"], value: false, tools: SCORING, action: accept() },
  { flags: ["--save-all-logits"], value: true, tools: ["perplexity"], action: rename("kl-divergence-base") },
  { flags: ["-ofreq"], value: true, tools: ["imatrix"], action: rename("output-frequency") },
  { flags: ["--output-file"], value: true, tools: ["imatrix"], action: rename("output") },
  { flags: ["--ppl"], value: false, tools: ["imatrix"], action: notice("memra imatrix prints no perplexity (memra perplexity does)") },
  { flags: ["--no-ppl"], value: false, tools: ["imatrix"], action: accept() },
  // --- general
  { flags: ["--usage"], value: false, action: rename("help") },
  { flags: ["--version"], value: false, action: refuse("run `memra --version`") },
  { flags: ["-cl", "--cache-list"], value: false, action: refuse(DOWNLOAD) },
  { flags: ["--completion-bash"], value: false, action: refuse("memra has no shell completion script") },
  { flags: ["--verbose-prompt"], value: false, action: notice("memra does not print the prompt's tokens (`memra tokenize` does)") },
  { flags: ["--display-prompt"], value: false, action: notice("memra prints the generated text only") },
  { flags: ["--no-display-prompt"], value: false, action: accept() },
  { flags: ["-co", "--color"], value: true, action: accept() },
  { flags: ["-tb", "--threads-batch"], value: true, action: notice("memra's thread pool runs prompt processing with --threads too") },
  { flags: ["-C", "--cpu-mask", "-Cr", "--cpu-range", "--cpu-strict", "--prio", "--poll", "-Cb", "--cpu-mask-batch", "-Crb", "--cpu-range-batch", "--cpu-strict-batch", "--prio-batch", "--poll-batch"], value: true, action: notice(AFFINITY) },
  { flags: ["-c", "--ctx-size"], value: true, action: rename("ctx") },
  { flags: ["-n", "--predict", "--n-predict"], value: true, tools: ["completion", "cli"], action: rename("max-tokens") },
  { flags: ["-n", "--predict", "--n-predict"], value: true, tools: ["server"], action: rename("n-predict") },
  { flags: ["-b", "--batch-size", "-ub", "--ubatch-size"], value: true, tools: ["completion", "cli", "server"], action: notice("memra chooses how many prompt tokens each step evaluates") },
  { flags: ["--keep"], value: true, tools: ["server"], action: refuse("requests give n_keep (with --context-shift)") },
  { flags: ["--swa-full"], value: false, action: accept() }, // Qwen3 has no sliding-window attention: every layer's cache is full
  { flags: ["--no-context-shift"], value: false, action: accept() },
  { flags: ["-fa", "--flash-attn"], value: true, action: accept(on, "memra has one attention path, fused as flash attention is (-fa on|auto); it cannot be turned off") },
  { flags: ["-sys", "--system-prompt"], value: true, tools: ["completion"], action: refuse(CONVERSATION) },
  { flags: ["-sys", "--system-prompt"], value: true, tools: ["cli"], action: rename("system") },
  { flags: ["-sysf", "--system-prompt-file"], value: true, tools: ["completion"], action: refuse(CONVERSATION) },
  { flags: ["-sysf", "--system-prompt-file"], value: true, tools: ["cli"], action: rename("system", readFlagFile) },
  { flags: ["-f", "--file"], value: true, tools: ["cli"], action: rename("prompt", readFlagFile) },
  { flags: ["--perf", "--no-perf"], value: false, action: accept() },
  { flags: ["-bf", "--binary-file"], value: true, action: refuse("give the prompt as text (-p or -f)") },
  { flags: ["-e", "--escape"], value: false, action: accept() }, // memra processes escapes by default, as llama.cpp
  { flags: ["--keep"], value: true, tools: ["cli"], action: refuse("memra chat leaves the oldest turns out of the prompt when the history outgrows the context") },
  { flags: ["--context-shift"], value: false, tools: ["cli"], action: refuse("memra chat leaves the oldest turns out of the prompt when the history outgrows the context") },
  { flags: ["-ptc", "--print-token-count"], value: true, action: notice("memra prints the token counts at the end") },
  { flags: ["-r", "--reverse-prompt"], value: true, tools: ["completion"], action: rename("stop") },
  { flags: ["-r", "--reverse-prompt"], value: true, tools: ["cli", "server"], action: refuse("memra has no interactive reverse prompt; requests give their stop strings") },
  { flags: ["-sp", "--special"], value: false, action: refuse("memra prints no special token's text in the generated text") },
  { flags: ["-cnv", "--conversation", "-no-cnv", "--no-conversation", "-i", "--interactive", "-if", "--interactive-first", "-mli", "--multiline-input", "--in-prefix-bos"], value: false, tools: ["completion"], action: refuse(CONVERSATION) },
  { flags: ["--in-prefix", "--in-suffix"], value: true, tools: ["completion"], action: refuse(CONVERSATION) },
  { flags: ["-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first"], value: false, tools: ["cli"], action: accept() },
  { flags: ["-no-cnv", "--no-conversation"], value: false, tools: ["cli"], action: refuse("memra chat is a conversation; `memra generate` completes a prompt as it is") },
  { flags: ["-st", "--single-turn"], value: false, action: notice("memra chat -p answers one turn and stops") },
  { flags: ["-mli", "--multiline-input"], value: false, tools: ["cli"], action: refuse("memra chat reads one line per turn") },
  { flags: ["--warmup", "--no-warmup"], value: false, action: accept() },
  { flags: ["--simple-io"], value: false, action: accept() },
  { flags: ["--show-timings", "--no-show-timings"], value: false, action: accept() },
  { flags: ["--server-base"], value: true, action: refuse("memra chat runs the model itself") },
  { flags: ["-o", "--output", "--output-file"], value: true, tools: ["completion", "cli", "server"], action: refuse("redirect standard output") },
  // --- sampling (see sampling-arguments.ts; these are llama.cpp's other spellings)
  { flags: ["-s"], value: true, action: rename("seed") },
  { flags: ["--temperature"], value: true, action: rename("temp") },
  { flags: ["--typical-p"], value: true, action: rename("typical") },
  { flags: ["-l"], value: true, action: rename("logit-bias") },
  { flags: ["--samplers", "--sampler-seq", "--sampling-seq"], value: true, action: refuse("memra's samplers run in llama.cpp's default order, which cannot be changed") },
  { flags: ["--adaptive-target", "--adaptive-decay"], value: true, action: refuse("memra's sampler has no adaptive-p sampler") },
  { flags: ["--dynatemp-range", "--dynatemp-exp"], value: true, action: refuse("memra's sampler has no dynamic temperature") },
  { flags: ["--grammar-file"], value: true, tools: ["completion"], action: rename("grammar") },
  { flags: ["-jf", "--json-schema-file"], value: true, tools: ["completion"], action: rename("json-schema") },
  { flags: ["-j"], value: true, tools: ["completion"], action: rename("json-schema") },
  { flags: ["--grammar", "--grammar-file", "-j", "--json-schema", "-jf", "--json-schema-file"], value: true, tools: ["cli", "server"], action: refuse("memra chat has no grammar; memra serve's requests give theirs (grammar, json_schema, response_format)") },
  { flags: ["-bs", "--backend-sampling"], value: false, action: accept() }, // memra picks greedy and top-k tokens on the backend where it can
  // --- RoPE and the KV cache
  { flags: ["--rope-freq-base", "--rope-freq-scale", "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast"], value: true, action: refuse(ROPE) },
  { flags: ["-gan", "--grp-attn-n", "-gaw", "--grp-attn-w"], value: true, action: refuse("memra has no self-extend (group attention); use --rope-scaling yarn") },
  { flags: ["-kvo", "--kv-offload"], value: false, action: accept() },
  { flags: ["-nkvo", "--no-kv-offload"], value: false, action: refuse("each layer's KV cache lives on that layer's backend") },
  { flags: ["--repack"], value: false, action: accept() },
  { flags: ["-nr", "--no-repack"], value: false, action: notice("memra's CPU backend uses the file's blocks in place (MEMRA_CUDA_REPACK=0 keeps them on CUDA too)") },
  { flags: ["--no-host"], value: false, action: refuse("memra has no equivalent") },
  { flags: ["-ctk", "--cache-type-k"], value: true, action: rename("cache-type-k") },
  { flags: ["-ctv", "--cache-type-v"], value: true, action: rename("cache-type-v") },
  { flags: ["-dt", "--defrag-thold"], value: true, action: accept() }, // a paged cache needs no defragmenting
  { flags: ["-np", "--parallel"], value: true, tools: ["completion", "cli"], action: notice("one prompt is one sequence") },
  { flags: ["-np"], value: true, tools: ["server"], action: rename("parallel") },
  { flags: ["--mlock", "--mmap", "--no-mmap", "-dio", "--direct-io", "-ndio", "--no-direct-io"], value: false, action: notice(LOAD) },
  { flags: ["-lm", "--load-mode", "-lzm", "--lazy-mode"], value: true, action: notice(LOAD) },
  { flags: ["--numa"], value: true, action: notice(AFFINITY) },
  { flags: ["--check-tensors"], value: false, action: notice("memra checks every tensor's type, shape and bounds as it loads, not its values") },
  { flags: ["-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified"], value: false, action: accept() }, // one paged pool serves every sequence
  // --- devices and placement
  { flags: ["-dev", "--device"], value: true, action: rename("device", device) },
  { flags: ["--list-devices"], value: false, action: refuse("memra plan shows the devices and what goes where") },
  { flags: ["-ot", "--override-tensor"], value: true, action: refuse("there is no per-tensor placement; --cpu-moe keeps experts in RAM") },
  { flags: ["-cmoe"], value: false, action: rename("cpu-moe", () => "all") },
  { flags: ["--cpu-moe"], value: false, action: rename("cpu-moe", () => "all") }, // memra's --cpu-moe N|all: see llamaArguments
  { flags: ["-ncmoe", "--n-cpu-moe"], value: true, action: rename("cpu-moe") },
  { flags: ["-ncffn", "--n-cpu-ffn"], value: true, action: refuse("there is no per-tensor placement; --cpu-moe keeps experts in RAM") },
  { flags: ["-ngl", "--gpu-layers", "--n-gpu-layers"], value: true, action: rename("gpu-layers", gpuLayers) },
  { flags: ["-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu"], value: true, action: refuse("layers are split across GPUs in proportion to --gpu-mem") },
  { flags: ["-fit", "--fit"], value: true, action: accept(on, "memra always fits the layers to free memory (--gpu-layers auto); give -ngl N to choose") },
  { flags: ["-fitt", "--fit-target", "-fitc", "--fit-ctx"], value: true, action: refuse("memra fits layers to free memory itself (--gpu-layers auto, --gpu-mem)") },
  { flags: ["--op-offload"], value: false, action: accept() },
  { flags: ["--no-op-offload"], value: false, action: refuse("memra has no equivalent") },
  { flags: ["--control-vector", "--control-vector-scaled", "--control-vector-layer-range"], value: true, action: refuse("memra has no control vectors") },
  { flags: ["-mu", "--model-url", "-dr", "--docker-repo", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft", "--hf-token"], value: true, action: refuse(DOWNLOAD) },
  { flags: ["--offline"], value: false, action: accept() },
  // --- chat templates and reasoning
  { flags: ["--jinja"], value: false, action: accept() },
  { flags: ["--no-jinja"], value: false, action: refuse("memra renders the GGUF's Jinja chat template (or --chat-template-file's)") },
  { flags: ["--chat-template"], value: true, tools: ["cli", "server"], action: rename("chat-template", templateText) },
  { flags: ["--chat-template-file"], value: true, tools: ["cli", "server"], action: rename("chat-template", (file, flag) => templateText(readFlagFile(file, flag), flag)) },
  { flags: ["--chat-template", "--chat-template-file", "--reasoning-format", "-rea", "--reasoning", "--reasoning-budget", "--reasoning-effort", "--reasoning-budget-message", "--chat-template-kwargs"], value: true, tools: ["completion"], action: refuse(CONVERSATION) },
  { flags: ["--reasoning-preserve", "--no-reasoning-preserve", "--skip-chat-parsing", "--no-skip-chat-parsing"], value: false, tools: ["completion"], action: refuse(CONVERSATION) },
  { flags: ["--reasoning-format"], value: true, tools: ["cli"], action: accept() }, // memra chat shows the reasoning on stderr, the answer on stdout
  { flags: ["--reasoning-format"], value: true, tools: ["server"], action: rename("reasoning-format") },
  { flags: ["-rea", "--reasoning"], value: true, tools: ["cli", "server"], action: mapped("no-think", reasoning) },
  { flags: ["--reasoning-budget"], value: true, tools: ["cli", "server"], action: mapped("no-think", reasoningBudget) },
  { flags: ["--reasoning-effort", "--reasoning-budget-message"], value: true, tools: ["cli", "server"], action: refuse("memra has no reasoning budget but 0 (-rea off: no thinking)") },
  { flags: ["--reasoning-preserve", "--no-reasoning-preserve"], value: false, tools: ["cli", "server"], action: refuse("the chat template decides which earlier reasoning stays in the prompt") },
  { flags: ["--skip-chat-parsing", "--no-skip-chat-parsing"], value: false, tools: ["cli", "server"], action: refuse("memra parses Qwen3's reasoning and tool calls itself") },
  { flags: ["--chat-template-kwargs"], value: true, tools: ["cli", "server"], action: refuse("requests give chat_template_kwargs; -rea off turns thinking off for all") },
  // --- logging
  { flags: ["--log-disable"], value: false, action: rename("quiet") },
  { flags: ["-v", "--verbose", "--log-verbose", "--log-prefix", "--no-log-prefix", "--log-timestamps", "--no-log-timestamps"], value: false, action: accept() },
  { flags: ["--log-colors", "-lv", "--verbosity", "--log-verbosity"], value: true, action: accept() },
  { flags: ["--log-file", "--log-prompts-dir"], value: true, action: refuse("redirect standard error") },
  // --- speculative decoding
  { flags: ["-md", "--spec-draft-model"], value: true, action: rename("model-draft") },
  { flags: ["--draft", "--draft-n", "--spec-draft-n-max"], value: true, action: rename("draft-max") },
  { flags: ["--spec-draft-p-min"], value: true, action: rename("draft-p-min") },
  { flags: ["--draft-min", "--draft-n-min", "--spec-draft-n-min", "--spec-draft-p-split", "--draft-p-split"], value: true, action: refuse("memra drafts up to --draft-max tokens while the draft model is at least --draft-p-min sure") },
  { flags: ["--spec-draft-backend-sampling", "--no-spec-draft-backend-sampling"], value: false, action: accept() },
  {
    flags: ["-ctkd", "--cache-type-k-draft", "--spec-draft-type-k", "-ctvd", "--cache-type-v-draft", "--spec-draft-type-v", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-draft-ngl", "-devd", "--device-draft", "--spec-draft-device", "-td", "--threads-draft", "--spec-draft-threads", "-tbd", "--threads-batch-draft", "--spec-draft-threads-batch", "-otd", "--override-tensor-draft", "--spec-draft-override-tensor", "-ncmoed", "--n-cpu-moe-draft", "--spec-draft-n-cpu-moe", "--spec-draft-ncmoe"],
    value: true,
    action: refuse(DRAFT_PLACEMENT),
  },
  { flags: ["-cmoed", "--cpu-moe-draft", "--spec-draft-cpu-moe"], value: false, action: refuse(DRAFT_PLACEMENT) },
  {
    flags: ["-Cd", "--cpu-mask-draft", "--spec-draft-cpu-mask", "-Crd", "--cpu-range-draft", "--spec-draft-cpu-range", "--cpu-strict-draft", "--spec-draft-cpu-strict", "--prio-draft", "--spec-draft-prio", "--poll-draft", "--spec-draft-poll", "-Cbd", "--cpu-mask-batch-draft", "--spec-draft-cpu-mask-batch", "--cpu-strict-batch-draft", "--spec-draft-cpu-strict-batch", "--prio-batch-draft", "--spec-draft-prio-batch", "--poll-batch-draft", "--spec-draft-poll-batch"],
    value: true,
    action: notice(AFFINITY),
  },
  { flags: ["--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft"], value: true, action: refuse(DOWNLOAD) },
  { flags: ["--spec-type"], value: true, action: accept((value) => value === "none", SPEC_TYPE) },
  {
    flags: ["--spec-synth-len", "--spec-synth-rates", "--spec-ngram-mod-n-min", "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match", "--spec-ngram-simple-size-n", "--spec-ngram-simple-size-m", "--spec-ngram-simple-min-hits", "--spec-ngram-map-k-size-n", "--spec-ngram-map-k-size-m", "--spec-ngram-map-k-min-hits", "--spec-ngram-map-k4v-size-n", "--spec-ngram-map-k4v-size-m", "--spec-ngram-map-k4v-min-hits", "--spec-ngram-size-n", "--spec-ngram-size-m", "--spec-ngram-min-hits", "-lcs", "--lookup-cache-static", "-lcd", "--lookup-cache-dynamic"],
    value: true,
    action: refuse(SPEC_TYPE),
  },
  { flags: ["--gpt-oss-20b-default", "--gpt-oss-120b-default", "--vision-gemma-4b-default", "--vision-gemma-12b-default", "--spec-default", "--embd-gemma-default", "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec", "--fim-qwen-30b-default"], value: false, action: refuse(PRESET) },
  // --- multimodal
  { flags: ["-mm", "--mmproj", "-mmu", "--mmproj-url", "-mmdev", "--mmproj-device", "--image", "--audio", "--video", "--image-min-tokens", "--image-max-tokens", "--video-fps", "--video-timestamp-interval", "--video-ffmpeg-dir", "--mtmd-batch-max-tokens", "--media-path"], value: true, action: refuse(MEDIA) },
  { flags: ["--mmproj-auto", "--mmproj-offload", "--no-mmproj-offload"], value: false, action: refuse(MEDIA) },
  { flags: ["--no-mmproj", "--no-mmproj-auto"], value: false, action: accept() },
  // --- server
  { flags: ["-ctxcp", "--ctx-checkpoints", "--swa-checkpoints", "-cram", "--cache-ram", "--kv-unified-per-slot", "-cms", "--checkpoint-min-step", "-sps", "--slot-prompt-similarity"], value: true, action: notice("memra's prefix cache keeps whole KV blocks of every prompt until their room is needed") },
  { flags: ["--cache-idle-slots", "--no-cache-idle-slots"], value: false, action: notice("memra's prefix cache keeps whole KV blocks of every prompt until their room is needed") },
  { flags: ["--spm-infill"], value: false, action: refuse("memra's /infill uses Qwen's prefix-suffix-middle order") },
  { flags: ["--pooling"], value: true, tools: ["server"], action: notice("memra pools embeddings as the GGUF says (Qwen3-Embedding: the last token)") },
  { flags: ["-cb", "--cont-batching"], value: false, action: accept() },
  { flags: ["-nocb", "--no-cont-batching"], value: false, action: refuse("memra always batches requests continuously") },
  { flags: ["-a"], value: true, action: rename("alias") },
  { flags: ["--tags"], value: true, action: refuse("memra's /v1/models lists no tags") },
  { flags: ["--embd-normalize"], value: true, action: refuse("requests give their embeddings' normalisation (embd_normalize)") },
  { flags: ["--reuse-port"], value: false, action: refuse("memra listens on one socket") },
  { flags: ["--path", "--api-prefix", "--ui-config", "--webui-config", "--ui-config-file", "--webui-config-file", "--tools", "--tools-runtime", "--mcp-servers-config", "--mcp-servers-json"], value: true, action: refuse("memra serve has no web UI, static files or built-in tools") },
  { flags: ["--cors-origins", "--cors-methods", "--cors-headers"], value: true, action: refuse("memra serve sends no CORS headers; put it behind a proxy that does") },
  { flags: ["--cors-credentials", "--no-cors-credentials"], value: false, action: refuse("memra serve sends no CORS headers; put it behind a proxy that does") },
  { flags: ["--ui-mcp-proxy", "--webui-mcp-proxy", "-ag", "--agent", "--ui", "--webui"], value: false, action: refuse("memra serve has no web UI or agent") },
  { flags: ["--no-ui-mcp-proxy", "--no-webui-mcp-proxy", "-no-ag", "--no-agent", "--no-ui", "--no-webui"], value: false, action: accept() },
  { flags: ["--embedding", "--embeddings", "--rerank", "--reranking"], value: false, action: accept() }, // /v1/embeddings and /v1/rerank are always served
  { flags: ["--ssl-key-file", "--ssl-cert-file"], value: true, action: refuse("memra serve speaks plain HTTP; put a TLS proxy in front of it") },
  { flags: ["-to", "--timeout", "--sse-ping-interval", "--threads-http"], value: true, action: notice("memra serve keeps connections as long as their requests run") },
  { flags: ["--cache-prompt"], value: false, action: accept() },
  { flags: ["--no-cache-prompt"], value: false, action: refuse("memra always reuses cached prompt prefixes") },
  { flags: ["--cache-reuse"], value: true, action: refuse("memra reuses a cached prefix in whole blocks, without shifting chunks of the KV cache") },
  { flags: ["--metrics", "--props", "--slots"], value: false, action: accept() }, // always served
  { flags: ["--no-slots"], value: false, action: refuse("GET /slots is always served") },
  { flags: ["--models-dir", "--models-preset", "--models-max"], value: true, action: refuse("memra serve serves one model (and its LoRA modules)") },
  { flags: ["--models-autoload", "--no-models-autoload"], value: false, action: refuse("memra serve serves one model (and its LoRA modules)") },
  { flags: ["--prefill-assistant"], value: false, action: accept() },
  { flags: ["--no-prefill-assistant"], value: false, action: refuse("a trailing assistant message is always continued") },
  { flags: ["--sleep-idle-seconds"], value: true, action: refuse("memra serve keeps its model loaded") },
];

const NEGATIVE_VALUE = /^-(\d|\.\d|inf)/i;

/** The rule of `flag` for `tool`, if llama.cpp's flag is not memra's own. */
function ruleOf(tool: LlamaTool, flag: string): Rule | undefined {
  return RULES.find((rule) => rule.flags.includes(flag) && (rule.tools === undefined || rule.tools.includes(tool)));
}

/**
 * llama.cpp switches that are memra options taking a value, of the same name: memra's own reading
 * is kept when a value follows (--cpu-moe N|all; memra perplexity's --kl-divergence BASE.gguf, its
 * switch form turned into memra's by normalizeKlDivergenceFlag).
 */
export const SWITCH_OR_VALUE: readonly string[] = ["--cpu-moe", "--kl-divergence"];

/** The memra option a rename's pseudo target ends in (see llamaArguments). */
const PSEUDO_TARGETS: Readonly<Record<string, string>> = { "cache-type-k": "kv-type", "cache-type-v": "kv-type", "llama-prompt": "text", "llama-separator": "text" };

/** Every flag the rules know for `tool`, and the memra option a rewritten one becomes (for the tests). */
export function llamaRuleFlags(tool: LlamaTool): Map<string, { value: boolean; kind: Action["kind"]; to?: string }> {
  const flags = new Map<string, { value: boolean; kind: Action["kind"]; to?: string }>();
  for (const rule of RULES) {
    if (rule.tools !== undefined && !rule.tools.includes(tool)) continue;
    const to = rule.action.kind === "rename" ? (PSEUDO_TARGETS[rule.action.to] ?? rule.action.to) : undefined;
    for (const flag of rule.flags) if (!flags.has(flag)) flags.set(flag, { value: rule.value, kind: rule.action.kind, ...(to ? { to } : {}) });
  }
  return flags;
}

/**
 * llama.cpp's LLAMA_ARG_* variables that `tool` reads (llama-environment.ts), each as the flag it
 * stands for, but those whose option the command line gives (which wins, as in llama.cpp). A bool
 * option reads on/enabled/true/1 and off/disabled/false/0 (LLAMA_ARG_NO_X: off); a switch without
 * a negation is given when its variable is truthy. HF_TOKEN and the like are left alone.
 */
function environmentArguments(tool: LlamaTool, commandLine: readonly string[], environment: Readonly<Record<string, string | undefined>>): { name: string; args: string[] }[] {
  const given = new Set(commandLine.filter((arg) => arg.startsWith("-")).map((arg) => (arg.startsWith("--") && arg.includes("=") ? arg.slice(0, arg.indexOf("=")) : arg)));
  const found: { name: string; args: string[] }[] = [];
  for (const [name, flags, negated, takesValue, tools] of LLAMA_ENVIRONMENT) {
    if (!name.startsWith("LLAMA_") || !tools.split(",").includes(tool)) continue;
    if ([...flags, ...negated].some((flag) => given.has(flag))) continue;
    const negatedName = name.replace("LLAMA_ARG_", "LLAMA_ARG_NO_");
    if (negated.length > 0 && environment[negatedName] !== undefined) {
      found.push({ name: negatedName, args: [negated[0]!] });
      continue;
    }
    const value = environment[name];
    if (value === undefined) continue;
    if (takesValue) found.push({ name, args: [flags[0]!, value] });
    else if (negated.length > 0) {
      if (TRUTHY.includes(value)) found.push({ name, args: [flags[0]!] });
      else if (FALSEY.includes(value)) found.push({ name, args: [negated[0]!] });
      else throw new CliError(`${name}=${value}: a llama.cpp boolean variable is on, enabled, true, 1, off, disabled, false or 0`);
    } else if (TRUTHY.includes(value)) found.push({ name, args: [flags[0]!] });
  }
  return found;
}

/**
 * The arguments with llama.cpp's flags for `tool` turned into the command's options (`options`: its
 * parseArgs specs). Notices (flags that change nothing here) go to `notice`.
 *
 * @throws CliError naming a llama.cpp flag memra cannot honour, and why, or a bad value.
 */
export function llamaArguments(
  tool: LlamaTool,
  commandLine: readonly string[],
  options: OptionSpecs,
  notice: (message: string) => void = () => {},
  environment: Readonly<Record<string, string | undefined>> = process.env,
): string[] {
  const out: string[] = [];
  const short = new Map<string, string>();
  for (const [name, spec] of Object.entries(options)) if (spec.short) short.set(`-${spec.short}`, name);
  const noticed: string[] = [];
  const ignored: string[] = [];
  let cacheK: string | undefined;
  let cacheV: string | undefined;
  let embeddingPrompt: string | undefined;
  let embeddingSeparator = "\n";
  // LLAMA_ARG_* variables first (as llama.cpp reads them), each as its flag: the command line wins
  const args: string[] = [];
  const originOf: string[] = []; // the variable each argument comes from (none: the command line)
  for (const { name, args: flagAndValue } of environmentArguments(tool, commandLine, environment)) {
    args.push(...flagAndValue);
    originOf.push(...flagAndValue.map(() => name));
  }
  args.push(...commandLine);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      out.push(...args.slice(i));
      break;
    }
    const equals = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const flag = equals > 0 ? arg.slice(0, equals) : arg;
    const inline = equals > 0 ? arg.slice(equals + 1) : undefined;
    let rule = flag.startsWith("-") ? ruleOf(tool, flag) : undefined;
    const own = flag.startsWith("--") ? flag.slice(2) : short.get(flag);
    const spec = own === undefined ? undefined : options[own];
    // memra's --cpu-moe N|all, or llama.cpp's --cpu-moe switch
    if (flag === "--cpu-moe" && (inline !== undefined || CPU_MOE_VALUE.test(args[i + 1] ?? ""))) rule = undefined;
    if (rule === undefined) {
      // memra's own option (or not an option): a value is joined to it, so that one that looks
      // like a negative number is not read as a flag.
      if (spec?.type === "string" && inline === undefined && i + 1 < args.length) out.push(`--${own}=${args[++i]!}`);
      else out.push(arg);
      continue;
    }
    let value: string | undefined;
    if (rule.value) {
      value = inline ?? args[++i];
      if (value === undefined) throw new CliError(`${flag} needs a value`);
      if (inline === undefined && value.startsWith("-") && !NEGATIVE_VALUE.test(value)) throw new CliError(`${flag} needs a value, got the flag ${value}`);
    } else if (inline !== undefined) {
      throw new CliError(`${flag} takes no value, got "${inline}"`);
    }
    const action = rule.action;
    switch (action.kind) {
      case "refuse":
        // a variable of the environment is ambient, not asked for: it is ignored, with its reason
        if (originOf[i] !== undefined) {
          ignored.push(`${originOf[i]} (${flag}: ${action.why})`);
          break;
        }
        throw new CliError(`llama.cpp's ${flag} is not supported by memra: ${action.why}`);
      case "notice":
        noticed.push(`${originOf[i] ?? flag}${value === undefined ? "" : originOf[i] !== undefined ? `=${value}` : ` ${value}`} (${action.why})`);
        break;
      case "accept":
        if (value !== undefined && action.accepts && !action.accepts(value)) {
          if (originOf[i] !== undefined) ignored.push(`${originOf[i]}=${value} (${flag} ${value}: ${action.otherwise})`);
          else throw new CliError(`llama.cpp's ${flag} ${value} is not supported by memra: ${action.otherwise}`);
        }
        break;
      case "rename":
        if (action.to === "llama-prompt") embeddingPrompt = action.map(value!, flag)[0];
        else if (action.to === "llama-separator") embeddingSeparator = processEscapes(value!);
        else if (action.to === "cache-type-k") cacheK = value;
        else if (action.to === "cache-type-v") cacheV = value;
        else out.push(...action.map(value ?? "", flag));
    }
  }
  if (cacheK !== undefined || cacheV !== undefined) {
    const k = cacheK ?? "f16";
    const v = cacheV ?? "f16";
    if (k !== v) throw new CliError(`-ctk ${k} and -ctv ${v}: memra stores keys and values in one type; give both the same (memra's --kv-type)`);
    out.push(`--kv-type=${k}`);
  }
  if (embeddingPrompt !== undefined) for (const text of embeddingTexts(processEscapes(embeddingPrompt), embeddingSeparator)) out.push(`--text=${text}`);
  if (noticed.length > 0) notice(`memra: llama.cpp flags that change nothing here: ${noticed.join("; ")}`);
  if (ignored.length > 0) notice(`memra: ignoring llama.cpp environment variables it cannot honour: ${ignored.join("; ")}`);
  return out;
}
