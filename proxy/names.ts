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
