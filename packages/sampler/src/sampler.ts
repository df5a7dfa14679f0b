import { Candidates, softmax } from "./candidates";
import { type DryOptions, DrySequenceBreakers, DryWorkspace, applyDry, dryEnabled } from "./dry";
import { PreparedLogitBias, applyLogitBias } from "./logit-bias";
import { argmax, logSumExp } from "./log-sum-exp";
import { minP } from "./min-p";
import { mirostat, mirostatInitialMu, mirostatUpdate, mirostatV2 } from "./mirostat";
import { type PenaltyOptions, applyPenalties, penaltiesEnabled } from "./penalties";
import { type SampleResult, pickDistribution, pickGreedy } from "./pick";
import { InvalidSamplingOptionError, SamplerError } from "./sampler-error";
import { type ResolvedSamplingOptions, type SamplingOptions, samplingOptionsSchema } from "./sampling-options";
import { SeededRandom, randomSeed } from "./seeded-random";
import { temperature } from "./temperature";
import { topK } from "./top-k";
import { topNSigma } from "./top-n-sigma";
import { topP } from "./top-p";
import { typical } from "./typical";
import { xtc } from "./xtc";

export type { SampleResult } from "./pick";

export interface SamplerContext {
  /** Number of logits per step (the model's output size). */
  vocabularySize: number;
  /** Text of one token; needed only for DRY's sequence breakers. */
  tokenText?: (id: number) => string;
  /**
   * Tokens of a text (no BOS, special tokens not parsed); optional, lets DRY recognise a breaker
   * that starts inside one token and ends in the next ones, as llama.cpp does.
   */
  tokenize?: (text: string) => ArrayLike<number>;
}

export interface Sampler {
  /**
   * One token from the logits of the next position. `history` is every token so far (prompt and
   * generated, as llama.cpp feeds both to its samplers); penalties and DRY look at its end.
   */
  sample(logits: Float32Array, history: ArrayLike<number>): SampleResult;
  /**
   * Optional: `sample` from the step's best candidates alone, where `topCandidatesSuffice` says
   * they decide the pick: ids[0..k) and logits[0..k) are the k = min(topK, vocabulary) highest
   * logits of the step, in descending order, equal logits by ascending id (as top-k leaves them).
   * Gives exactly what `sample` gives on the whole logits (same token, logprob and random draws),
   * so that a GPU can send back k candidates instead of the vocabulary's logits.
   */
  sampleTop?(ids: Int32Array, logits: Float32Array, history: ArrayLike<number>): SampleResult;
  /** The seed in use: the one given, or the random one chosen. */
  readonly seed: number;
  /** The options with defaults filled in. */
  readonly options: ResolvedSamplingOptions;
  /**
   * Restarts the random draws from the seed, and Mirostat's threshold from 2·tau (the same tokens
   * again for the same inputs).
   */
  reset(): void;
}

/** Stream of the seed used for the token draw, and for XTC's coin (llama.cpp gives each its own generator). */
const DISTRIBUTION_STREAM = 0;
const XTC_STREAM = 1;

/**
 * A sampler running llama.cpp's default chain: logit bias → penalties → DRY → top-nσ → top-k →
 * typical → top-p → min-p → XTC → temperature → pick (random from the softmax, or greedy when
 * temperature is 0). With Mirostat on, llama.cpp's other chain: logit bias → temperature →
 * Mirostat (1 or 2.0) and its pick, after which the sampler's threshold mu learns from the picked
 * token's surprise; mu is the sampler's state (one sampler per generated sequence), 2·tau at
 * creation and after `reset`. Options are validated by `samplingOptionsSchema` (keys it does not
 * know are ignored here, so that a larger options object can be passed). Sampling a token
 * allocates nothing but the result.
 */
export function createSampler(options: SamplingOptions, context: SamplerContext): Sampler {
  const parsed = samplingOptionsSchema.strip().safeParse(options ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InvalidSamplingOptionError(issue.path.map(String).join(".") || "options", issue.message);
  }
  const resolved = parsed.data;
  const vocabularySize = context.vocabularySize;
  if (!Number.isInteger(vocabularySize) || vocabularySize < 1) throw new SamplerError(`vocabularySize must be a positive integer, got ${vocabularySize}`);
  if (resolved.logitBias) {
    const entries = resolved.logitBias instanceof Map ? [...resolved.logitBias.keys()] : Object.keys(resolved.logitBias).map(Number);
    const outside = entries.find((token) => token >= vocabularySize);
    if (outside !== undefined) throw new InvalidSamplingOptionError("logitBias", `logitBias token ${outside} is outside the vocabulary (${vocabularySize} tokens)`);
  }
  return new ChainSampler(resolved, context);
}

/**
 * Whether a sampler of these options picks argmax(logits) whatever the history: greedy
 * (temperature <= 0) with no logit bias, penalties, DRY, typical or XTC, which could change the
 * pick (top-nσ keeps the largest logit; Mirostat's chain has none of the others). Then a caller
 * may pick the token where the logits are (a GPU) instead of sampling them.
 */
