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
// quantity, a setting or a place, not a secret: `max_tokens`, `token_count`, `token_limit`,
// `cookies_enabled`, `password_policy`, `token_type`, `token_url`.
const QUANTITY_BEFORE = new Set(['max', 'min', 'maximum', 'minimum', 'num', 'total', 'n']);
const NOT_SECRET_AFTER = new Set([
  ...['count', 'counts', 'limit', 'limits', 'budget', 'length', 'size', 'usage', 'total'],
  ...['enabled', 'disabled', 'enable', 'disable', 'allowed', 'required', 'policy', 'type'],
  ...['expiry', 'expires', 'expiration', 'ttl', 'lifetime', 'url', 'uri', 'endpoint'],
]);
// In prose, "tokens" nearly always means model tokens ("upper bound on tokens per reply"), not
// secrets; "personal access tokens" (a multi-word marker) still matches.
const PROSE_PLURAL_EXEMPT = new Set(['token']);
// Short or everyday words that name a secret as a field name (`pin`, `cookie`) but mostly mean
// something else in prose ("pin the message", "accepts cookies", "requires authorization").
// They are matched against names only.
const NAME_ONLY = new Set(['pin', 'pwd', 'cookie', 'bearer', 'authorization']);

// Cyrillic and Greek letters that look like Latin ones and survive NFKC (a small skeleton in the
// spirit of Unicode TR39): `pаssword` with U+0430 must read as `password`.
// Each group lists look-alikes, then the Latin letters they read as, position by position.
const LOOK_ALIKES: readonly (readonly [string, string])[] = [
  ['авекмнорстухѕіјһԁԛԝӏь', 'abekmhopctyxsijhdqwlb'], // Cyrillic lower case
  ['АВЕКМНОРСТУХЅІЈҺԀԚԜӀ', 'ABEKMHOPCTYXSIJHDQWI'], // Cyrillic upper case
  ['αβγεικνορτυχϲϳ', 'abyeikvoptuxcj'], // Greek lower case
  ['ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹ', 'ABEZHIKMNOPTYXC'], // Greek upper case
  ['ıȷſɡ', 'ijsg'], // Latin letters NFKC keeps
];
const SKELETON: ReadonlyMap<string, string> = new Map(
  LOOK_ALIKES.flatMap(([from, to]) =>
    [...from].map((character, index): [string, string] => [character, to[index] ?? character]),
  ),
);

/**
 * Folds look-alikes into ASCII before words are split: NFKC (full-width, mathematical and
 * ligature forms), then combining marks and invisible format characters (zero-width spaces,
 * soft hyphens) dropped, then the Cyrillic/Greek skeleton above.
 */
export function foldConfusables(text: string): string {
  return text
    .normalize('NFKC')
    .normalize('NFD')
    .replace(/[\p{Mn}\p{Cf}]/gu, '')
    .replace(/[^\p{ASCII}]/gu, (character) => SKELETON.get(character) ?? character);
}

/** Splits snake_case, kebab-case, camelCase, PascalCase and prose into lower-case words. */
export function splitWords(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
}

/** The words matching looks at: look-alikes folded, digits as separators (`password1`, `pass2word`). */
function wordsOf(text: string): string[] {
  return splitWords(foldConfusables(text)).flatMap((word) => word.split(/[0-9]+/).filter((part) => part !== ''));
}

function textMatches(text: string, markers: readonly string[], prose: boolean): string | undefined {
  const words = wordsOf(text);
  for (const marker of markers) {
    const markerWords = wordsOf(marker);
    if (markerWords.length === 0) continue;
    const joined = markerWords.join('');
    if (prose && NAME_ONLY.has(joined)) continue;
    // The last marker word also matches its plural (`credentials`, `secrets`).
    const pluralAllowed = !(prose && markerWords.length === 1 && PROSE_PLURAL_EXEMPT.has(joined));
    // Runs of whole words are compared joined, so separators never matter: `pass_word`,
    // `passWord` and `password` all read `password`; `api_key` matches `apiKey` and `apikey`.
    for (let start = 0; start < words.length; start += 1) {
      let run = '';
      for (let end = start; end < words.length && run.length <= joined.length; end += 1) {
        run += words[end];
        if (run !== joined && !(pluralAllowed && run === `${joined}s`)) continue;
        const before = words[start - 1];
        const after = words[end + 1];
        if (
          (before !== undefined && QUANTITY_BEFORE.has(before)) ||
          (after !== undefined && NOT_SECRET_AFTER.has(after))
        )
          continue;
        return marker;
      }
    }
  }
  return undefined;
}

/**
 * Returns the secret marker a field matches, or `undefined`. Text is normalised first (Unicode
 * look-alikes folded, case, separators and digits ignored), then markers match runs of whole
 * words: `api_key`, `apiKey` and `x-api-key` match `api_key`, `pаssword` (Cyrillic а) and
 * `password1` match `password`, while `max_tokens`, `token_count`, `keyboard` and `spinner`
 * match nothing. Names, titles, descriptions and formats are all checked.
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
