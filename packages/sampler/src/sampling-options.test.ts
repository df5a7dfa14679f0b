import { describe, expect, it } from "vitest";
import { createSampler } from "./sampler";
import { InvalidSamplingOptionError } from "./sampler-error";
import { DEFAULT_DRY_SEQUENCE_BREAKERS, samplingOptionsSchema } from "./sampling-options";

/** The first issue's message for these options. */
function problem(options: unknown): string {
  const parsed = samplingOptionsSchema.safeParse(options);
  if (parsed.success) return "valid";
  return parsed.error.issues[0]!.message;
}

describe("samplingOptionsSchema", () => {
  it("fills in llama.cpp's defaults", () => {
    expect(samplingOptionsSchema.parse({})).toEqual({
      temperature: 0.8,
      topK: 40,
      topP: 0.95,
      minP: 0.05,
      typicalP: 1,
      repeatPenalty: 1,
      presencePenalty: 0,
      frequencyPenalty: 0,
      penaltyLastN: 64,
      dry: { multiplier: 0, base: 1.75, allowedLength: 2, penaltyLastN: 64, sequenceBreakers: [...DEFAULT_DRY_SEQUENCE_BREAKERS] },
      xtc: { probability: 0, threshold: 0.1 },
      topNSigma: -1,
      mirostat: { mode: 0, tau: 5, eta: 0.1 },
      minKeep: 1,
    });
    expect(DEFAULT_DRY_SEQUENCE_BREAKERS).toEqual(["\n", ":", '"', "*"]);
  });

  it.each([
    [{ temperature: -0.1 }, "temperature must be >= 0"],
    [{ temperature: "hot" }, "temperature must be a finite number"],
    [{ temperature: Number.NaN }, "temperature must be a finite number"],
    [{ topK: 1.5 }, "topK must be an integer"],
    [{ topP: 1.5 }, "topP must be between 0 and 1"],
    [{ minP: -0.1 }, "minP must be between 0 and 1"],
    [{ typicalP: 2 }, "typicalP must be between 0 and 1"],
    [{ repeatPenalty: 0 }, "repeatPenalty must be > 0"],
    [{ presencePenalty: Infinity }, "presencePenalty must be a finite number"],
    [{ frequencyPenalty: null }, "frequencyPenalty must be a finite number"],
    [{ penaltyLastN: -2 }, "penaltyLastN must be >= -1"],
    [{ dry: { multiplier: -1 } }, "dry.multiplier must be >= 0"],
    [{ dry: { base: -1 } }, "dry.base must be >= 0"],
    [{ dry: { allowedLength: 1.5 } }, "dry.allowedLength must be an integer"],
    [{ dry: { penaltyLastN: -3 } }, "dry.penaltyLastN must be >= -1"],
    [{ dry: { sequenceBreakers: ["\n", ""] } }, "dry.sequenceBreakers must not contain an empty string"],
    [{ dry: { sequenceBreakers: "\n" } }, "dry.sequenceBreakers must be an array of strings"],
    [{ xtc: { probability: 2 } }, "xtc.probability must be between 0 and 1"],
    [{ xtc: { threshold: -1 } }, "xtc.threshold must be between 0 and 1"],
    [{ topNSigma: Number.NaN }, "topNSigma must be a finite number"],
    [{ mirostat: { mode: 3 } }, "mirostat.mode must be 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0)"],
    [{ mirostat: { mode: 1.5 } }, "mirostat.mode must be 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0)"],
    [{ mirostat: { tau: 0 } }, "mirostat.tau must be > 0"],
    [{ mirostat: { eta: -0.1 } }, "mirostat.eta must be > 0"],
    [{ mirostat: { tau: Infinity } }, "mirostat.tau must be a finite number"],
    [{ seed: -1 }, "seed must be an integer in [0, 4294967295]"],
    [{ seed: 2 ** 32 }, "seed must be an integer in [0, 4294967295]"],
    [{ seed: 1.5 }, "seed must be an integer"],
    [{ minKeep: -1 }, "minKeep must be >= 0"],
    [{ logitBias: [1, 2] }, "logitBias must be a Map or an object from token id to bias"],
    [{ logitBias: { abc: 1 } }, 'logitBias key "abc" is not a token id (a non-negative integer)'],
    [{ logitBias: new Map([[-1, 1]]) }, 'logitBias key "-1" is not a token id (a non-negative integer)'],
    [{ logitBias: { 5: Number.NaN } }, "logitBias[5] must be a finite number or -Infinity"],
    [{ logitBias: { 5: Infinity } }, "logitBias[5] must be a finite number or -Infinity"],
  ])("rejects %j: %s", (options, message) => {
    expect(problem(options)).toBe(message);
  });

  it("accepts -Infinity biases, Maps, and the edges of every range", () => {
    expect(problem({ logitBias: { 5: -Infinity, 6: 2.5 } })).toBe("valid");
    expect(problem({ logitBias: new Map([[5, -Infinity]]) })).toBe("valid");
    expect(problem({ temperature: 0, topK: -1, topP: 1, minP: 0, typicalP: 0, penaltyLastN: -1, seed: 4294967295, minKeep: 0 })).toBe("valid");
    expect(problem({ presencePenalty: -2, frequencyPenalty: 2, xtc: { probability: 1, threshold: 1 } })).toBe("valid");
    expect(problem({ topNSigma: 0, mirostat: { mode: 2, tau: 0.01, eta: 1 } })).toBe("valid");
  });

  it("rejects unknown keys (a misspelt option is not silently ignored)", () => {
    const parsed = samplingOptionsSchema.safeParse({ top_k: 5 });
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues[0]!.code).toBe("unrecognized_keys");
  });

  it("createSampler throws InvalidSamplingOptionError naming the option", () => {
    try {
      createSampler({ dry: { base: -1 } }, { vocabularySize: 4 });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidSamplingOptionError);
      expect((error as InvalidSamplingOptionError).option).toBe("dry.base");
      expect((error as Error).message).toBe("dry.base must be >= 0");
    }
  });
});
