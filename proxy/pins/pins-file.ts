import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ProxyError } from '../errors';
import { safeJsonParse } from '../policy/safe-json';
import type { PinStore, ToolPin } from './types';

/** A SHA-256 as `pins list --json` prints it: 64 lowercase hex digits. */
const hashSchema = z.string().regex(/^[0-9a-f]{64}$/, 'expected a SHA-256 as 64 lowercase hex digits');

const pinsFileSchema = z.strictObject({
  servers: z.record(z.string().min(1), z.record(z.string().min(1), hashSchema)),
});

/** A config's `pins` file (docs/pinning.md): the hash of each tool's canonical definition, by server and tool. */
export type PinsFile = z.infer<typeof pinsFileSchema>;

/** Reads and validates a `pins` file; a file that cannot be read or is malformed is a config error naming the path. */
export function readPinsFile(path: string): PinsFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ProxyError('config-invalid', `${path}: the pins file cannot be read.`, { cause: error });
  }
  const parsed = safeJsonParse(text);
  if (!parsed.ok) throw new ProxyError('config-invalid', `${path}: the pins file is not valid JSON.`);
  const checked = pinsFileSchema.safeParse(parsed.value);
  if (!checked.success) {
    const lines = checked.error.issues.map(
      (issue) => `  ${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`,
    );
    throw new ProxyError('config-invalid', `${path}: invalid pins file:\n${lines.join('\n')}`);
  }
  return checked.data;
}

/** What {@link seedPins} did, by server name. */
export interface SeedReport {
  /** Servers whose pins the file fixed now: the store did not know them. */
  readonly seeded: readonly string[];
  /** Servers the store already knew: their pins in the store stand, the file's are not applied. */
  readonly known: readonly string[];
}

/**
 * Fixes a `pins` file's hashes ahead of first use: each server the store does not know yet gets
 * the file's hashes as its first pins (hash only, source `pins-file`), so its first listing is
 * checked against them like any later one (a differing hash or a name the file does not hold is
 * held). A server the store already knows keeps its pins: the file is for first use only.
 */
export async function seedPins(
  store: Pick<PinStore, 'pinFirst'>,
  file: PinsFile,
  options: { readonly now?: () => number } = {},
): Promise<SeedReport> {
  const pinnedAt = (options.now ?? Date.now)();
  const seeded: string[] = [];
  const known: string[] = [];
  for (const [server, tools] of Object.entries(file.servers)) {
    const pins = Object.entries(tools).map(
      ([tool, hash]): ToolPin => ({ server, tool, hash, source: 'pins-file', pinnedAt }),
    );
    ((await store.pinFirst(server, pins)) ? seeded : known).push(server);
  }
  return { seeded, known };
}
