import { loadModel } from "@memra/core";
import { resolveOptions, syntheticLoraFile, syntheticModelFile } from "@memra/synthetic";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
let model = "";

function run(args: string[], stdin?: string, env?: Record<string, string>) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdin: stdin === undefined ? "ignore" : Buffer.from(stdin), stdout: "pipe", stderr: "pipe", ...(env ? { env: { ...process.env, ...env } } : {}) });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

beforeAll(async () => {
  model = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
});

describe("memra generate", () => {
  it("prints the JSON result of the library's greedy completion", async () => {
    const result = run(["generate", "-m", model, "-p", "The quick brown fox", "-n", "10", "--temp", "0", "--json"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const parsed = JSON.parse(result.stdout);
    const expected = await loadModel(model).complete("The quick brown fox", { temperature: 0, maxTokens: 10 });
    expect(parsed.prompt_tokens).toEqual(expected.promptTokens);
    expect(parsed.tokens).toEqual(expected.tokens);
    expect(parsed.text).toBe(expected.text);
    expect(parsed.finish_reason).toBe("length");
    expect(parsed.timings.prefill_tps).toBeGreaterThan(0);
    expect(parsed.timings.decode_tps).toBeGreaterThan(0);
  });

  it("streams the text to stdout and reports speed on stderr", () => {
    const json = JSON.parse(run(["generate", "-m", model, "-p", "Hello", "-n", "8", "--temp", "0", "--json"]).stdout);
    const streamed = run(["generate", "-m", model, "-p", "Hello", "-n", "8", "--temp", "0"]);
    expect(streamed.code).toBe(0);
    expect(streamed.stdout).toBe(`${json.text}\n`);
    expect(streamed.stderr).toMatch(/\[length\] 1 prompt tokens at [\d.]+ t\/s, 8 generated at [\d.]+ t\/s/);
  });

  it("is reproducible with --seed and differs across seeds", () => {
    const sample = (seed: string) => JSON.parse(run(["generate", "-m", model, "-p", "Once upon a time", "-n", "20", "--temp", "0.8", "--seed", seed, "--json"]).stdout);
    const [a, b, c] = [sample("42"), sample("42"), sample("43")];
    expect(a.text).toBe(b.text);
    expect(a.tokens).toEqual(b.tokens);
    expect(c.tokens).not.toEqual(a.tokens);
  });

  it("--lookup and --model-draft decode speculatively: the same tokens, the drafts counted", () => {
    const args = ["generate", "-m", model, "-p", "one two three one two three one two", "-n", "24", "--temp", "0", "--json"];
    const plain = JSON.parse(run(args).stdout);
    const lookup = JSON.parse(run([...args, "--lookup", "--draft-max", "4"]).stdout);
    expect(lookup.tokens).toEqual(plain.tokens);
    expect(lookup.speculative.accepted).toBeGreaterThan(0);
    expect(plain.speculative).toBeUndefined();
    // A draft model with the model's own weights: every draft is accepted.
    const drafted = JSON.parse(run([...args, "--model-draft", model, "--draft-p-min", "0"]).stdout);
    expect(drafted.tokens).toEqual(plain.tokens);
    expect(drafted.speculative.drafted).toBeGreaterThan(0);
    expect(drafted.speculative.accepted).toBe(drafted.speculative.drafted);
    const streamed = run(["generate", "-m", model, "-p", "one two three one two three one two", "-n", "24", "--temp", "0", "--lookup"]);
    expect(streamed.stderr).toMatch(/24 generated at [\d.]+ t\/s; \d+ of \d+ draft tokens accepted/);

    const demo = new URL("../../assets/memra-demo-qwen3-q8_0.gguf", import.meta.url).pathname;
    const refusals: [string[], RegExp][] = [
      [["--model-draft", demo], /--model-draft ".*memra-demo-qwen3-q8_0.gguf": it has 4096 tokens, the model 151936: a draft model needs the same vocabulary/],
      [["--model-draft", "/nonexistent.gguf"], /nonexistent\.gguf/],
      [["--lookup", "--model-draft", model], /give --model-draft or --lookup, not both/],
      [["--draft-max", "4"], /--draft-max needs --model-draft or --lookup/],
      [["--lookup", "--draft-max", "0"], /--draft-max must be a positive integer, got "0"/],
      [["--lookup", "--draft-max", "65"], /--draft-max must be at most 64/],
      [["--model-draft", model, "--draft-p-min", "2"], /--draft-p-min must be a number from 0 to 1, got "2"/],
    ];
    for (const [extra, message] of refusals) {
      const refused = run([...args, ...extra]);
      expect(refused.code, extra.join(" ")).toBe(1);
      expect(refused.stderr).toMatch(message);
    }
  });

  it("--lora and --lora-scaled apply LoRA adapters; a wrong one is named", async () => {
    const options = resolveOptions("tiny", { weightType: "q8_0" });
    const lora = await syntheticLoraFile(options, { rank: 4, alpha: 4, seed: 9, strength: 0.5 });
    const args = ["generate", "-m", model, "-p", "The quick brown fox", "-n", "8", "--temp", "0", "--json"];
    const plain = JSON.parse(run(args).stdout);
    const expected = await loadModel(model, { lora: [{ path: lora }] }).complete("The quick brown fox", { temperature: 0, maxTokens: 8 });
    const adapted = JSON.parse(run([...args, "--lora", lora]).stdout);
    expect(adapted.tokens).toEqual(expected.tokens);
    expect(adapted.tokens).not.toEqual(plain.tokens);
    expect(JSON.parse(run([...args, "--lora-scaled", `${lora}:0`]).stdout).tokens).toEqual(plain.tokens);
    expect(JSON.parse(run([...args, "--lora", lora, "--lora-init-without-apply"]).stdout).tokens).toEqual(plain.tokens);
    expect(run([...args, "--lora-init-without-apply"]).stderr).toMatch(/--lora-init-without-apply needs --lora or --lora-scaled/);
    const bad = run([...args, "--lora-scaled", lora]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--lora-scaled takes FILE:SCALE/);
    const notAdapter = run([...args, "--lora", model]);
    expect(notAdapter.code).toBe(1);
    expect(notAdapter.stderr).toMatch(/LoRA adapter ".*": general\.type is missing, expected "adapter"/);
  });

  it("-f FILE (and -f - for standard input) reads the prompt less one final newline, as llama.cpp's -f", () => {
    const prompt = "First line\n  second line, indented\n";
    const file = join(mkdtempSync(join(tmpdir(), "memra-prompt-")), "prompt.txt");
    writeFileSync(file, prompt);
    const args = ["generate", "-m", model, "-n", "6", "--temp", "0", "--json"];
    const expected = JSON.parse(run([...args, "-p", prompt.slice(0, -1)]).stdout);
    expect(JSON.parse(run([...args, "-p", prompt]).stdout).prompt_tokens).not.toEqual(expected.prompt_tokens);
    expect(JSON.parse(run([...args, "-f", file]).stdout).prompt_tokens).toEqual(expected.prompt_tokens);
    expect(JSON.parse(run([...args, "-f", file]).stdout).tokens).toEqual(expected.tokens);
    expect(JSON.parse(run([...args, "-f", "-"], prompt).stdout).prompt_tokens).toEqual(expected.prompt_tokens);
    expect(run([...args, "-f", file, "-p", "x"]).stderr).toMatch(/give -p PROMPT or -f FILE, not both/);
    const missing = run([...args, "-f", `${file}.missing`]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/-f ".*prompt\.txt\.missing": /);
  });

  it("--ignore-eos generates -n tokens where the model would end (the demo model ends \"Hello\" early)", () => {
    const args = ["generate", "-p", "Hello", "-n", "24", "--temp", "0", "--json", "--quiet"];
    const plain = JSON.parse(run(args).stdout);
    expect(plain.finish_reason).toBe("stop");
    expect(plain.tokens.length).toBeLessThan(24);
    const ignoring = JSON.parse(run([...args, "--ignore-eos"]).stdout);
    expect(ignoring.finish_reason).toBe("length");
    expect(ignoring.tokens).toHaveLength(24);
    expect(ignoring.tokens.slice(0, plain.tokens.length - 1)).toEqual(plain.tokens.slice(0, -1));
    expect(ignoring.tokens).not.toContain(plain.tokens.at(-1));
  });

  it("--prompt-cache FILE: the first run writes the prompt's KV state, the next reuses it and answers the same", () => {
    const directory = mkdtempSync(join(tmpdir(), "memra-prompt-cache-"));
    const cache = join(directory, "prompt.state");
    const prompt = "In the beginning the universe was created. This has made a lot of people very angry and been widely regarded as a bad move.";
    const args = ["generate", "-m", model, "-p", prompt, "-n", "6", "--temp", "0", "--ignore-eos", "--json", "--quiet", "--prompt-cache", cache];
    const first = JSON.parse(run(args).stdout);
    expect(first.cached_prompt_tokens).toBe(0);
    expect(existsSync(cache)).toBe(true);
    const whole = Math.floor(first.prompt_tokens.length / 16) * 16;
    expect(whole).toBeGreaterThanOrEqual(16);
    // The second run streams: its text is the first's, and the speed line counts the cached tokens.
    const second = run(args.filter((arg) => arg !== "--json" && arg !== "--quiet"));
    expect(second.code).toBe(0);
    expect(second.stdout).toBe(`${first.text}\n`);
    expect(second.stderr).toMatch(new RegExp(`\\[length\\] ${first.prompt_tokens.length} prompt tokens \\(${whole} cached\\) at`));

    // -ro: read, never written; -all: the generated tokens' state too.
    const before = readFileSync(cache);
    const longer = [...args.slice(0, 4), `${prompt} And then?`, ...args.slice(5)];
    expect(JSON.parse(run([...longer, "--prompt-cache-ro"]).stdout).cached_prompt_tokens).toBe(whole);
    expect(readFileSync(cache).equals(before)).toBe(true);
    const all = JSON.parse(run([...args, "--prompt-cache-all"]).stdout);
    const loader = loadModel(model);
    expect(loader.loadState(cache).tokens).toEqual([...all.prompt_tokens, ...all.tokens]);
    loader.dispose();

    // A file that is not a state stops the command before it generates, and is left as it was.
    writeFileSync(cache, "not a state");
    const bad = run(args);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toBe("");
    expect(bad.stderr).toMatch(/--prompt-cache: KV state .*prompt\.state: \d+ bytes: too short|not a Memra KV state file/);
    expect(bad.stderr).toContain("delete the file to start it again");
    expect(readFileSync(cache, "utf8")).toBe("not a state");
    expect(run(["generate", "-m", model, "-p", "x", "--prompt-cache-ro"]).stderr).toMatch(/--prompt-cache-all and --prompt-cache-ro need --prompt-cache FILE/);
  });

  it("--context-shift generates past --ctx as the library's contextShift does; --keep needs it", async () => {
    const prompt = "Once upon a time, in a land far away, there lived";
    const args = ["generate", "-m", model, "-p", prompt, "-n", "70", "--ctx", "48", "--temp", "0", "--ignore-eos", "--json", "--quiet"];
    const shifted = run([...args, "--context-shift", "--keep", "4"]);
    expect(shifted.stderr).toBe("");
    const parsed = JSON.parse(shifted.stdout);
    const library = loadModel(model, { kvCacheTokens: 48 });
    const expected = await library.complete(prompt, { temperature: 0, maxTokens: 70, ignoreEos: true, contextShift: { keep: 4 } });
    library.dispose();
    expect(expected.contextShift!.shifts).toBeGreaterThanOrEqual(2);
    expect(parsed.tokens).toEqual(expected.tokens);
    expect(parsed.tokens).toHaveLength(70);
    expect(parsed.context_shift).toEqual({ shifts: expected.contextShift!.shifts, discarded_tokens: expected.contextShift!.discardedTokens });
    expect(run(args.filter((arg) => arg !== "--json")).code).toBe(1); // without it, -n 70 does not fit a 48-token context
    const keepAlone = run([...args, "--keep", "4"]);
    expect([keepAlone.code, keepAlone.stderr]).toEqual([1, expect.stringContaining("--keep needs --context-shift")]);
    expect(run([...args, "--context-shift", "--keep", "-2"]).stderr).toContain('--keep must be -1 (the whole prompt) or a number of tokens, got "-2"');
  });

  it("works without -m, saying on stderr which model it uses", () => {
    const result = run(["generate", "-p", "Hello", "-n", "4", "--temp", "0"]);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain("using the built-in demo model");
    expect(result.stderr).toContain("pass -m path/to/model.gguf");
    expect(result.stdout.length).toBeGreaterThan(1);
  });

  it("names bad options with exit code 1", () => {
    const word = run(["generate", "-m", model, "-p", "x", "--temp", "hot"]);
    expect(word.code).toBe(1);
    expect(word.stderr).toMatch(/--temp must be a number, got "hot"/);
    const negative = run(["generate", "-m", model, "-p", "x", "--temp=-1"]);
    expect(negative.code).toBe(1);
    expect(negative.stderr.trim().split("\n")).toHaveLength(1);
    expect(negative.stderr).toMatch(/temperature/);
    expect(run(["generate", "-m", model]).stderr).toContain("missing -p PROMPT");
  });
});

describe("memra generate and chat: llama.cpp's --mirostat, --mirostat-lr, --mirostat-ent and --top-nsigma", () => {
  it("reach the sampler as the library's mirostat and topNSigma options", async () => {
    const loaded = loadModel(model);
    const prompt = "Once upon a time";
    const cases: [string[], object][] = [
      [["--mirostat", "2", "--mirostat-ent", "3", "--mirostat-lr", "0.3"], { mirostat: { mode: 2, tau: 3, eta: 0.3 } }],
      [["--mirostat", "1"], { mirostat: { mode: 1 } }],
      [["--top-nsigma", "0.5"], { topNSigma: 0.5 }],
      [["--top-n-sigma", "-1", "--top-k", "0"], { topNSigma: -1, topK: 0 }],
    ];
    const plain = await loaded.complete(prompt, { maxTokens: 12, temperature: 1.2, seed: 5 });
    let differing = 0;
    for (const [flags, options] of cases) {
      const result = run(["generate", "-m", model, "-p", prompt, "-n", "12", "--temp", "1.2", "--seed", "5", "--json", ...flags]);
      expect(result.stderr).toBe("");
      const expected = await loaded.complete(prompt, { maxTokens: 12, temperature: 1.2, seed: 5, ...options });
      expect(JSON.parse(result.stdout).tokens).toEqual(expected.tokens);
      if (expected.tokens.join() !== plain.tokens.join()) differing++;
    }
    expect(differing).toBeGreaterThanOrEqual(3); // the options change the tokens (all but maybe top-nσ off with top-k off)
    const chat = run(["chat", "-m", model, "-p", "Hi", "--no-think", "-n", "6", "--temp", "1.2", "--seed", "5", "--quiet", "--mirostat", "2", "--top-nsigma", "1"]);
    expect(chat.code).toBe(0);
    const answer = await loaded.chat([{ role: "user", content: "Hi" }], { enableThinking: false, maxTokens: 6, temperature: 1.2, seed: 5, mirostat: { mode: 2 }, topNSigma: 1 });
    expect(chat.stdout).toBe(`${answer.answer}\n`);
    loaded.dispose();
  });

  it("names a bad value", () => {
    const mode = run(["generate", "-m", model, "-p", "x", "--mirostat", "3"]);
    expect(mode.code).toBe(1);
    expect(mode.stderr).toMatch(/--mirostat must be 0 \(off\), 1 \(Mirostat\) or 2 \(Mirostat 2.0\), got "3"/);
    expect(run(["chat", "-m", model, "-p", "x", "--mirostat-ent", "0"]).stderr).toMatch(/--mirostat-ent \(tau\) must be > 0, got 0/);
    expect(run(["generate", "-m", model, "-p", "x", "--mirostat-lr", "fast"]).stderr).toMatch(/--mirostat-lr must be a number, got "fast"/);
    expect(run(["generate", "-m", model, "-p", "x", "--top-nsigma", "1", "--top-n-sigma", "2"]).stderr).toMatch(/one option: give one/);
  });
});

describe("memra generate and chat with llama.cpp's command lines", () => {
  it("generate: llama-completion's flags give what memra's own spellings give, escapes read as llama.cpp reads them", () => {
    const llama = run(["generate", "-m", model, "-p", "Once\\nupon", "-n", "6", "-s", "5", "--temperature", "0.9", "-c", "128", "-ngl", "0", "-fa", "on", "-b", "64", "--repeat-last-n", "16", "--presence-penalty", "0.5", "-l", "15+2", "--json"]);
    expect(llama.code).toBe(0);
    expect(llama.stderr).toContain("memra: llama.cpp flags that change nothing here: -b 64 (memra chooses how many prompt tokens each step evaluates)");
    const own = run(["generate", "-m", model, "-p", "Once\nupon", "--max-tokens", "6", "--seed", "5", "--temp", "0.9", "--ctx", "128", "--repeat-last-n", "16", "--presence-penalty", "0.5", "--logit-bias", "15+2", "--json"]);
    expect(own.code).toBe(0);
    const [a, b] = [JSON.parse(llama.stdout), JSON.parse(own.stdout)];
    expect(a.prompt_tokens).toEqual(b.prompt_tokens);
    expect(a.tokens).toEqual(b.tokens);
    expect(a.seed).toBe(5);
  });

  it("generate -n -1 runs until the context (LLAMA_ARG_CTX_SIZE) is full; -ctk/-ctv set the KV type; a refusal is one line and exit code 1", async () => {
    // the context from llama.cpp's LLAMA_ARG_CTX_SIZE, as llama-completion reads it
    const full = JSON.parse(run(["generate", "-m", model, "-p", "Hello", "-n", "-1", "--temp", "0", "--ignore-eos", "-ctk", "f32", "-ctv", "f32", "--json"], undefined, { LLAMA_ARG_CTX_SIZE: "48" }).stdout);
    expect(full.prompt_tokens.length + full.tokens.length).toBe(48);
    expect(full.finish_reason).toBe("length");
    const expected = await loadModel(model, { kvType: "f32" }).complete("Hello", { temperature: 0, maxTokens: full.tokens.length, ignoreEos: true });
    expect(full.tokens).toEqual(expected.tokens);
    // (refusals and their messages: llama-arguments.test.ts)
    const off = run(["generate", "-m", model, "-p", "x", "-fa", "off"]);
    expect(off.code).toBe(1);
    expect(off.stderr).toBe("memra generate: llama.cpp's -fa off is not supported by memra: memra has one attention path, fused as flash attention is (-fa on|auto); it cannot be turned off\n");
  });

  it("chat: --reasoning-budget 0 is --no-think, -sysf FILE the system prompt (less its final newline)", () => {
    const dir = mkdtempSync(join(tmpdir(), "memra-llama-chat-"));
    const system = join(dir, "system.txt");
    writeFileSync(system, "Answer briefly.\n");
    const own = run(["chat", "-m", model, "-p", "Hi", "-n", "6", "--temp", "0", "--no-think", "--system", "Answer briefly.", "--quiet"]);
    expect(own.code).toBe(0);
    // (-rea off and -sys: the same options, llama-arguments.test.ts)
    const llama = run(["chat", "-m", model, "-p", "Hi", "-n", "6", "--temp", "0", "--jinja", "--reasoning-budget", "0", "-sysf", system, "--quiet"]);
    expect(llama.code).toBe(0);
    expect(llama.stdout).toBe(own.stdout);
  });
});

describe("memra chat", () => {
  it("answers one message with -p, reasoning apart from the answer", async () => {
    const result = run(["chat", "-m", model, "-p", "Hi", "--no-think", "-n", "6", "--temp", "0", "--quiet"]);
    expect(result.code).toBe(0);
    const expected = await loadModel(model).chat([{ role: "user", content: "Hi" }], { enableThinking: false, maxTokens: 6, temperature: 0 });
    expect(result.stdout).toBe(`${expected.answer}\n`);
  });

  it("takes one turn per line of standard input when it is not a terminal", () => {
    const result = run(["chat", "-m", model, "--no-think", "-n", "4", "--temp", "0", "--quiet"], "Hello\nAnd again\n");
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split("\n").length).toBeGreaterThanOrEqual(2);
  });

  it("--session FILE continues a conversation in a later process as one process continues it", () => {
    const args = ["chat", "-m", model, "--no-think", "-n", "5", "--temp", "0", "--quiet", "--system", "Be brief."];
    const together = run(args, "Hello\nAnd again\n");
    const file = join(mkdtempSync(join(tmpdir(), "memra-session-")), "chat.state");
    const first = run([...args, "--session", file], "Hello\n");
    expect(first.code).toBe(0);
    const second = run([...args, "--session", file], "And again\n");
    expect(second.code).toBe(0);
    expect(first.stdout + second.stdout).toBe(together.stdout);
    const loader = loadModel(model);
    const restored = loader.restoreChatSession(file);
    expect(restored.messages.map((message) => message.role)).toEqual(["system", "user", "assistant", "user", "assistant"]);
    loader.dispose();
    const other = run([...args.slice(0, -1), "Be long.", "--session", file], "x\n");
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/--session: .*chat\.state holds a conversation with another system message; drop --system to continue it/);
  });
});

describe("memra generate against llama.cpp", () => {
  it("--temp 0 gives llama.cpp's greedy tokens up to the first near-tie, from the prompt text", async () => {
    const { loadGoldenSuite } = await import("@memra/core/internal");
    const { suite, goldens } = loadGoldenSuite();
    const entry = suite.models.find((m) => m.id === "dense-q8_0")!;
    const golden = goldens.get(entry.id)!;
    const path = await syntheticModelFile(resolveOptions(entry.preset as "small", entry.options));
    for (const prompt of golden.prompts) {
      const decided = prompt.steps.findIndex((step) => step.margin < 0.1);
      const steps = decided < 0 ? prompt.continuation.length : decided;
      const args = ["generate", "-m", path, "-p", prompt.text, "-n", String(steps + 1), "--temp", "0", "--json", ...(prompt.special ? [] : ["--no-special"])];
      const parsed = JSON.parse(run(args).stdout);
      expect(parsed.prompt_tokens, prompt.id).toEqual(prompt.promptTokens);
      expect(parsed.tokens.slice(0, steps), prompt.id).toEqual(prompt.continuation.slice(0, steps));
    }
  }, 120_000);
});
