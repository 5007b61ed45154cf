import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';

/** Eight bytes that open every cache file, with the format's version in the last one. */
const magic = Buffer.from('EMCPVEC1', 'latin1');
/** SHA-256 of the exact text: the key of a vector. */
const keyBytes = 32;
/** SHA-256 over everything before it, last in the file: a torn or edited file never loads. */
const checksumBytes = 32;
/** Default bound on stored vectors: 20 000 MiniLM vectors are about 31 MB. */
const defaultMaxEntries = 20_000;

const headerSchema = z.strictObject({
  model: z.string().min(1),
  width: z.number().int().min(1).max(8192),
  count: z.number().int().min(0),
});

/** Options of {@link VectorCache.open}. */
export interface VectorCacheOptions {
  /** The cache file (created on the first save, with its folder). */
  readonly file: string;
  /**
   * What the vectors were computed with: the model's name and a hash of its weights. A file
   * written with another fingerprint is ignored and replaced on the next save.
   */
  readonly fingerprint: string;
  /** At most this many vectors are kept; the least recently used go first. */
  readonly maxEntries?: number;
  /** Receives one line when an existing file cannot be used. */
  readonly log?: (line: string) => void;
}

/**
 * Tool embeddings kept on disk between runs, keyed by the model's fingerprint and the SHA-256
 * of the exact text that was embedded: a restart with unchanged servers reads its vectors back
 * instead of running the model again, and a tool whose text changed misses and is re-embedded.
 *
 * The file is one binary record (magic, JSON header, keys, float32 rows, SHA-256 trailer),
 * written to a temporary file beside it and renamed into place, so a reader sees the old file
 * or the new one, never half of one. A file that is truncated, corrupt or from another model
 * is ignored (said once in the log) and rewritten on the next save: the cache can only save
 * work, never change a result. Only texts are hashed into it; the texts themselves are not stored.
 */
export class VectorCache {
  readonly #file: string;
  readonly #fingerprint: string;
  readonly #maxEntries: number;
  /** key (hex SHA-256) → vector, least recently used first (Map keeps insertion order). */
  readonly #entries = new Map<string, Float32Array>();
  #width = 0;
  #dirty = false;
  /** The save in progress, so saves never interleave. */
  #saving: Promise<void> = Promise.resolve();
  /** A save asked for but not started yet: later requests join it instead of queueing more. */
  #queued: Promise<void> | undefined;

  private constructor(options: VectorCacheOptions) {
    this.#file = options.file;
    this.#fingerprint = options.fingerprint;
    this.#maxEntries = Math.max(1, options.maxEntries ?? defaultMaxEntries);
  }

  /** Reads the cache file if there is a usable one; otherwise starts empty (never throws for a bad file). */
  static async open(options: VectorCacheOptions): Promise<VectorCache> {
    const cache = new VectorCache(options);
    let bytes: Buffer;
    try {
      bytes = await readFile(options.file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        options.log?.(`vector cache ${options.file} cannot be read (${(error as Error).message}); starting empty.`);
      }
      return cache;
    }
    const problem = cache.#load(bytes);
    if (problem)
      options.log?.(`vector cache ${options.file} ignored (${problem}); it is rebuilt as tools are embedded.`);
    return cache;
  }

  /** Number of vectors held. */
  get size(): number {
    return this.#entries.size;
  }

  /** The cached vector of exactly `text`, or `undefined`. A hit counts as a use. */
  get(text: string): Float32Array | undefined {
    const key = keyOf(text);
    const vector = this.#entries.get(key);
    if (!vector) return undefined;
    // Move to the most recently used end; the order reaches the file with the next change.
    this.#entries.delete(key);
    this.#entries.set(key, vector);
    return vector;
  }

