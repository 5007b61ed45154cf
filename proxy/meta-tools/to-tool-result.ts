import type { CallToolResult } from '@modelcontextprotocol/server';
import { ProxyError } from '../errors';

/** Where a face reports a fault it hid from its caller; by default the process's stderr (stdout may be MCP). */
export type FaultLog = (what: string, error: unknown) => void;

export const stderrFaultLog: FaultLog = (what, error) => {
  process.stderr.write(
    `[extensible-mcp] ${what}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
};

/**
 * The search-mode face's one error translator: a {@link ProxyError} carries a message written
 * for the model; anything else is unexpected, so its cause goes to `log` and the caller gets a
 * clear message that shows nothing of it (it may hold paths or secrets).
 */
export function toToolResult(error: unknown, what: string, log: FaultLog = stderrFaultLog): CallToolResult {
  if (ProxyError.isInstance(error)) return { content: [{ type: 'text', text: error.message }], isError: true };
  log(what, error);
  return { content: [{ type: 'text', text: 'The request failed unexpectedly; nothing was changed.' }], isError: true };
}
