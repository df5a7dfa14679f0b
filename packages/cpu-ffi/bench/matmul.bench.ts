/**
 * Matmul throughput of the native CPU backend for one weight shape, best of --runs:
 *   bun packages/cpu-ffi/bench/matmul.bench.ts [--type q8_0] [--in 1024] [--out 3072] [--rows 1,16,128,512] [--threads 2] [--runs 20]
 * Prints GB/s of weights streamed (what bounds decode) and GMAC/s (what bounds prefill). The i-quants
 * below 4 bits but iq3_s (iq2_xxs, iq1_s, ...) are timed on random valid blocks (weightBytes).
 */
import { parseArgs } from "node:util";
import { weightBytes } from "@memra/core/internal";
import { GGMLType, ggmlTypeFromName } from "@memra/gguf";
import { CpuBackend } from "../src/index";

const { values } = parseArgs({
  options: {
    type: { type: "string", default: "q8_0" },
    in: { type: "string", default: "1024" },
    out: { type: "string", default: "3072" },
    rows: { type: "string", default: "1,16,128,512" },
    threads: { type: "string", default: "2" },
    runs: { type: "string", default: "20" },
  },
});
const type = ggmlTypeFromName(values.type!) ?? GGMLType.Q8_0;
const nIn = Number(values.in);
const nOut = Number(values.out);
const runs = Number(values.runs);
const backend = CpuBackend.create({ threads: Number(values.threads) });
const weightValues = new Float32Array(nIn * nOut).map(() => (Math.random() - 0.5) * 0.1);
const data = weightBytes(type, weightValues, 1);
const weight = backend.uploadWeight({ name: "w", type, shape: [nIn, nOut], elementCount: nIn * nOut, offset: 0, byteSize: data.byteLength }, data);
console.log(`${values.type} [${nIn} -> ${nOut}], ${(data.byteLength / 1e6).toFixed(1)} MB, ${backend.threads} threads, ${backend.isa}`);
for (const rows of values.rows!.split(",").map(Number)) {
  const x = backend.allocate(rows * nIn);
  backend.write(x, new Float32Array(rows * nIn).map(() => Math.random() - 0.5));
  const out = backend.allocate(rows * nOut);
  let best = Number.POSITIVE_INFINITY;
  const repeat = Math.max(1, Math.round(64 / rows));
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    for (let i = 0; i < repeat; i++) backend.matmul(out, x, weight, rows);
    best = Math.min(best, (performance.now() - started) / repeat);
  }
  const gbs = data.byteLength / (best / 1000) / 1e9;
  const gmacs = (rows * nIn * nOut) / (best / 1000) / 1e9;
  console.log(`rows ${String(rows).padStart(4)}: ${(best * 1000).toFixed(0).padStart(7)} µs  ${gbs.toFixed(1).padStart(6)} GB/s  ${gmacs.toFixed(1).padStart(6)} GMAC/s`);
}
backend.dispose();
