import { describe, expect, it } from "vitest";
import { EMULATED_GOLDEN_MODELS, selectedModels } from "./golden-suite-definition";

describe("MEMRA_CUDA_GOLDEN: which golden models the CUDA suite runs", () => {
  const gpu = () => false;
  const emulator = () => true;

  it("runs every model on a GPU and the emulated few on the emulator by default", () => {
    expect(selectedModels(undefined, gpu)).toBeUndefined();
    expect(selectedModels("", gpu)).toBeUndefined();
    expect(selectedModels(undefined, emulator)).toEqual(EMULATED_GOLDEN_MODELS);
  });

  it("runs every model with `all`, on either", () => {
    expect(selectedModels("all", emulator)).toBeUndefined();
    expect(selectedModels("all", gpu)).toBeUndefined();
  });

  it("runs the listed ids, on either", () => {
    expect(selectedModels("dense-q2_K,dense-q3_K", emulator)).toEqual(["dense-q2_K", "dense-q3_K"]);
    expect(selectedModels(" dense-q2_K , ", gpu)).toEqual(["dense-q2_K"]);
  });
});
