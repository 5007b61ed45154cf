/**
 * Unit vectors kept row by row in one contiguous `Float32Array`, so scoring a query against
 * every tool is a single tight loop (the hot path of semantic search at 10 000 tools).
 */
export class VectorStore {
  #width = 0;
  #matrix = new Float32Array(0);
  /** The name stored in each row; `undefined` marks a free row. */
  readonly #names: (string | undefined)[] = [];
  readonly #rowOf = new Map<string, number>();
  readonly #free: number[] = [];

  /** Number of stored vectors. */
  get size(): number {
    return this.#rowOf.size;
  }

  has(name: string): boolean {
    return this.#rowOf.has(name);
  }

  /** Stores (or replaces) the vector for `name`. Every vector must have the same width. */
  set(name: string, vector: Float32Array): void {
    if (this.#width === 0) this.#width = vector.length;
    if (vector.length !== this.#width) throw new Error(`vector width ${vector.length} differs from ${this.#width}`);
    const row = this.#rowOf.get(name) ?? this.#free.pop() ?? this.#names.length;
    if ((row + 1) * this.#width > this.#matrix.length) {
      const grown = new Float32Array(Math.max(64, (row + 1) * 2) * this.#width);
      grown.set(this.#matrix);
      this.#matrix = grown;
    }
    this.#matrix.set(vector, row * this.#width);
    this.#names[row] = name;
    this.#rowOf.set(name, row);
  }

  delete(name: string): void {
    const row = this.#rowOf.get(name);
    if (row === undefined) return;
    this.#rowOf.delete(name);
    this.#names[row] = undefined;
    this.#free.push(row);
  }

  /** Width of the stored vectors (0 while empty). */
  get width(): number {
    return this.#width;
  }

  /** The used rows as one row-major matrix (free rows included; see {@link nameAt}). */
  matrix(): Float32Array {
    return this.#matrix.subarray(0, this.#names.length * this.#width);
  }

  /** The row holding `name`, if stored. */
  rowOf(name: string): number | undefined {
    return this.#rowOf.get(name);
  }

  /** The name stored in `row`, or `undefined` for a free row. */
  nameAt(row: number): string | undefined {
    return this.#names[row];
  }

  /** The dot product of `query` with every row, in plain JavaScript (the fallback path). */
  dot(query: Float32Array): Float32Array {
    const width = this.#width;
    const rows = this.#names.length;
    const matrix = this.#matrix;
    const scores = new Float32Array(rows);
    if (query.length !== width) return scores;
    // biome-ignore-start lint/style/noNonNullAssertion: indexes stay inside equal-width rows
    for (let row = 0; row < rows; row++) {
      const offset = row * width;
      // Four accumulators let V8 pipeline the multiply-adds.
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let i = 0;
      for (; i + 3 < width; i += 4) {
        s0 += matrix[offset + i]! * query[i]!;
        s1 += matrix[offset + i + 1]! * query[i + 1]!;
        s2 += matrix[offset + i + 2]! * query[i + 2]!;
        s3 += matrix[offset + i + 3]! * query[i + 3]!;
      }
      for (; i < width; i++) s0 += matrix[offset + i]! * query[i]!;
      scores[row] = s0 + s1 + s2 + s3;
    }
    // biome-ignore-end lint/style/noNonNullAssertion: indexes stay inside equal-width rows
    return scores;
  }
}
