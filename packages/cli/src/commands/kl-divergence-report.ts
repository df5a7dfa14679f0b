import type { KlDivergenceResult, PerplexityResult } from "@memra/core";

/** C's "%W.Pf" (right-aligned in W characters). */
function fixed(x: number, width: number, precision: number): string {
  return x.toFixed(precision).padStart(width);
}

/** llama.cpp's mean_and_uncertainty: the mean and its standard error (zero for 10 values or fewer). */
function meanAndUncertainty(sum: number, sumOfSquares: number, count: number): [number, number] {
  if (count < 1) return [0, 0];
  const mean = sum / count;
  const variance = sumOfSquares / count - mean * mean;
  return [mean, variance > 0 && count > 10 ? Math.sqrt(variance / (count - 1)) : 0];
}

/**
 * llama-perplexity --kl-divergence's table: after each window, the statistics so far (PPL, ln of the
 * PPL ratio, KL divergence, RMS Δp, same top p), with llama.cpp's formulas and widths.
 */
export function renderKlDivergenceChunks(result: KlDivergenceResult): string {
  const { nllModel, nllBase, klDivergence, deltaP, sameTop } = result.perToken;
  const perWindow = result.scoredTokens / result.windows;
  const lines = ["chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p"];
  const sums = { nll: 0, nll2: 0, base: 0, base2: 0, cross: 0, kld: 0, kld2: 0, dp2: 0, dp4: 0, same: 0 };
  for (let w = 0; w < result.windows; w++) {
    for (let i = w * perWindow; i < (w + 1) * perWindow; i++) {
      sums.nll += nllModel[i]!;
      sums.nll2 += nllModel[i]! * nllModel[i]!;
      sums.base += nllBase[i]!;
      sums.base2 += nllBase[i]! * nllBase[i]!;
      sums.cross += nllModel[i]! * nllBase[i]!;
      sums.kld += klDivergence[i]!;
      sums.kld2 += klDivergence[i]! * klDivergence[i]!;
      sums.dp2 += deltaP[i]! * deltaP[i]!;
      sums.dp4 += deltaP[i]! ** 4;
      sums.same += sameTop[i]!;
    }
    const count = (w + 1) * perWindow;
    const [logPpl, logPplError] = meanAndUncertainty(sums.nll, sums.nll2, count);
    const [logBase, logBaseError] = meanAndUncertainty(sums.base, sums.base2, count);
    const covariance = count < 10 ? 0 : (sums.cross / count - (sums.nll / count) * (sums.base / count)) / (count - 1);
    const ratioError = Math.sqrt(logPplError ** 2 + logBaseError ** 2 - 2 * covariance);
    const [kld, kldError] = meanAndUncertainty(sums.kld, sums.kld2, count);
    const [meanSquare, meanSquareError] = meanAndUncertainty(sums.dp2, sums.dp4, count);
    const rms = Math.sqrt(meanSquare);
    const same = sums.same / count;
    lines.push(
      `${String(w + 1).padStart(4)}` +
        `    ${fixed(Math.exp(logPpl), 9, 4)} ± ${fixed(Math.exp(logPpl) * logPplError, 9, 4)}` +
        `    ${fixed(logPpl - logBase, 10, 5)} ± ${fixed(ratioError, 10, 5)}` +
        `    ${fixed(kld, 10, 5)} ± ${fixed(kldError, 10, 5)}` +
        `    ${fixed(100 * rms, 6, 3)} ± ${fixed(rms > 0 ? (100 * 0.5 * meanSquareError) / rms : 0, 6, 3)} %` +
        `    ${fixed(100 * same, 6, 3)} ± ${fixed(100 * Math.sqrt((same * (1 - same)) / (count - 1)), 6, 3)} %`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** llama-perplexity --kl-divergence's closing statistics, line for line in its format. */
export function renderKlDivergenceStatistics(r: KlDivergenceResult): string {
  const p = r.perplexity;
  const ratio = Math.exp(p.lnRatio);
  const differenceError = Math.sqrt(p.modelUncertainty ** 2 + p.baseUncertainty ** 2 - 2 * p.correlation * p.modelUncertainty * p.baseUncertainty);
  const kld = (x: number) => fixed(x, 10, 6);
  const dp = (x: number) => `${fixed(100 * x, 6, 3)}%`;
  const k = r.klDivergence.percentiles;
  const d = r.deltaP.percentiles;
  const lines = [
    "====== Perplexity statistics ======",
    `Mean PPL(Q)                   : ${kld(p.model)} ± ${kld(p.modelUncertainty)}`,
    `Mean PPL(base)                : ${kld(p.base)} ± ${kld(p.baseUncertainty)}`,
    `Cor(ln(PPL(Q)), ln(PPL(base))): ${fixed(100 * p.correlation, 6, 2)}%`,
    `Mean ln(PPL(Q)/PPL(base))     : ${kld(p.lnRatio)} ± ${kld(p.lnRatioStderr)}`,
    `Mean PPL(Q)/PPL(base)         : ${kld(ratio)} ± ${kld(ratio * p.lnRatioStderr)}`,
    `Mean PPL(Q)-PPL(base)         : ${kld(p.model - p.base)} ± ${kld(differenceError)}`,
    "",
    "====== KL divergence statistics ======",
    `Mean    KLD: ${kld(r.klDivergence.mean)} ± ${kld(r.klDivergence.stderr)}`,
    `Maximum KLD: ${kld(r.klDivergence.maximum)}`,
    `99.9%   KLD: ${kld(k["99.9"])}`,
    `99.0%   KLD: ${kld(k["99"])}`,
    `95.0%   KLD: ${kld(k["95"])}`,
    `90.0%   KLD: ${kld(k["90"])}`,
    `Median  KLD: ${kld(k["50"])}`,
    `10.0%   KLD: ${kld(k["10"])}`,
    ` 5.0%   KLD: ${kld(k["5"])}`,
    ` 1.0%   KLD: ${kld(k["1"])}`,
    ` 0.1%   KLD: ${kld(k["0.1"])}`,
    `Minimum KLD: ${kld(r.klDivergence.minimum)}`,
    "",
    "====== Token probability statistics ======",
    `Mean    Δp: ${fixed(100 * r.deltaP.mean, 6, 3)} ± ${fixed(100 * r.deltaP.stderr, 5, 3)} %`,
    `Maximum Δp: ${dp(r.deltaP.maximum)}`,
    `99.9%   Δp: ${dp(d["99.9"])}`,
    `99.0%   Δp: ${dp(d["99"])}`,
    `95.0%   Δp: ${dp(d["95"])}`,
    `90.0%   Δp: ${dp(d["90"])}`,
    `75.0%   Δp: ${dp(d["75"])}`,
    `Median  Δp: ${dp(d["50"])}`,
    `25.0%   Δp: ${dp(d["25"])}`,
    `10.0%   Δp: ${dp(d["10"])}`,
    ` 5.0%   Δp: ${dp(d["5"])}`,
    ` 1.0%   Δp: ${dp(d["1"])}`,
    ` 0.1%   Δp: ${dp(d["0.1"])}`,
    `Minimum Δp: ${dp(r.deltaP.minimum)}`,
    `RMS Δp    : ${fixed(100 * r.deltaP.rms, 6, 3)} ± ${fixed(100 * r.deltaP.rmsStderr, 5, 3)} %`,
    `Same top p: ${fixed(100 * r.sameTop.fraction, 6, 3)} ± ${fixed(100 * r.sameTop.stderr, 5, 3)} %`,
  ];
  return `${lines.join("\n")}\n`;
}

/** The whole --kl-divergence report: a summary line, the per-window table and the statistics. */
export function renderKlDivergence(result: KlDivergenceResult, tokens: number, seconds: number): string {
  return `${tokens} tokens, ${result.windows} windows of ${result.context}, ${result.scoredTokens} tokens scored (${seconds.toFixed(1)} s)\n\n${renderKlDivergenceChunks(result)}\n${renderKlDivergenceStatistics(result)}`;
}

/**
 * llama-perplexity's perplexity lines: "[1]x,[2]y,..." (--ppl-output-type 0), or one line per window
 * (type 1): its first token's offset and the perplexity so far, with the mean negative
 * log-likelihood and its standard error in the ordinary mode (`stride` absent).
 */
export function renderPerplexityWindows(result: PerplexityResult, outputType: 0 | 1, stride?: number): string {
  if (outputType === 0) return `${result.perWindow.map((p, i) => `[${i + 1}]${p.toFixed(4)}`).join(",")}\n`;
  return result.perWindow
    .map((p, i) => {
      if (stride !== undefined) return `${String(i * stride).padStart(8)}  ${p.toFixed(4)}\n`;
      const { mean, stderr } = result.perWindowNll[i]!;
      return `${String(i * result.context).padStart(8)}  ${p.toFixed(4)}  ${mean.toFixed(6)}  ${stderr.toFixed(6)}\n`;
    })
    .join("");
}
