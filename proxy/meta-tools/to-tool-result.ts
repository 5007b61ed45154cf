import type { CallToolResult } from '@modelcontextprotocol/server';
import { ProxyError } from '../errors';

/**
 * The search-mode face's one error translator: a {@link ProxyError} carries a message written
 * for the model; anything else is unexpected and is never shown raw (it may hold paths or secrets).
 */
export function toToolResult(error: unknown): CallToolResult {
  const text = ProxyError.isInstance(error) ? error.message : 'The request failed unexpectedly; nothing was changed.';
  return { content: [{ type: 'text', text }], isError: true };
}