  /** Remembers the vector of `text` (a vector of another width than the cache's is not kept). */
  set(text: string, vector: Float32Array): void {
    if (this.#width === 0) this.#width = vector.length;
    if (vector.length !== this.#width) return;
    const key = keyOf(text);
    this.#entries.delete(key);
    this.#entries.set(key, vector.slice());
    this.#dirty = true;
    this.#trim();
  }

  /** Drops the least recently used vectors beyond the bound. */
  #trim(): void {
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) return;
      this.#entries.delete(oldest);
    }
  }

  /**
   * Writes the cache when it changed since the last save: to a temporary file in the same
   * folder, then renamed over the old one. Saves are serialised; a failure is thrown to the
   * caller (who logs it) and leaves the previous file in place.
   */
  save(): Promise<void> {
    if (this.#queued) return this.#queued;
    const run = this.#saving.then(() => {
      this.#queued = undefined;
      return this.#write();
    });
    this.#queued = run;
    // A failed save must not block the next one.
    this.#saving = run.catch(() => undefined);
    return run;
  }

  async #write(): Promise<void> {
    if (!this.#dirty) return;
    this.#dirty = false;
    const bytes = this.#serialise();
    await mkdir(dirname(this.#file), { recursive: true });
    const temporary = `${this.#file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await writeFile(temporary, bytes, { mode: 0o600 });
      await rename(temporary, this.#file);
    } catch (error) {
      this.#dirty = true;
      await rm(temporary, { force: true });
      throw error;
    }
  }

  #serialise(): Buffer {
    const width = this.#width;
    const count = width === 0 ? 0 : this.#entries.size;
    const header = Buffer.from(JSON.stringify({ model: this.#fingerprint, width, count }), 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32LE(header.length);
    const keys = Buffer.alloc(count * keyBytes);
    const rows = new Float32Array(count * width);
    let position = 0;
    for (const [key, vector] of this.#entries) {
      if (position === count) break;
      keys.write(key, position * keyBytes, 'hex');
      rows.set(vector, position * width);
      position++;
    }
    const body = Buffer.concat([
      magic,
      length,
      header,
      keys,
      Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength),
    ]);
    return Buffer.concat([body, createHash('sha256').update(body).digest()]);
  }

  /** Loads a file's vectors; returns why it cannot be used, or `undefined` when it loaded. */
  #load(bytes: Buffer): string | undefined {
    if (bytes.length < magic.length + 4 + checksumBytes) return 'too short';
    if (!bytes.subarray(0, magic.length).equals(magic)) return 'not a vector cache of this version';
    const body = bytes.subarray(0, bytes.length - checksumBytes);
    const checksum = bytes.subarray(bytes.length - checksumBytes);
    if (!createHash('sha256').update(body).digest().equals(checksum)) return 'checksum mismatch: truncated or corrupt';
    const headerLength = body.readUInt32LE(magic.length);
    const headerStart = magic.length + 4;
    if (headerStart + headerLength > body.length) return 'header runs past the end';
    let header: z.infer<typeof headerSchema>;
    try {
      const parsed = headerSchema.safeParse(
        JSON.parse(body.subarray(headerStart, headerStart + headerLength).toString('utf8')),
      );
      if (!parsed.success) return 'malformed header';
      header = parsed.data;
    } catch {
      return 'malformed header';
    }
    if (header.model !== this.#fingerprint) return 'written for another model';
    const keysStart = headerStart + headerLength;
    const rowsStart = keysStart + header.count * keyBytes;
    if (rowsStart + header.count * header.width * 4 !== body.length) return 'size does not match its header';
    // Copy the rows out: a Float32Array needs 4-byte alignment the file's offset may not have.
    const rows = new Float32Array(header.count * header.width);
    new Uint8Array(rows.buffer).set(body.subarray(rowsStart));
    this.#width = header.width;
    for (let entry = 0; entry < header.count; entry++) {
      const key = body.subarray(keysStart + entry * keyBytes, keysStart + (entry + 1) * keyBytes).toString('hex');
      this.#entries.set(key, rows.subarray(entry * header.width, (entry + 1) * header.width));
    }
    // A file written under a larger bound is cut to this one (its oldest entries first).
    this.#trim();
    return undefined;
  }
}

function keyOf(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
