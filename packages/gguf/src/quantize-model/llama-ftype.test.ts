import { describe, expect, it } from "vitest";
import { GGMLType } from "../ggml-type";
import { LLAMA_FILE_TYPES, llamaFileTypeName, parseLlamaFileType } from "./llama-ftype";
import { QuantizationError } from "./quantization-error";

describe("parseLlamaFileType (llama-quantize's type argument)", () => {
  it("takes llama-quantize's names in any case, its aliases and llama_ftype numbers", () => {
    expect(parseLlamaFileType("Q4_K_M")).toEqual({ name: "Q4_K_M", id: 15, defaultType: GGMLType.Q4_K });
    expect(parseLlamaFileType("q4_k_m").id).toBe(15);
    expect(parseLlamaFileType("Q4_K").name).toBe("Q4_K_M");
    expect(parseLlamaFileType("Q3_K").name).toBe("Q3_K_M");
    expect(parseLlamaFileType("q5_k").name).toBe("Q5_K_M");
    expect(parseLlamaFileType(7).name).toBe("Q8_0");
    expect(parseLlamaFileType("32")).toEqual({ name: "BF16", id: 32, defaultType: GGMLType.BF16 });
    expect(parseLlamaFileType("COPY")).toMatchObject({ name: "COPY", onlyCopy: true });
  });

  it("lists llama.h's ids for the types it writes", () => {
    expect(Object.fromEntries(LLAMA_FILE_TYPES.map((t) => [t.name, t.id]))).toEqual({
      F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q8_0: 7, Q5_0: 8, Q5_1: 9, Q2_K: 10, Q3_K_S: 11, Q3_K_M: 12, Q3_K_L: 13,
      Q4_K_S: 14, Q4_K_M: 15, Q5_K_S: 16, Q5_K_M: 17, Q6_K: 18, IQ2_XXS: 19, IQ2_XS: 20, Q2_K_S: 21, IQ3_XS: 22, IQ3_XXS: 23,
      IQ1_S: 24, IQ4_NL: 25, IQ3_S: 26, IQ3_M: 27, IQ2_S: 28, IQ2_M: 29, IQ4_XS: 30, IQ1_M: 31, BF16: 32,
    });
  });

  it("gives the low-bit types llama_ftype_get_default_type's tensor type and marks those that need an importance matrix", () => {
    const of = (name: string) => parseLlamaFileType(name);
    expect(of("IQ2_S")).toEqual({ name: "IQ2_S", id: 28, defaultType: GGMLType.IQ2_XS, needsImportance: true });
    expect(of("iq2_m")).toEqual({ name: "IQ2_M", id: 29, defaultType: GGMLType.IQ2_S, needsImportance: true });
    expect(of("IQ3_XS").defaultType).toBe(GGMLType.IQ3_S);
    expect(of("Q2_K_S").defaultType).toBe(GGMLType.Q2_K);
    expect(of("IQ1_M").defaultType).toBe(GGMLType.IQ1_M);
    expect(LLAMA_FILE_TYPES.filter((t) => t.needsImportance).map((t) => t.name)).toEqual([
      "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M",
    ]);
    expect(of("Q2_K").needsImportance).toBeUndefined();
  });

  it("says why a llama.cpp type is not supported, and lists the known ones for an unknown type", () => {
    expect(() => parseLlamaFileType("TQ1_0")).toThrow(QuantizationError);
    expect(() => parseLlamaFileType("TQ1_0")).toThrow(/^quantization type TQ1_0 is not supported: ternary types are not implemented; one of: /);
    expect(() => parseLlamaFileType("mxfp4_moe")).toThrow(/MXFP4_MOE is not supported: mxfp4 is not implemented/);
    expect(parseLlamaFileType("iq3_m")).toMatchObject({ name: "IQ3_M", id: 27, defaultType: GGMLType.IQ3_S });
    expect(parseLlamaFileType("iq4_xs")).toEqual({ name: "IQ4_XS", id: 30, defaultType: GGMLType.IQ4_XS });
    expect(() => parseLlamaFileType(36)).toThrow(/TQ1_0 is not supported/);
    expect(() => parseLlamaFileType("Q7_K")).toThrow(/unknown quantization type "Q7_K"; one of: F32, F16, Q4_0, .*, IQ4_NL, IQ3_S, IQ3_M, IQ2_S, IQ2_M, IQ4_XS, IQ1_M, BF16, COPY/);
    expect(() => parseLlamaFileType(99)).toThrow(/unknown llama\.cpp file type 99/);
  });

  it("names a file's general.file_type, with llama.cpp's guessed flag", () => {
    expect(llamaFileTypeName(15)).toBe("Q4_K_M");
    expect(llamaFileTypeName(21)).toBe("Q2_K_S");
    expect(llamaFileTypeName(1024 | 7)).toBe("Q8_0 (guessed)");
    expect(llamaFileTypeName(5)).toBeUndefined();
  });
});
