/**
 * Whether a required argument counts as not supplied (SPEC §3.10): absent, null, a blank
 * string, an empty list or an empty object. `false` and `0` are present values.
 */
export function isMissing(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value === 'string') return value.trim() === '';
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}