export function isPlainGreedy(options: SamplingOptions): boolean {
  const parsed = samplingOptionsSchema.strip().safeParse(options ?? {});
  if (!parsed.success) return false;
  const o = parsed.data;
  const bias = o.logitBias;
  if (bias && (bias instanceof Map ? bias.size > 0 : Object.keys(bias).length > 0)) return false;
  const penalties = { lastN: o.penaltyLastN, repeat: o.repeatPenalty, frequency: o.frequencyPenalty, presence: o.presencePenalty };
  if (o.temperature > 0) return false;
  if (o.mirostat.mode !== 0) return true;
  return !penaltiesEnabled(penalties) && !dryEnabled(o.dry) && o.typicalP >= 1 && !(o.xtc.probability > 0 && o.xtc.threshold <= 0.5);
}

/**
 * The number of best candidates that decide a sampler's pick whatever the other logits are:
 * min(topK, vocabularySize) when the chain samples at a temperature above 0 after a top-k, with no
 * logit bias, penalties, DRY, top-nσ (which change logits before top-k, or read them all) or
 * Mirostat (whose softmax is over the whole vocabulary); 0 when the whole logits are needed.
 * Typical, top-p, min-p, XTC and temperature work on top-k's survivors alone.
 */
export function topCandidatesSuffice(options: SamplingOptions, vocabularySize: number): number {
  const parsed = samplingOptionsSchema.strip().safeParse(options ?? {});
  if (!parsed.success || !Number.isInteger(vocabularySize) || vocabularySize < 1) return 0;
  const o = parsed.data;
  const bias = o.logitBias;
  if (bias && (bias instanceof Map ? bias.size > 0 : Object.keys(bias).length > 0)) return 0;
  const penalties = { lastN: o.penaltyLastN, repeat: o.repeatPenalty, frequency: o.frequencyPenalty, presence: o.presencePenalty };
  if (o.temperature <= 0 || o.topK <= 0 || penaltiesEnabled(penalties) || dryEnabled(o.dry) || o.topNSigma > 0 || o.mirostat.mode !== 0) return 0;
  return Math.min(o.topK, vocabularySize);
}

class ChainSampler implements Sampler {
  readonly seed: number;
  readonly options: ResolvedSamplingOptions;
  private readonly candidates: Candidates;
  private readonly vocabularySize: number;
  /** Mirostat's threshold on the surprise of the kept tokens (bits); 2·tau until the first pick. */
  private mirostatMu: number;
  private readonly distributionRandom: SeededRandom;
  private readonly xtcRandom: SeededRandom;
  private readonly logitBias: PreparedLogitBias | undefined;
  private readonly penaltyOptions: PenaltyOptions;
  private readonly penaltyCounts: Int32Array | undefined; // [vocabulary] zeroed between calls
  private readonly dryOptions: DryOptions;
  private readonly dryWorkspace: DryWorkspace | undefined;
  /** topCandidatesSuffice of these options (0: sampleTop refuses). */
  private readonly topCandidates: number;

  constructor(options: ResolvedSamplingOptions, context: SamplerContext) {
    this.options = options;
    this.seed = options.seed ?? randomSeed();
    this.candidates = new Candidates(context.vocabularySize);
    this.vocabularySize = context.vocabularySize;
    this.mirostatMu = mirostatInitialMu(options.mirostat.tau);
    this.distributionRandom = new SeededRandom(this.seed, DISTRIBUTION_STREAM);
    this.xtcRandom = new SeededRandom(this.seed, XTC_STREAM);
    const bias = options.logitBias;
    this.logitBias = bias && (bias instanceof Map ? bias.size > 0 : Object.keys(bias).length > 0) ? new PreparedLogitBias(bias) : undefined;

    this.penaltyOptions = { lastN: options.penaltyLastN, repeat: options.repeatPenalty, frequency: options.frequencyPenalty, presence: options.presencePenalty };
    this.penaltyCounts = penaltiesEnabled(this.penaltyOptions) ? new Int32Array(context.vocabularySize) : undefined;

    const dry = options.dry;
    let sequenceBreakers = DrySequenceBreakers.none;
    if (dryEnabled(dry) && dry.sequenceBreakers.length > 0) {
      if (!context.tokenText) throw new InvalidSamplingOptionError("dry.sequenceBreakers", "dry.sequenceBreakers need the sampler context's tokenText");
      sequenceBreakers = DrySequenceBreakers.fromStrings(dry.sequenceBreakers, context.vocabularySize, context.tokenText, context.tokenize);
    }
    this.dryOptions = { multiplier: dry.multiplier, base: dry.base, allowedLength: dry.allowedLength, penaltyLastN: dry.penaltyLastN, sequenceBreakers };
    this.dryWorkspace = dryEnabled(dry) ? new DryWorkspace(context.vocabularySize) : undefined;
    this.topCandidates = topCandidatesSuffice(options, context.vocabularySize);
  }

