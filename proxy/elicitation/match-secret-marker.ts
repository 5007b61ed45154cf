/** The parts of a tool-schema field that can reveal a secret. */
export interface FieldDescription {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly format?: string;
}

/** Which markers to look for where (SPEC §3.10, `policies.sensitive_required`). */
export interface SecretMarkers {
  /** Matched against the field name. */
  readonly nameMarkers: readonly string[];
  /** Matched against title, description and format. */
  readonly schemaMarkers: readonly string[];
}

// A marker right after one of these words, or right before one of the next set, names a
// quantity, not a secret: `max_tokens`, `num_tokens`, `token_count`, `token_limit`.
const QUANTITY_BEFORE = new Set(['max', 'min', 'maximum', 'minimum', 'num', 'total', 'n']);
const QUANTITY_AFTER = new Set(['count', 'counts', 'limit', 'limits', 'budget', 'length', 'size', 'usage', 'total']);
// In prose, "tokens" nearly always means model tokens ("upper bound on tokens per reply"), not secrets.
const PROSE_PLURAL_EXEMPT = new Set(['token']);

/** Splits snake_case, kebab-case, camelCase, PascalCase and prose into lower-case words. */
export function splitWords(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
}

function wordsMatchAt(words: readonly string[], marker: readonly string[], start: number, prose: boolean): boolean {
  for (let index = 0; index < marker.length; index += 1) {
    const word = words[start + index];
    const expected = marker[index];
    if (word === undefined || expected === undefined) return false;
    // The last marker word also matches its plural (`credentials`, `secrets`).
    const pluralAllowed = index === marker.length - 1 && !(prose && PROSE_PLURAL_EXEMPT.has(expected));
    if (word !== expected && !(pluralAllowed && word === `${expected}s`)) return false;
  }
  return true;
}

function textMatches(text: string, markers: readonly string[], prose: boolean): string | undefined {
  const words = splitWords(text);
  for (const marker of markers) {
    const markerWords = splitWords(marker);
    if (markerWords.length === 0) continue;
    for (let start = 0; start + markerWords.length <= words.length; start += 1) {
      if (!wordsMatchAt(words, markerWords, start, prose)) continue;
      const before = words[start - 1];
      const after = words[start + markerWords.length];
      if ((before !== undefined && QUANTITY_BEFORE.has(before)) || (after !== undefined && QUANTITY_AFTER.has(after))) {
        continue;
      }
      return marker;
    }
  }
  return undefined;
}

/**
 * Returns the secret marker a field matches, or `undefined`. Markers match whole words of the
 * split name (so `api_key`, `apiKey` and `x-api-key` match `api_key`, while `max_tokens`,
 * `token_count` and `keyboard` match nothing).
 */
export function matchSecretMarker(field: FieldDescription, markers: SecretMarkers): string | undefined {
  const byName = textMatches(field.name, markers.nameMarkers, false);
  if (byName !== undefined) return byName;
  for (const text of [field.title, field.description, field.format]) {
    if (text === undefined) continue;
    const bySchema = textMatches(text, markers.schemaMarkers, true);
    if (bySchema !== undefined) return bySchema;
  }
  return undefined;
}
