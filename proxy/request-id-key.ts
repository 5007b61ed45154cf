import type { RequestId } from '@modelcontextprotocol/server';

/**
 * A map or set key for a JSON-RPC id. `1` and `"1"` are different ids (JSON-RPC 2.0 §4), so a
 * number and a string that print alike must never share a key.
 */
export function requestIdKey(id: RequestId): string {
  return `${typeof id}:${id}`;
}
