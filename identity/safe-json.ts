/**
 * Identity's one parser of untrusted JSON text: a JSON object, or `undefined` for anything else
 * (not JSON, an array, a primitive). Callers refuse on `undefined`; nothing throws.
 */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isRecord(value) ? value : undefined;
  } catch {
    // Not JSON: the caller refuses the input.
    return undefined;
  }
}

/** A plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The JSON object in a base64url segment (a JWS header or payload), or `undefined`. */
export function decodeSegment(segment: string): Record<string, unknown> | undefined {
  return parseJsonObject(Buffer.from(segment, 'base64url').toString('utf8'));
}
