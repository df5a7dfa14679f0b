import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { computeLogprobs, loadModel } from "@memra/core";
import { openGGUF, parseMetadataOverride, writeGGUF } from "@memra/gguf";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-cli-"));
let model = "";

function run(args: string[], stdin?: string) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdin: stdin === undefined ? "ignore" : Buffer.from(stdin), stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

// Token ids below were produced by llama.cpp for the same strings (packages/tokenizer goldens).
const QUICK_FOX = "The quick brown fox jumps over the lazy dog.";
const QUICK_FOX_IDS = [785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13];

beforeAll(async () => {
  model = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
});

describe("memra embed", () => {
  it("prints model.embed's vectors, from --text or JSON lines, with the pooling and dimensions asked", async () => {
    const loaded = loadModel(model);
    const one = run(["embed", "-m", model, "--text", QUICK_FOX, "--text", "a", "--device", "reference"]);
    expect(one.stderr).toBe("");
    expect(one.code).toBe(0);
    const lines = one.stdout.trim().split("\n").map((line) => JSON.parse(line) as number[]);
    expect(lines).toEqual([Array.from(loaded.embed(QUICK_FOX)), Array.from(loaded.embed("a"))]);
    const piped = run(["embed", "-m", model, "--jsonl", "--pooling", "mean", "--dimensions", "8", "--no-normalize", "--device", "reference"], `${JSON.stringify(QUICK_FOX)}\n\n"a"\n`);
    expect(piped.stdout.trim().split("\n").map((line) => JSON.parse(line))).toEqual([QUICK_FOX, "a"].map((text) => Array.from(loaded.embed(text, { pooling: "mean", dimensions: 8, normalize: false }))));
    loaded.dispose();
    const bad = run(["embed", "-m", model, "--jsonl", "--device", "reference"], "not json\n");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("standard input line 1 is not JSON");
    expect(run(["embed", "-m", model, "--text", "x", "--pooling", "cls"]).stderr).toContain("--pooling must be last or mean");
    expect(run(["embed", "-m", model, "--text", "x", "--dimensions", "65", "--device", "reference"]).stderr).toContain("dimensions is 65, but the model's embeddings have 64");
  });

  it("takes llama-embedding's command line: -p split at --embd-separator, --embd-normalize, -ngl and -c with a notice", () => {
    const own = run(["embed", "-m", model, "--text", QUICK_FOX, "--text", "a", "--no-normalize", "--device", "reference"]);
    const llama = run(["embed", "-m", model, "-p", `${QUICK_FOX}|a`, "--embd-separator", "|", "--embd-normalize", "-1", "-ngl", "99", "-c", "512", "--device", "reference"]);
    expect(llama.code).toBe(0);
    expect(llama.stdout).toBe(own.stdout);
    expect(llama.stderr).toMatch(/^memra: llama\.cpp flags that change nothing here: -ngl 99 \(.*\); -c 512 \(memra embed evaluates each text whole/);
    // the default separator is a newline, written as llama.cpp's escape
    expect(run(["embed", "-m", model, "-p", `${QUICK_FOX}\\na`, "--embd-normalize", "-1", "--device", "reference"]).stdout).toBe(own.stdout);
    expect(run(["embed", "-m", model, "-p", "x", "--embd-normalize", "1"]).stderr).toContain("--embd-normalize 1 is not supported by memra");
  });
});

describe("memra rerank", () => {
  it("prints model.rank's order and scores, from --document or JSON lines; a chat model is refused", async () => {
    const reranker = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", reranker: true, seed: 2 }));
    const loaded = loadModel(reranker);
    const documents = [QUICK_FOX, "Paris is the capital of France.", "a"];
    const expected = loaded.rank("capital of France", documents);
    loaded.dispose();
    const lines = run(["rerank", "-m", reranker, "--query", "capital of France", ...documents.flatMap((d) => ["--document", d]), "--json", "--device", "reference"]);
    expect(lines.stderr).toBe("");
    expect(lines.stdout.trim().split("\n").map((line) => JSON.parse(line))).toEqual(expected.map(({ index, score }) => ({ index, score, document: documents[index] })));
    const piped = run(["rerank", "-m", reranker, "-q", "capital of France", "--jsonl", "--top-n", "1", "--device", "reference"], documents.map((d) => JSON.stringify(d)).join("\n"));
    expect(piped.stdout).toBe(`${expected[0]!.score.toFixed(6)}\t${expected[0]!.index}\t${JSON.stringify(documents[expected[0]!.index])}\n`);
    const chat = run(["rerank", "-m", model, "-q", "x", "--document", "y", "--device", "reference"]);
    expect(chat.code).toBe(1);
    expect(chat.stderr).toContain("not a reranker");
    expect(run(["rerank", "-m", reranker, "--document", "y"]).stderr).toContain("give --query");
  });
});

describe("RoPE scaling options (llama.cpp's --rope-scaling, --rope-scale, --yarn-orig-ctx)", () => {
  it("generate applies the GGUF's YaRN scaling and the flags override it", async () => {
    const yarn = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", ropeFreqBase: 10000, ropeScaling: { type: "yarn", factor: 4, originalContextLength: 64 } }));
    const complete = async (options: Parameters<typeof loadModel>[1]) => {
      const loaded = loadModel(yarn, options);
      const result = await loaded.complete("Once upon a time", { temperature: 0, maxTokens: 12 });
      loaded.dispose();
      return result.tokens;
    };
    const generate = (...flags: string[]) => {
      const result = run(["generate", "-m", yarn, "-p", "Once upon a time", "-n", "12", "--temp", "0", "--json", "--device", "reference", ...flags]);
      expect(result.stderr).toBe("");
      return (JSON.parse(result.stdout) as { tokens: number[] }).tokens;
    };
    const scaled = await complete({});
    const plain = await complete({ ropeScaling: { type: "none" } });
    const linear = await complete({ ropeScaling: { type: "linear", factor: 8 } });
    expect(plain).not.toEqual(scaled);
    expect(linear).not.toEqual(scaled);
    expect(generate()).toEqual(scaled);
    expect(generate("--rope-scaling", "none")).toEqual(plain);
    expect(generate("--rope-scaling", "linear", "--rope-scale", "8")).toEqual(linear);
    expect(run(["generate", "-m", yarn, "-p", "x", "--rope-scaling", "longrope"]).stderr).toContain("--rope-scaling must be none, linear or yarn");
  });
});

describe("memra tokenize", () => {
  it("prints ids with pieces, or JSON", () => {
    const text = run(["tokenize", "-m", model, "--text", QUICK_FOX]);
    expect(text.code).toBe(0);
    expect(text.stdout.trim().split("\n")).toHaveLength(QUICK_FOX_IDS.length);
    expect(text.stdout).toContain("785 -> 'The'");
    const json = run(["tokenize", "-m", model, "--text", QUICK_FOX, "--json"]);
    expect(JSON.parse(json.stdout)).toEqual({ ids: QUICK_FOX_IDS });
  });

  it("parses special tokens unless --no-special", () => {
    const special = JSON.parse(run(["tokenize", "-m", model, "--text", "<|im_start|>", "--json"]).stdout);
    const plain = JSON.parse(run(["tokenize", "-m", model, "--text", "<|im_start|>", "--json", "--no-special"]).stdout);
    expect(special.ids).toEqual([151644]);
    expect(plain.ids).toEqual([27, 91, 318, 4906, 91, 29]);
  });

  it("reads JSON strings line by line with --jsonl", () => {
    const lines = `${JSON.stringify(QUICK_FOX)}\n${JSON.stringify("<|im_start|>")}\n`;
    const result = run(["tokenize", "-m", model, "--jsonl"], lines);
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split("\n").map((l) => JSON.parse(l))).toEqual([{ ids: QUICK_FOX_IDS }, { ids: [151644] }]);
    const bad = run(["tokenize", "-m", model, "--jsonl"], "not json\n");
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("fails cleanly without a model", () => {
    const result = run(["tokenize", "--text", "x"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("missing -m MODEL");
  });
});

describe("memra logprobs", () => {
  it("prints one entry per input token with the top-K log-probabilities of the library call", () => {
    // the reference backend on both sides, so that the values are the same bit for bit
    const result = run(["logprobs", "-m", model, "--device", "reference", "--tokens", QUICK_FOX_IDS.join(","), "--top", "3", "--json"]);
    expect(result.stderr).toBe("");
    const parsed = JSON.parse(result.stdout);
    expect(parsed.tokens).toEqual(QUICK_FOX_IDS);
    expect(parsed.positions).toHaveLength(QUICK_FOX_IDS.length);
    const expected = computeLogprobs(loadModel(model), QUICK_FOX_IDS, 3);
    expect(parsed.positions).toEqual(JSON.parse(JSON.stringify(expected.positions)));
    for (const position of parsed.positions) {
      expect(position.top).toHaveLength(3);
      expect(position.top[0].logprob).toBeGreaterThanOrEqual(position.top[1].logprob);
      expect(position.top[0].logprob).toBeLessThanOrEqual(0);
    }
    const fromText = JSON.parse(run(["logprobs", "-m", model, "--device", "reference", "--text", QUICK_FOX, "--top", "3", "--json"]).stdout);
    expect(fromText).toEqual(parsed);
  });

  it("names a bad token list", () => {
    const result = run(["logprobs", "-m", model, "--tokens", "1,x,3"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/--tokens: item 2 \("x"\) is not a token id/);
  });
});

describe("memra perplexity", () => {
  it("scores the second half of each window, as llama.cpp does", () => {
    const path = join(directory, "text.txt");
    writeFileSync(path, `${QUICK_FOX} `.repeat(20));
    const result = run(["perplexity", "-m", model, "-f", path, "--ctx", "64", "--json"]);
    expect(result.stderr).toBe("");
    const parsed = JSON.parse(result.stdout);
    expect(parsed.windows).toBe(Math.floor(parsed.tokens / 64));
    expect(parsed.scoredTokens).toBe(parsed.windows * (64 - 1 - 32));
    expect(parsed.perplexity).toBeGreaterThan(1);
    expect(parsed.perWindow.at(-1)).toBeCloseTo(parsed.perplexity, 10);
    const short = run(["perplexity", "-m", model, "-f", path, "--ctx", "4096"]);
    expect(short.code).toBe(1);
    expect(short.stderr).toMatch(/fewer than one window of --ctx 4096/);
  });

  it("--kl-divergence compares the model with a base over the same tokens (the library's figures are checked against llama.cpp in core)", async () => {
    const path = join(directory, "kld.txt");
    writeFileSync(path, `${QUICK_FOX} `.repeat(7)); // one window of 64 tokens
    const itself = JSON.parse(run(["perplexity", "-m", model, "--kl-divergence", model, "-f", path, "--ctx", "64", "--json"]).stdout);
    expect(itself.klDivergence.mean).toBeLessThan(1e-9);
    expect(itself.sameTop.fraction).toBe(1);
    expect(itself.perplexity.model).toBeCloseTo(itself.perplexity.base, 10);
    const f16 = await syntheticModelFile(resolveOptions("tiny", { weightType: "f16" }));
    const result = run(["perplexity", "-m", model, "--kl-divergence", f16, "-f", path, "--ctx", "64"]);
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(/====== KL divergence statistics ======\nMean    KLD: +\d\.\d{6} ± +\d\.\d{6}\n/);
    expect(result.stdout).toMatch(/\nSame top p: +\d+\.\d{3} ± +\d+\.\d{3} %\n$/); // llama-perplexity's "%6.3lf ± %5.3lf %%"
    const other = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: 1024 }));
    const mismatch = run(["perplexity", "-m", model, "--kl-divergence", other, "-f", path, "--ctx", "64"]);
    expect(mismatch.code).toBe(1);
    expect(mismatch.stderr).toMatch(/has 1024 tokens in its vocabulary and .* 151936: they cannot be compared/);
  });
});

describe("--override-kv (llama.cpp's KEY=TYPE:VALUE)", () => {
  it("computes what a file holding the value computes, in the library and in memra generate", () => {
    // the same model with its RoPE base rewritten in the file
    const original = openGGUF(model);
    const metadata = new Map(original.metadata);
    metadata.set("qwen3.rope.freq_base", { type: "float32", value: 10000 });
    const rewritten = join(directory, "rope-10000.gguf");
    writeFileSync(rewritten, writeGGUF({ metadata, tensors: original.tensors.map((t) => ({ name: t.name, type: t.type, shape: t.shape, data: original.tensorData(t) })) }));

    const top = (path: string, overrides: string[]) => {
      const loaded = loadModel(path, { metadataOverrides: overrides.map(parseMetadataOverride) });
      const result = computeLogprobs(loaded, QUICK_FOX_IDS, 3).positions.map((p) => p.top);
      loaded.dispose();
      return result;
    };
    const overridden = top(model, ["qwen3.rope.freq_base=float:10000"]);
    expect(overridden).toEqual(top(rewritten, []));
    expect(overridden).not.toEqual(top(model, []));

    const tokens = (args: string[]) => JSON.parse(run(["generate", ...args, "-p", QUICK_FOX, "-n", "12", "--temp", "0", "--json"]).stdout).tokens;
    expect(tokens(["-m", model, "--override-kv", "qwen3.rope.freq_base=float:10000"])).toEqual(tokens(["-m", rewritten]));

    const bad = run(["generate", "-m", model, "--override-kv", "qwen3.block_count=str:2", "-p", "x", "-n", "1"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("memra generate: KV override qwen3.block_count: the file's value is a uint32, the override a str\n");

    // the commands that load a model without placing it take it too
    const json = (args: string[]) => {
      const result = run(args);
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout);
    };
    const logprobs = (path: string, extra: string[]) => json(["logprobs", "-m", path, "--tokens", QUICK_FOX_IDS.join(","), "--top", "3", "--json", ...extra]);
    expect(logprobs(model, ["--override-kv", "qwen3.rope.freq_base=float:10000"])).toEqual(logprobs(rewritten, []));
    const text = join(directory, "override-kv.txt");
    writeFileSync(text, `${QUICK_FOX} `.repeat(20));
    const perplexity = (path: string, extra: string[]) => json(["perplexity", "-m", path, "-f", text, "--ctx", "64", "--json", ...extra]).perplexity;
    const overriddenPerplexity = perplexity(model, ["--override-kv", "qwen3.rope.freq_base=float:10000"]);
    expect(overriddenPerplexity).toBe(perplexity(rewritten, []));
    expect(overriddenPerplexity).not.toBe(perplexity(model, []));
    const inputs: Record<string, string[]> = { embed: ["--text", "x"], rerank: ["-q", "x", "--document", "y"], logprobs: ["--text", "x"], perplexity: ["-f", text] };
    for (const [command, input] of Object.entries(inputs)) {
      const malformed = run([command, "-m", model, "--override-kv", "qwen3.rope.freq_base", ...input]);
      expect(malformed.code, command).toBe(1);
      expect(malformed.stderr, command).toBe(`memra ${command}: malformed KV override "qwen3.rope.freq_base": expected KEY=TYPE:VALUE with a key under 128 bytes\n`);
    }
  });
});
