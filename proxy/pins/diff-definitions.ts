import canonicalize from 'canonicalize';
import type { DefinitionChange } from './types';

/** The fields whose inside is worth naming: a schema change is shown down to the member that moved. */
const deepFields = new Set(['inputSchema', 'outputSchema']);

/** At most this many changes are named (the first by path): enough to see what moved, small enough for a log line. */
const maxChanges = 40;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One segment of a JSON pointer (RFC 6901): `~` and `/` escaped. */
function segment(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

function same(left: unknown, right: unknown): boolean {
  return canonicalize(left) === canonicalize(right);
}

/**
 * What differs between two tool definitions (docs/pinning.md): each top-level field that was
 * added, removed or changed, and inside `inputSchema` and `outputSchema` the JSON-pointer path of
 * each member that was (arrays such as `required` count as one value). Ordered by path; empty
 * when the definitions are the same. A definition that is not an object is one change at `""`.
 */
export function diffDefinitions(before: unknown, after: unknown): DefinitionChange[] {
  if (!isObject(before) || !isObject(after)) return same(before, after) ? [] : [{ path: '', change: 'changed' }];
  const changes: DefinitionChange[] = [];
  walk(before, after, '', true, changes);
  changes.sort((left, right) => (left.path < right.path ? -1 : left.path > right.path ? 1 : 0));
  return changes.slice(0, maxChanges);
}

function walk(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  at: string,
  top: boolean,
  changes: DefinitionChange[],
): void {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const key of keys) {
    const path = `${at}/${segment(key)}`;
    const had = Object.hasOwn(before, key);
    const has = Object.hasOwn(after, key);
    if (!had) changes.push({ path, change: 'added' });
    else if (!has) changes.push({ path, change: 'removed' });
    else if (!same(before[key], after[key])) {
      const left = before[key];
      const right = after[key];
      // Only schemas are walked into, and only where both sides are objects.
      if ((!top || deepFields.has(key)) && isObject(left) && isObject(right)) walk(left, right, path, false, changes);
      else changes.push({ path, change: 'changed' });
    }
  }
}
