import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { ProxyError } from '../errors';

/**
 * The one translator from upstream failures to the JSON-RPC error the downstream client sees.
 * An upstream protocol error passes through with its code and message (it is the upstream's
 * answer); our own errors keep their safe message; anything else is logged and made generic.
 */
export function toWireError(error: unknown, log: (line: string) => void): ProtocolError {
  if (error instanceof ProtocolError) return error;
  if (ProxyError.isInstance(error)) return new ProtocolError(ProtocolErrorCode.InternalError, error.message);
  log(`upstream request failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return new ProtocolError(
    ProtocolErrorCode.InternalError,
    'The upstream MCP server request failed; see the proxy log.',
  );
}
