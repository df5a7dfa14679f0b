/** checkImatrixModel: an imatrix entry fits its weight (columns × experts sums, one count or one per expert), or the error names file and tensor. */
import { describe, expect, it } from "vitest";
import type { GGUFTensorInfo } from "../gguf-file";
import { GGMLType } from "../ggml-type";
import { checkImatrixModel } from "./check-imatrix-model";
import type { Imatrix } from "./imatrix";

const tensor = (name: string, shape: number[]): GGUFTensorInfo => ({ name, type: GGMLType.F32, shape, elementCount: shape.reduce((p, v) => p * v, 1), offset: 0, byteSize: 0 });
const model = [tensor("blk.0.attn_q.weight", [4, 8]), tensor("blk.0.ffn_up_exps.weight", [4, 6, 3])];
const imatrix = (entries: Array<[string, number, number[]]>, legacy = false): Imatrix => ({
  entries: new Map(entries.map(([name, sums, counts]) => [name, { sums: new Float32Array(sums), counts }])),
  datasets: [],
  chunkCount: 0,
  chunkSize: legacy ? 0 : 4,
  legacy,
});

describe("checkImatrixModel", () => {
  it("accepts the model's sizes: dense, per expert, and a legacy entry's single count", () => {
    expect(() => checkImatrixModel(imatrix([["blk.0.attn_q.weight", 4, [1]], ["blk.0.ffn_up_exps.weight", 12, [1, 0, 2]]]), model, "x.gguf")).not.toThrow();
    expect(() => checkImatrixModel(imatrix([["blk.0.ffn_up_exps.weight", 12, [1]]], true), model, "x.dat")).not.toThrow();
  });

  it("names the file and the tensor that does not fit", () => {
    expect(() => checkImatrixModel(imatrix([["blk.0.attn_q.weight", 8, [1]]]), model, "x.gguf")).toThrow('x.gguf: tensor "blk.0.attn_q.weight": 8 sums, the model\'s [4, 8] weight takes 4: the imatrix of another model?');
    expect(() => checkImatrixModel(imatrix([["blk.0.ffn_up_exps.weight", 8, [1, 1]]]), model, "x.gguf")).toThrow("8 sums, the model's [4, 6, 3] weight takes 12 (4 columns × 3 experts)");
    expect(() => checkImatrixModel(imatrix([["blk.0.ffn_up_exps.weight", 12, [1, 1]]]), model, "x.gguf")).toThrow("2 counts, the model's weight has 3 matrices");
    expect(() => checkImatrixModel(imatrix([["blk.9.attn_q.weight", 4, [1]]]), model, "x.gguf")).toThrow('x.gguf: tensor "blk.9.attn_q.weight": the model has no such weight');
  });
});
