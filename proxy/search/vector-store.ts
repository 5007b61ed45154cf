/**
 * Unit vectors kept row by row in one contiguous `Float32Array`, so scoring a query against
 * every tool is a single tight loop (the hot path of semantic search at 10 000 tools). Rows are
 * small integers owned by the caller, the same rows its lexical index uses.
 */
export class VectorStore {
  #width = 0;
  #matrix = new Float32Array(0);
  /** 1 where a row holds a vector. */
  #present = new Uint8Array(0);
  #size = 0;

  /** Number of stored vectors. */
  get size(): number {
    return this.#size;
  }

  /** Width of the stored vectors (0 while empty). */
  get width(): number {
    return this.#width;
  }

  has(row: number): boolean {
    return this.#present[row] === 1;
  }

  /** Stores (or replaces) the vector of `row`. Every vector must have the same width. */
  set(row: number, vector: Float32Array): void {
    if (this.#width === 0) this.#width = vector.length;
    if (vector.length !== this.#width) throw new Error(`vector width ${vector.length} differs from ${this.#width}`);
    if (row >= this.#present.length) {
      const capacity = Math.max(64, (row + 1) * 2);
      const matrix = new Float32Array(capacity * this.#width);
      matrix.set(this.#matrix);
      this.#matrix = matrix;
      const present = new Uint8Array(capacity);
      present.set(this.#present);
      this.#present = present;
    }
    this.#matrix.set(vector, row * this.#width);
    if (this.#present[row] !== 1) this.#size++;
    this.#present[row] = 1;
  }

  /** Forgets the vector of `row`; its cells read as zero until the row is set again. */
  delete(row: number): void {
    if (this.#present[row] !== 1) return;
    this.#matrix.fill(0, row * this.#width, (row + 1) * this.#width);
    this.#present[row] = 0;
    this.#size--;
  }

  /** A snapshot of which of rows `0..rows-1` hold a vector (1) and which do not (0). */
  presence(rows: number): Uint8Array {
    const snapshot = new Uint8Array(rows);
    snapshot.set(this.#present.subarray(0, rows));
    return snapshot;
  }

  /** Rows `0..rows-1` as one row-major matrix (rows without a vector are zero). */
  matrix(rows: number): Float32Array {
    const cells = rows * this.#width;
    if (cells <= this.#matrix.length) return this.#matrix.subarray(0, cells);
    const padded = new Float32Array(cells);
    padded.set(this.#matrix);
    return padded;
  }

  /** The dot product of `query` with rows `0..rows-1`, in plain JavaScript (the fallback path). */
  dot(query: Float32Array, rows: number): Float32Array {
    const width = this.#width;
    const matrix = this.#matrix;
    const scores = new Float32Array(rows);
    if (query.length !== width) return scores;
    const stored = Math.min(rows, this.#present.length);
    // biome-ignore-start lint/style/noNonNullAssertion: indexes stay inside equal-width rows
    for (let row = 0; row < stored; row++) {
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
