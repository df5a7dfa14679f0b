/**
 * A byte trie over a vocabulary's token pieces, laid out in depth-first order in flat arrays: a
 * node's subtree is the run of nodes up to `subtreeEnd`, so a walk is a loop over indices that
 * skips a pruned subtree in one jump. Tokens with an empty piece (control tokens, unused ids) are
 * not in it: they can never be sampled under a grammar. End-of-generation tokens are kept apart.
 */
export class TokenTrie {
  readonly vocabularySize: number;
  /** Token ids that end generation; allowed only when the grammar has matched a whole input. */
  readonly endOfGeneration: Int32Array;
  readonly nodeCount: number;
  readonly maxDepth: number;
  readonly nodeByte: Uint8Array; // [nodes] byte on the edge into the node (root: 0)
  readonly nodeDepth: Int32Array; // [nodes] root 0
  readonly subtreeEnd: Int32Array; // [nodes] first node after the subtree
  readonly tokenStart: Int32Array; // [nodes] tokens whose piece ends here: tokenOrder[tokenStart, tokenEnd)
  readonly tokenEnd: Int32Array; // [nodes]
  readonly tokenOrder: Int32Array; // [trie tokens] ids sorted by piece
  private readonly pieces: readonly (Uint8Array | undefined)[];
  private readonly endOfGenerationSet: ReadonlySet<number>;

  private constructor(pieces: readonly (Uint8Array | undefined)[], endOfGeneration: Iterable<number>) {
    this.vocabularySize = pieces.length;
    this.pieces = pieces;
    this.endOfGenerationSet = new Set(endOfGeneration);
    this.endOfGeneration = Int32Array.from(this.endOfGenerationSet);
    const ids: number[] = [];
    let totalBytes = 0;
    for (let id = 0; id < pieces.length; id++) {
      const piece = pieces[id];
      if (piece && piece.length > 0 && !this.endOfGenerationSet.has(id)) {
        ids.push(id);
        totalBytes += piece.length;
      }
    }
    ids.sort((a, b) => compareBytes(pieces[a]!, pieces[b]!));
    this.tokenOrder = Int32Array.from(ids);
    const capacity = totalBytes + 1;
    this.nodeByte = new Uint8Array(capacity);
    this.nodeDepth = new Int32Array(capacity);
    this.subtreeEnd = new Int32Array(capacity);
    this.tokenStart = new Int32Array(capacity);
    this.tokenEnd = new Int32Array(capacity);
    // Sorted pieces share their longest common prefix with the previous one: keep the path of that
    // prefix, close the nodes below it, open nodes for the rest.
    const path: number[] = [0];
    let count = 1;
    let previous: Uint8Array = new Uint8Array(0);
    let maxDepth = 0;
    for (let order = 0; order < ids.length; order++) {
      const piece = pieces[ids[order]!]!;
      let common = 0;
      while (common < previous.length && common < piece.length && previous[common] === piece[common]) common++;
      while (path.length - 1 > common) this.subtreeEnd[path.pop()!] = count;
      for (let depth = common; depth < piece.length; depth++) {
        const node = count++;
        this.nodeByte[node] = piece[depth]!;
        this.nodeDepth[node] = depth + 1;
        this.tokenStart[node] = 0;
        this.tokenEnd[node] = 0;
        path.push(node);
      }
      const last = path[path.length - 1]!;
      if (this.tokenEnd[last] === 0 && this.tokenStart[last] === 0) this.tokenStart[last] = order;
      this.tokenEnd[last] = order + 1;
      maxDepth = Math.max(maxDepth, piece.length);
      previous = piece;
    }
    while (path.length > 0) this.subtreeEnd[path.pop()!] = count;
    this.nodeCount = count;
    this.maxDepth = maxDepth;
  }

  /**
   * A trie over `pieces[id]`, the bytes each token stands for as the tokenizer decodes it (empty or
   * undefined for tokens never to sample: control, unused). `endOfGeneration` ids end generation.
   */
  static fromPieces(pieces: readonly (Uint8Array | undefined)[], endOfGeneration: Iterable<number>): TokenTrie {
    return new TokenTrie(pieces, endOfGeneration);
  }

  /** The bytes of a token (empty when it is not in the trie). */
  piece(id: number): Uint8Array {
    return this.pieces[id] ?? EMPTY;
  }

  isEndOfGeneration(id: number): boolean {
    return this.endOfGenerationSet.has(id);
  }
}

const EMPTY = new Uint8Array(0);

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}
