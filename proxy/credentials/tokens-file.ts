import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fchmodSync,
  fsyncSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { ProxyError } from '../errors';

/** Where the tokens file is, and whether the operator named it explicitly. */
export interface TokensLocation {
  readonly path: string;
  /** True when it came from `EXTENSIBLE_MCP_TOKENS_FILE`; such a file must exist. */
  readonly explicit: boolean;
}

/**
 * Resolves the tokens file (SPEC §3.9): `EXTENSIBLE_MCP_TOKENS_FILE` (`~` expanded, relative to
 * the config's folder) or `tokens` beside the config. A file the operator named that does not
 * exist is an error: silently running without credentials would hide a typo.
 */
export function resolveTokensPath(options: { configPath: string; override?: string; home?: string }): TokensLocation {
  const folder = dirname(resolve(options.configPath));
  if (options.override === undefined) return { path: join(folder, 'tokens'), explicit: false };
  const home = options.home ?? homedir();
  const expanded =
    options.override === '~'
      ? home
      : options.override.startsWith('~/')
        ? join(home, options.override.slice(2))
        : options.override;
  const path = resolve(folder, expanded);
  if (!existsSync(path)) {
    throw new ProxyError(
      'tokens-not-found',
      `${path}: tokens file not found (EXTENSIBLE_MCP_TOKENS_FILE=${options.override}, relative to ${folder}). Create it (mode 0600) or unset the variable.`,
    );
  }
  return { path, explicit: true };
}

/** A parsed tokens file: values by server name, and the line numbers that could not be read. */
export interface ParsedTokens {
  readonly tokens: ReadonlyMap<string, string>;
  /** 1-based numbers of malformed lines (never their content: a line may hold a secret). */
  readonly malformedLines: readonly number[];
}

const linePattern = /^([^=\s]+)\s*=\s*(.*)$/;

function unquote(value: string): string {
  const first = value[0];
  if (value.length >= 2 && (first === '"' || first === "'") && value.endsWith(first)) return value.slice(1, -1);
  return value;
}

/**
 * Parses `name=value` lines. Blank lines and lines starting with `#` are skipped; surrounding
 * quotes are stripped. There are no inline comments: a `#` inside a value is part of the value.
 * A later line for the same name wins, as in `.env` files.
 */
export function parseTokens(text: string): ParsedTokens {
  const tokens = new Map<string, string>();
  const malformedLines: number[] = [];
  text.split(/\r?\n/).forEach((raw, position) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const match = linePattern.exec(line);
    const name = match?.[1];
    const value = match?.[2];
    if (name === undefined || value === undefined) {
      malformedLines.push(position + 1);
      return;
    }
    const unquoted = unquote(value.trim());
    if (unquoted === '') tokens.delete(name);
    else tokens.set(name, unquoted);
  });
  return { tokens, malformedLines };
}

/** One read of the tokens file. */
export type TokensRead =
  | { readonly found: true; readonly parsed: ParsedTokens; readonly modifiedMs: number }
  | { readonly found: false; readonly reason: string };

/** Reads the tokens file now (no caching: rotation applies to the next connection). */
export function readTokensFile(path: string): TokensRead {
  try {
    const text = readFileSync(path, 'utf8');
    return { found: true, parsed: parseTokens(text), modifiedMs: statSync(path).mtimeMs };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    return { found: false, reason: code === 'ENOENT' ? 'not present' : `cannot be read (${code})` };
  }
}

/**
 * Replaces `path` with `text` atomically: a temporary file in the same folder (so the rename
 * cannot cross file systems), created exclusively with `mode`, synced, then renamed over the
 * target. Readers see the old file or the new one, never half of one; the temporary file is
 * removed on every failure path. A symlinked target is written through to the file it points at.
 */
export function writeFileAtomic(path: string, text: string, options: { mode: number }): void {
  const target = existsSync(path) ? realpathSync(path) : resolve(path);
  const temporary = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  let descriptor: number | undefined;
  try {
    descriptor = openSync(temporary, 'wx', options.mode);
    // The creation mode is filtered by the umask; set it exactly.
    fchmodSync(descriptor, options.mode);
    writeSync(descriptor, text);
    fsyncSync(descriptor);
    closeSync(descriptor);
    descriptor = undefined;
    renameSync(temporary, target);
  } catch (error) {
    if (descriptor !== undefined) closeSync(descriptor);
    try {
      unlinkSync(temporary);
    } catch {
      // Already renamed or never created.
    }
    throw error;
  }
}

/** Mode of the tokens file: readable by its owner only. */
export const tokensFileMode = 0o600;

/**
 * Sets `name=value` in the tokens file, keeping every other line and comment as it was: an
 * existing line for `name` is replaced in place, otherwise the line is appended. The file is
 * replaced atomically with mode 0600.
 */
export function writeToken(options: { path: string; name: string; value: string }): void {
  const previous = existsSync(options.path) ? readFileSync(options.path, 'utf8') : '';
  const lines = previous === '' ? [] : previous.replace(/\r?\n$/, '').split(/\r?\n/);
  const entry = `${options.name}=${options.value}`;
  let replaced = false;
  const next = lines.flatMap((line) => {
    const match = linePattern.exec(line.trim());
    if (line.trim().startsWith('#') || match?.[1] !== options.name) return [line];
    if (replaced) return [];
    replaced = true;
    return [entry];
  });
  if (!replaced) next.push(entry);
  writeFileAtomic(options.path, `${next.join('\n')}\n`, { mode: tokensFileMode });
}
