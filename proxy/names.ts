import { ProxyError } from './errors';

/** Separator between a server name and a tool name in a qualified tool name. */
export const nameSeparator = '__';

/** A server or local-tool name: no separator, no blanks, no control characters, bounded. */
const namePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Why a server or local tool name is unacceptable, or `undefined` when it is fine. */
export function nameProblem(name: string): string | undefined {
  if (name.includes(nameSeparator))
    return `"${name}" contains "${nameSeparator}", which is reserved as the server/tool separator`;
  if (!namePattern.test(name))
    return `"${name}" must be 1-64 characters of letters, digits, "_", "-" or ".", starting with a letter or digit`;
  return undefined;
}

/** Throws a `ProxyError('invalid-name')` unless `name` can name a server or local tool. */
export function assertValidName(name: string, what: string): void {
  const problem = nameProblem(name);
  if (problem) throw new ProxyError('invalid-name', `Invalid ${what} name: ${problem}.`);
}

/** `{server}__{tool}`. */
export function qualifyName(server: string, tool: string): string {
  return `${server}${nameSeparator}${tool}`;
}

/**
 * A downstream's tool name: 1-128 letters, digits, `_`, `-`, `.` or `/` (the MCP naming guidance,
 * plus `/` which servers use for grouping). No blanks, control characters or empty names reach
 * the index or a log. A leading `_` is refused because `{server}__{tool}` would then be ambiguous:
 * server `a` tool `_b` and server `a_` tool `b` would both become `a___b`.
 */
const toolNamePattern = /^[A-Za-z0-9.\-/][A-Za-z0-9_.\-/]{0,127}$/;

/** Why a downstream tool name cannot be indexed, or `undefined` when it can. */
export function toolNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || name === '') return 'it is empty';
  if (name.startsWith('_')) return `it starts with "_", which would make "{server}${nameSeparator}{tool}" ambiguous`;
  if (!toolNamePattern.test(name)) return 'it must be 1-128 characters of letters, digits, "_", "-", "." or "/"';
  return undefined;
}
