import { chmodSync, closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { AuditCheckpointClaims } from '../../identity/index';
import { parseJson } from './parse-json';

/** One stored checkpoint: the head in plain words for people, and the admin-signed JWT-VC. */
export interface AuditCheckpoint extends AuditCheckpointClaims {
  /** The `AuditCheckpoint` JWT-VC over `{rowId, hash}`: the only part a verifier trusts. */
  readonly credential: string;
}

/**
 * Where the household keeps its signed checkpoints, outside the audited table (SPEC §8). Async, so
 * a shared database can hold them when several instances serve one household (SPEC §11). A store
 * holds what it is given: nothing it returns is trusted until its signature is verified.
 */
export interface CheckpointStore {
  /** Appends one checkpoint durably (on disk before this resolves). */
  append(checkpoint: AuditCheckpoint): Promise<void>;
  /**
   * Every stored entry, oldest first, each as the JSON value stored (`undefined` for an entry that
   * is not JSON): the verifier decides what each is and names the damaged ones by position.
   */
  entries(): Promise<readonly unknown[]>;
  /** The newest stored entry, as {@link entries} returns it; `undefined` when the store is empty. */
  newest(): Promise<unknown>;
}

/**
 * The checkpoints as an append-only JSON-lines file (normally `<data folder>/audit-checkpoints.jsonl`),
 * created owner-only (0600) and kept so; each line is synced to disk before `append` resolves.
 */
export function createFileCheckpointStore(path: string): CheckpointStore {
  const entries = async (): Promise<readonly unknown[]> => {
    let text = '';
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      // No file: no checkpoint yet.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const lines = text.split('\n');
    if (lines.at(-1) === '') lines.pop();
    return lines.map((line) => parseJson(line));
  };
  return {
    async append(checkpoint) {
      appendLine(path, `${JSON.stringify(checkpoint)}\n`);
    },
    entries,
    async newest() {
      return (await entries()).at(-1);
    },
  };
}

/** Appends one line and syncs it to disk; the file is created owner-only and kept so. */
export function appendLine(path: string, line: string): void {
  const descriptor = openSync(path, 'a', 0o600);
  try {
    chmodSync(path, 0o600);
    const bytes = Buffer.from(line, 'utf8');
    let written = 0;
    while (written < bytes.length) written += writeSync(descriptor, bytes, written, bytes.length - written);
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}
