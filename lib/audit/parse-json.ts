/**
 * The audit module's one parser of untrusted JSON text (rows of a file a tamperer may have edited,
 * lines of the checkpoints file): the value, or `undefined` when the text is not JSON. Never throws.
 */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Not JSON: the caller refuses the row or line.
    return undefined;
  }
}
