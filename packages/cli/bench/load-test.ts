/**
 * Load test of `memra serve` (run by hand, not in the unit tests): starts the server in this
 * process on a loopback port, runs N concurrent streaming clients for a while (mixed prompt and
 * completion lengths, 10% cancelled mid-stream), then checks that every block is free and prints
 * throughput, latency percentiles and memory (RSS sampled every second after a warm-up).
 *
 *   bun packages/cli/bench/load-test.ts [--preset qwen3-0.6b] [--type q8_0] [--backend cpu|reference]
 *       [--clients 64] [--seconds 60] [--parallel 16] [--ctx 1024] [--threads 2]
 */
import { parseArgs } from "node:util";
import { type Backend, ReferenceBackend, loadModel } from "@memra/core";
import { CpuBackend } from "@memra/cpu-ffi";
import { type PresetName, type WeightType, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { runLoadTest } from "../src/server/load-test";
import { startOpenAIServer } from "../src/server/openai-server";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "qwen3-0.6b" },
    type: { type: "string", default: "q8_0" },
    backend: { type: "string", default: "cpu" },
    clients: { type: "string", default: "64" },
    seconds: { type: "string", default: "60" },
    parallel: { type: "string", default: "16" },
    ctx: { type: "string", default: "1024" },
    threads: { type: "string", default: "2" },
  },
});

const path = await syntheticModelFile(resolveOptions(values.preset as PresetName, { weightType: values.type as WeightType }));
const backend: Backend = values.backend === "reference" ? new ReferenceBackend() : CpuBackend.create({ threads: Number(values.threads) });
const parallel = Number(values.parallel);
const contextLength = Number(values.ctx);
const model = loadModel(path, { backend, maxSequences: parallel, kvCacheTokens: parallel * contextLength });
const pool = model.engine.pool;
pool.prefault(); // as memra serve does
const server = startOpenAIServer({ model, modelId: values.preset, port: 0, contextLength });
console.log(`${values.preset} ${values.type} on ${backend.name}; ${values.clients} clients for ${values.seconds} s; ${parallel} parallel; pool ${pool.blocks} blocks`);

const rss: number[] = [];
const sampler = setInterval(() => rss.push(process.memoryUsage().rss), 1000);
const report = await runLoadTest({ url: server.url, clients: Number(values.clients), durationMs: Number(values.seconds) * 1000 });
clearInterval(sampler);
for (let i = 0; i < 200 && pool.usedBlocks > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const warm = rss.slice(Math.min(5, Math.floor(rss.length / 4)));
const f = (p: { p50: number; p90: number; p99: number; max: number }) => `p50 ${p.p50.toFixed(0)} ms, p90 ${p.p90.toFixed(0)} ms, p99 ${p.p99.toFixed(0)} ms, max ${p.max.toFixed(0)} ms`;
console.log(`requests ${report.requests}: ${report.completed} completed, ${report.cancelled} cancelled, ${report.errors} errors`);
if (report.errorMessages.length > 0) console.log(`errors: ${report.errorMessages.join(" | ")}`);
console.log(`generated ${report.completionTokens} tokens in ${(report.elapsedMs / 1000).toFixed(1)} s: ${report.tokensPerSecond.toFixed(1)} tokens/s`);
console.log(`time to first token: ${f(report.timeToFirstToken)}`);
console.log(`request latency:     ${f(report.latency)}`);
console.log(`KV blocks used at the end: ${pool.usedBlocks} of ${pool.blocks} (${pool.cachedBlocks} cached prefixes)`);
if (warm.length > 0) console.log(`RSS after warm-up: first ${mib(warm[0]!)}, last ${mib(warm[warm.length - 1]!)}, max ${mib(Math.max(...warm))}`);
console.log(`RSS every 10 s: ${rss.filter((_, i) => i % 10 === 0).map(mib).join(", ")}`);
console.log(`engine: ${model.engine.statistics.steps} steps, ${model.engine.statistics.preemptions} preemptions, ${model.engine.statistics.reusedTokens} prompt tokens from the prefix cache`);
await server.stop();
model.dispose();
process.exit(report.errors === 0 && pool.usedBlocks === 0 ? 0 : 1);
