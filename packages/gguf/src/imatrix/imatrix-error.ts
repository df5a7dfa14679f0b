/**
 * A malformed or unsupported imatrix file: names the file, the field being read
 * ("tensor \"blk.0.attn_q.weight.counts\".data[3]", "entries[2].nval", "kv[\"imatrix.chunk_size\"]")
 * and the byte offset where it starts (-1 where the problem is not at one place, e.g. a missing key).
 */
export class ImatrixError extends Error {
  override readonly name = "ImatrixError";

  constructor(
    readonly path: string,
    readonly field: string,
    readonly offset: number,
    readonly problem: string,
  ) {
    super(offset < 0 ? `${path}: ${field}: ${problem}` : `${path}: ${field} at byte ${offset}: ${problem}`);
  }
}
