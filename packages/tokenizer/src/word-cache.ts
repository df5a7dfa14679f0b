/**
 * The tokens of pre-token words already seen, keyed by the words' code points (no strings are
 * built to look a word up). Open addressing over typed arrays; everything is dropped when it holds
 * `maxWords` words.
 */
export class WordCache {
  private readonly maxWords: number;
  private capacity = 0;
  private mask = 0;
  private count = 0;
  // Per slot: hash, where the key and value sit in the arenas, and their lengths (keyLength 0 = empty).
  private slotHashes = new Int32Array(0);
  private slotKeyStarts = new Int32Array(0);
  private slotKeyLengths = new Int32Array(0);
  private slotValueStarts = new Int32Array(0);
  private slotValueLengths = new Int32Array(0);
  private keys = new Uint32Array(1 << 16);
  private keysUsed = 0;
  private values = new Int32Array(1 << 16);
  private valuesUsed = 0;

  constructor(maxWords = 1 << 18) {
    this.maxWords = maxWords;
    this.allocateSlots(1 << 12);
  }

  get size(): number {
    return this.count;
  }

  clear(): void {
    this.count = 0;
    this.keysUsed = 0;
    this.valuesUsed = 0;
    this.slotKeyLengths.fill(0);
  }

  /** FNV-1a over the code points of `codepoints[start, end)`. */
  static hash(codepoints: Uint32Array, start: number, end: number): number {
    let hash = 0x811c9dc5 | 0;
    for (let i = start; i < end; i++) hash = Math.imul(hash ^ (codepoints[i] ?? 0), 0x01000193);
    return hash;
  }

  /**
   * Appends the cached tokens of the word `codepoints[start, end)` to `out` and returns true, or
   * returns false when the word is not cached.
   */
  appendTokens(codepoints: Uint32Array, start: number, end: number, hash: number, out: number[]): boolean {
    const slot = this.findSlot(codepoints, start, end, hash);
    const length = this.slotKeyLengths[slot] ?? 0;
    if (length === 0) return false;
    const valueStart = this.slotValueStarts[slot] ?? 0;
    const valueEnd = valueStart + (this.slotValueLengths[slot] ?? 0);
    const values = this.values;
    for (let i = valueStart; i < valueEnd; i++) out.push(values[i] ?? 0);
    return true;
  }

  /** Remembers the tokens of a word (which must not be cached yet). */
  set(codepoints: Uint32Array, start: number, end: number, hash: number, tokens: readonly number[]): void {
    if (end <= start) return;
    if (this.count >= this.maxWords) this.clear();
    if ((this.count + 1) * 2 > this.capacity) this.allocateSlots(this.capacity * 2);
    const keyLength = end - start;
    if (this.keysUsed + keyLength > this.keys.length) this.keys = grow(this.keys, this.keysUsed + keyLength);
    if (this.valuesUsed + tokens.length > this.values.length) this.values = grow(this.values, this.valuesUsed + tokens.length);

    const slot = this.findSlot(codepoints, start, end, hash);
    this.slotHashes[slot] = hash;
    this.slotKeyStarts[slot] = this.keysUsed;
    this.slotKeyLengths[slot] = keyLength;
    this.slotValueStarts[slot] = this.valuesUsed;
    this.slotValueLengths[slot] = tokens.length;
    this.keys.set(codepoints.subarray(start, end), this.keysUsed);
    this.keysUsed += keyLength;
    for (const token of tokens) this.values[this.valuesUsed++] = token;
    this.count++;
  }

  /** The slot holding the word, or the empty slot where it would go. */
  private findSlot(codepoints: Uint32Array, start: number, end: number, hash: number): number {
    const length = end - start;
    const keys = this.keys;
    let slot = hash & this.mask;
    for (;;) {
      const slotLength = this.slotKeyLengths[slot] ?? 0;
      if (slotLength === 0) return slot;
      if (slotLength === length && this.slotHashes[slot] === hash) {
        const keyStart = this.slotKeyStarts[slot] ?? 0;
        let equal = true;
        for (let i = 0; i < length; i++) {
          if (keys[keyStart + i] !== codepoints[start + i]) {
            equal = false;
            break;
          }
        }
        if (equal) return slot;
      }
      slot = (slot + 1) & this.mask;
    }
  }

  private allocateSlots(capacity: number): void {
    const old = {
      hashes: this.slotHashes,
      keyStarts: this.slotKeyStarts,
      keyLengths: this.slotKeyLengths,
      valueStarts: this.slotValueStarts,
      valueLengths: this.slotValueLengths,
    };
    this.capacity = capacity;
    this.mask = capacity - 1;
    this.slotHashes = new Int32Array(capacity);
    this.slotKeyStarts = new Int32Array(capacity);
    this.slotKeyLengths = new Int32Array(capacity);
    this.slotValueStarts = new Int32Array(capacity);
    this.slotValueLengths = new Int32Array(capacity);
    for (let i = 0; i < old.keyLengths.length; i++) {
      const keyLength = old.keyLengths[i] ?? 0;
      if (keyLength === 0) continue;
      const hash = old.hashes[i] ?? 0;
      let slot = hash & this.mask;
      while ((this.slotKeyLengths[slot] ?? 0) !== 0) slot = (slot + 1) & this.mask;
      this.slotHashes[slot] = hash;
      this.slotKeyStarts[slot] = old.keyStarts[i] ?? 0;
      this.slotKeyLengths[slot] = keyLength;
      this.slotValueStarts[slot] = old.valueStarts[i] ?? 0;
      this.slotValueLengths[slot] = old.valueLengths[i] ?? 0;
    }
  }
}

function grow<T extends Uint32Array<ArrayBuffer> | Int32Array<ArrayBuffer>>(array: T, needed: number): T {
  let size = array.length * 2;
  while (size < needed) size *= 2;
  const bigger = new (array.constructor as new (length: number) => T)(size);
  bigger.set(array);
  return bigger;
}
