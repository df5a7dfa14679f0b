/**
 * RoPE scaling for contexts beyond the trained one, as llama.cpp applies it (ggml_rope_ext with
 * freq_scale, ext_factor, attn_factor, beta_fast 32 and beta_slow 1): linear scaling divides every
 * pair's angle by the factor; YaRN (Qwen3's 128K GGUFs: factor 4, original context 32768) divides
 * only the slow pairs' angles, keeps the fast ones, ramps between them, and scales cos and sin by
 * 1 + 0.1 ln(factor).
 */
import { z } from "zod";

export const ropeScalingOptionsSchema = z.object({
  /** none: plain RoPE (the file's scaling ignored); linear; yarn. */
  type: z.enum(["none", "linear", "yarn"]),
  /** How many times the trained context (llama.cpp's --rope-scale; freq_scale is its inverse). Default: the GGUF's, else 1. */
  factor: z.number().positive("factor must be positive").optional(),
  /** The context trained before scaling (llama.cpp's --yarn-orig-ctx). Default: the GGUF's, else its context length. */
  originalContextLength: z.number().int().positive("originalContextLength must be a positive integer").optional(),
});

export type RopeScalingOptions = z.input<typeof ropeScalingOptionsSchema>;

/** What a backend needs to rotate as ggml does: the angle of pair i is scaled as `ropeAngle` says. */
export interface RopeScaling {
  /** 1 / factor */
  readonly freqScale: number;
  /** 1 for YaRN (the ramp between extrapolated and interpolated pairs), 0 for linear scaling. */
  readonly extFactor: number;
  /** The factor cos and sin are scaled by (YaRN: 1 + 0.1 ln(factor), in f32). */
  readonly magnitude: number;
  /** YaRN's correction dimensions: pairs below the first keep their angle, pairs from the second on are interpolated. */
  readonly low: number;
  readonly high: number;
}

const BETA_FAST = 32;
const BETA_SLOW = 1;
const f32 = Math.fround;

/** ggml_rope_yarn_corr_dim: the pair whose wavelength fits `rotations` times into the original context. */
function correctionDim(dims: number, originalContext: number, rotations: number, freqBase: number): number {
  return f32(f32(dims * f32(Math.log(f32(originalContext / f32(rotations * 2 * f32(Math.PI)))))) / f32(2 * f32(Math.log(freqBase))));
}

/** The GGUF keys and context of a model that its RoPE scaling depends on. */
export interface RopeScalingSource {
  readonly ropeScalingType?: "none" | "linear" | "yarn";
  readonly ropeScalingFactor?: number;
  readonly ropeScalingOriginalContextLength?: number;
  readonly contextLength: number;
  readonly ropeFreqBase: number;
}

/** The context trained before scaling: the caller's, else the GGUF's, else its context length (llama.cpp's n_ctx_orig_yarn). */
export function originalContextLength(file: RopeScalingSource, options?: RopeScalingOptions): number {
  return options?.originalContextLength ?? file.ropeScalingOriginalContextLength ?? file.contextLength;
}

/**
 * The scaling of a model's RoPE from its GGUF keys and a caller's overrides (llama.cpp's context
 * parameters take precedence over the file's, and scaling type none means no scaling), or
 * undefined for plain RoPE.
 */
export function resolveRopeScaling(file: RopeScalingSource, headDim: number, options?: RopeScalingOptions): RopeScaling | undefined {
  const type = options?.type ?? file.ropeScalingType ?? "none";
  const factor = options?.factor ?? file.ropeScalingFactor ?? 1;
  if (type === "none" || (type === "linear" && factor === 1)) return undefined;
  const freqScale = f32(1 / factor);
  if (type === "linear") return { freqScale, extFactor: 0, magnitude: 1, low: 0, high: 0 };
  const originalContext = originalContextLength(file, options);
  const low = Math.max(0, Math.floor(correctionDim(headDim, originalContext, BETA_FAST, file.ropeFreqBase)));
  const high = Math.min(headDim - 1, Math.ceil(correctionDim(headDim, originalContext, BETA_SLOW, file.ropeFreqBase)));
  return { freqScale, extFactor: 1, magnitude: f32(1 + f32(0.1 * f32(Math.log(f32(1 / freqScale))))), low, high };
}

/**
 * The tokens a model's context may hold: with RoPE scaling, its factor times the context trained
 * before scaling (llama.cpp lets --ctx-size go there), and never less than the file's context_length.
 */
export function scaledContextLength(file: RopeScalingSource, headDim: number, options?: RopeScalingOptions): number {
  const scaling = resolveRopeScaling(file, headDim, options);
  return scaling ? Math.max(file.contextLength, Math.round(originalContextLength(file, options) / scaling.freqScale)) : file.contextLength;
}

/** rope_yarn_ramp: 1 for pairs below `low`, 0 from `high` on, linear between (pair = i0 / 2). */
function ramp(low: number, high: number, pair: number): number {
  const y = f32(f32(pair - low) / Math.max(0.001, f32(high - low)));
  return f32(1 - Math.min(1, Math.max(0, y)));
}

/**
 * The angle of pair `pair` from its unscaled angle (the position times theta_scale^pair, in f32),
 * as ggml's rope_yarn computes it in f32; cos and sin of it are then scaled by `magnitude`.
 */
export function scaledRopeAngle(scaling: RopeScaling, pair: number, angle: number): number {
  const interpolated = f32(scaling.freqScale * angle);
  if (scaling.extFactor === 0) return interpolated;
  const mix = f32(ramp(scaling.low, scaling.high, pair) * scaling.extFactor);
  return f32(f32(interpolated * f32(1 - mix)) + f32(angle * mix));
}

/**
 * NEOX RoPE of rows of `heads` heads of `headDim` values, in place, as ggml's CPU rope computes it
 * (theta_scale = freq_base^(-2/n_dims) in f32, theta walked by multiplication, cos and sin in f32):
 * row r at position positions[r], with `scaling` when given. Rows of one position share cos and sin.
 */
export function rotateNeox(data: Float32Array, positions: Int32Array, heads: number, headDim: number, freqBase: number, scaling: RopeScaling | undefined): void {
  const half = headDim / 2;
  const thetaScale = f32(freqBase ** (-2 / headDim));
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  let previous: number | undefined;
  for (let r = 0; r < positions.length; r++) {
    if (positions[r] !== previous) {
      previous = positions[r]!;
      let theta = f32(previous);
      for (let i = 0; i < half; i++) {
        if (scaling) {
          const angle = scaledRopeAngle(scaling, i, theta);
          cos[i] = f32(f32(Math.cos(angle)) * scaling.magnitude);
          sin[i] = f32(f32(Math.sin(angle)) * scaling.magnitude);
        } else {
          cos[i] = f32(Math.cos(theta));
          sin[i] = f32(Math.sin(theta));
        }
        theta = f32(theta * thetaScale);
      }
    }
    for (let h = 0; h < heads; h++) {
      const base = (r * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const x0 = data[base + i]!;
        const x1 = data[base + i + half]!;
        data[base + i] = x0 * cos[i]! - x1 * sin[i]!;
        data[base + i + half] = x0 * sin[i]! + x1 * cos[i]!;
      }
    }
  }
}