  reset(): void {
    this.distributionRandom.reset();
    this.xtcRandom.reset();
    this.mirostatMu = mirostatInitialMu(this.options.mirostat.tau);
  }

  sample(logits: Float32Array, history: ArrayLike<number>): SampleResult {
    const options = this.options;
    const candidates = this.candidates.load(logits);
    if (this.logitBias) applyLogitBias(candidates, this.logitBias);
    if (options.mirostat.mode !== 0) return this.sampleMirostat(candidates);
    if (this.penaltyCounts) applyPenalties(candidates, history, this.penaltyOptions, this.penaltyCounts);
    if (this.dryWorkspace) applyDry(candidates, history, this.dryOptions, this.dryWorkspace);

    const typicalEnabled = options.typicalP < 1;
    const xtcEnabled = options.xtc.probability > 0 && options.xtc.threshold <= 0.5;
    if (options.temperature <= 0) {
      // Greedy. The logprob is of the full softmax at this point, so it is computed before truncation.
      const { ids, logits, length } = candidates;
      const best = argmax(logits, length);
      const max = logits[best]!;
      if (max === -Infinity) throw new SamplerError("no token can be sampled: every candidate has logit -Infinity (banned by logitBias?)");
      const logNormalizer = logSumExp(logits, length, max);
      // top-k, top-p and min-p always keep the most likely token; typical and XTC may not.
      if (!typicalEnabled && !xtcEnabled) return { token: ids[best]!, logprob: max - logNormalizer };
      this.truncate(candidates, typicalEnabled, xtcEnabled);
      temperature(candidates, 0);
      let kept = 0;
      for (let i = 1; i < candidates.length; i++) if (logits[i]! > logits[kept]!) kept = i;
      return { token: ids[kept]!, logprob: logits[kept]! - logNormalizer };
    }
    this.truncate(candidates, typicalEnabled, xtcEnabled);
    temperature(candidates, options.temperature);
    return pickDistribution(candidates, this.distributionRandom);
  }

  sampleTop(ids: Int32Array, logits: Float32Array, history: ArrayLike<number>): SampleResult {
    void history; // nothing that reads the history (penalties, DRY) may be on: see topCandidatesSuffice
    const k = this.topCandidates;
    if (k === 0) throw new SamplerError("these sampling options need the whole logits (sampleTop needs temperature > 0, topK > 0, no logitBias, penalties or DRY)");
    if (ids.length !== k || logits.length !== k) throw new SamplerError(`sampleTop takes the ${k} best candidates, got ${ids.length} ids and ${logits.length} logits`);
    const candidates = this.candidates;
    candidates.ids.set(ids);
    candidates.logits.set(logits);
    candidates.length = k;
    candidates.sorted = true;
    const options = this.options;
    this.truncate(candidates, options.typicalP < 1, options.xtc.probability > 0 && options.xtc.threshold <= 0.5);
    temperature(candidates, options.temperature);
    return pickDistribution(candidates, this.distributionRandom);
  }

  /**
   * llama.cpp's chain with Mirostat, after the logit bias: temperature → Mirostat → pick, then mu
   * learns from the picked token's probability among the kept candidates (their softmax as
   * llama.cpp computes it). At temperature 0 only the first largest logit is left, which Mirostat
   * keeps and picks (probability 1).
   */
  private sampleMirostat(candidates: Candidates): SampleResult {
    const { mode, tau, eta } = this.options.mirostat;
    let result: SampleResult;
    if (this.options.temperature <= 0) {
      result = pickGreedy(candidates);
      this.mirostatMu = mirostatUpdate(this.mirostatMu, tau, eta, 1);
      return result;
    }
    temperature(candidates, this.options.temperature);
    if (mode === 1) mirostat(candidates, this.mirostatMu, this.vocabularySize);
    else mirostatV2(candidates, this.mirostatMu);
    result = pickDistribution(candidates, this.distributionRandom);
    softmax(candidates, false);
    const { ids, probabilities, length } = candidates;
    let picked = 0;
    while (picked < length - 1 && ids[picked] !== result.token) picked++;
    this.mirostatMu = mirostatUpdate(this.mirostatMu, tau, eta, probabilities[picked]!);
    return result;
  }

  private truncate(candidates: Candidates, typicalEnabled: boolean, xtcEnabled: boolean): void {
    const options = this.options;
    topNSigma(candidates, options.topNSigma);
    topK(candidates, options.topK);
    if (typicalEnabled) typical(candidates, options.typicalP, options.minKeep);
    topP(candidates, options.topP, options.minKeep);
    minP(candidates, options.minP, options.minKeep);
    if (xtcEnabled) xtc(candidates, options.xtc.probability, options.xtc.threshold, this.xtcRandom, options.minKeep);
  }
}
