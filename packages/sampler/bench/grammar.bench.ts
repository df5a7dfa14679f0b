// Cost per token of grammar-constrained sampling on the real Qwen3 vocabulary (151,936 tokens):
// `bun packages/sampler/bench/grammar.bench.ts [tokens]`. Outputs of a JSON schema are generated
// over and over from random logits (16 cycled draws, as in sampler.bench.ts) with the default
// chain at temperature 1, and each token is timed alone: the plain sampler, the sampler with the
// grammar applied lazily (mask only when the sampled token is rejected) and fully (mask every
// step), and the trie walk alone on states never seen before (mask cache off).
import { z } from "zod";
import { qwen3TokenPieces } from "../src/grammar/__fixtures__/qwen3-token-pieces";
import { type GrammarMode, createConstrainedSampler } from "../src/grammar/constrained-sampler";
import { GrammarAutomaton } from "../src/grammar/grammar-automaton";
import { GrammarMatcher } from "../src/grammar/grammar-matcher";
import { constraintFromZod } from "../src/grammar/structured-output";
import { createSampler } from "../src/sampler";
import { SeededRandom } from "../src/seeded-random";

const tokens = Number(process.argv[2] ?? 1000);
const random = new SeededRandom(1234);

let started = performance.now();
const { trie } = qwen3TokenPieces();
console.log(`vocabulary ${trie.vocabularySize}: token trie of ${trie.nodeCount} nodes built in ${(performance.now() - started).toFixed(0)} ms (once per model)`);

const schema = z.object({
  name: z.string().max(24),
  age: z.number().int().min(0).max(120),
  email: z.string().max(40).optional(),
  tags: z.array(z.string().max(12)).max(4),
  address: z.object({ city: z.string().max(20), zip: z.string().max(8) }).nullable(),
});
started = performance.now();
const constraint = constraintFromZod(schema);
console.log(`schema compiled to ${constraint.grammar.rules.length} rules in ${(performance.now() - started).toFixed(1)} ms`);

function normal(): number {
  return Math.sqrt(-2 * Math.log(1 - random.nextDouble())) * Math.cos(2 * Math.PI * random.nextDouble());
}
const inputs = Array.from({ length: 16 }, () => {
  const logits = new Float32Array(trie.vocabularySize);
  for (let i = 0; i < logits.length; i++) logits[i] = 3 * normal();
  for (let j = 0; j < 8; j++) logits[random.nextUint32() % logits.length] = 10 + 5 * random.nextDouble();
  return logits;
});

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? 0;
}

function report(name: string, times: number[], extra = ""): void {
  times.sort((a, b) => a - b);
  const mean = times.reduce((sum, t) => sum + t, 0) / times.length;
  console.log(`${name.padEnd(44)} median ${percentile(times, 0.5).toFixed(3)} ms   mean ${mean.toFixed(3)} ms   p99 ${percentile(times, 0.99).toFixed(3)} ms/token${extra}`);
}

function run(name: string, mode: GrammarMode | "none", freshMasks = false): void {
  const automaton = new GrammarAutomaton(constraint.grammar);
  const base = createSampler({ seed: 7, temperature: 1 }, { vocabularySize: trie.vocabularySize });
  let matcher = new GrammarMatcher(automaton, trie);
  let sampler = mode === "none" ? base : createConstrainedSampler(base, matcher, mode);
  const warmup = 100;
  const times: number[] = [];
  let outputs = 0;
  for (let step = 0; step < warmup + tokens; step++) {
    if (freshMasks) {
      // A new mask cache every step: the trie walk is paid on every masked step.
      matcher = matcher.fork();
      (matcher as unknown as { masks: Map<string, unknown> }).masks = new Map();
      sampler = createConstrainedSampler(base, matcher, mode as GrammarMode);
    }
    const logits = inputs[step % inputs.length]!;
    const start = performance.now();
    const { token } = sampler.sample(logits, []);
    const elapsed = performance.now() - start;
    if (step >= warmup) times.push(elapsed);
    if (mode !== "none" && (trie.isEndOfGeneration(token) || matcher.isFinished)) {
      outputs++;
      matcher.reset();
    }
  }
  const maskedSteps = (sampler as { maskedSteps?: number }).maskedSteps;
  const note = mode === "none" ? "" : `   (${outputs} outputs; full mask on ${freshMasks ? "every" : maskedSteps} of ${warmup + tokens} steps)`;
  report(name, times, note);
}

console.log(`${tokens} tokens per configuration, default chain at temperature 1`);
run("no grammar", "none");
run("grammar, lazy (mask only on rejection)", "lazy");
run("grammar, full (mask every step)", "full");
run("grammar, full, mask cache off (trie walk)", "full", true);

// The worst state: inside a free string, where nearly every token is allowed and the walk visits
// almost the whole trie.
const inString = new GrammarMatcher(new GrammarAutomaton(constraint.grammar), trie);
inString.acceptText('{"name": "Jo');
const walks: number[] = [];
for (let i = 0; i < 30; i++) {
  const fresh = new GrammarMatcher(inString.automaton, trie);
  fresh.acceptText('{"name": "Jo');
  const start = performance.now();
  const allowed = fresh.allowedTokens();
  walks.push(performance.now() - start);
  if (i === 0) console.log(`inside a string: ${allowed.tokens.length} tokens allowed`);
}
report("trie walk inside a string (worst case)", walks.slice(1));
started = performance.now();
for (let i = 0; i < 100; i++) inString.allowedTokens();
console.log(`${"same state again (cached mask)".padEnd(44)} ${((performance.now() - started) / 100).toFixed(4)} ms`);
