import type { VersionNegotiationOptions } from '@modelcontextprotocol/client';
import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { ProxyError } from '../errors';
import type { DownstreamProtocol } from '../gateway/types';

/** The values a server's `protocol` setting may take, in the order messages list them. */
export const DOWNSTREAM_PROTOCOLS = [
  '2026-07-28',
  '2025-11-25',
  'auto',
] as const satisfies readonly DownstreamProtocol[];

/** A pinned version: `auto` speaks whichever version the server offers, so a failure there is never about the setting. */
export type PinnedProtocol = Exclude<DownstreamProtocol, 'auto'>;

/**
 * How the SDK's client negotiates for a setting: `auto` probes with `server/discover` and falls
 * back to the 2025 handshake; `2026-07-28` is the SDK's pin (no fallback); `2025-11-25` is the
 * plain 2025 `initialize` handshake, with no probe (the server answers 2025-11-25 or the earlier
 * 2025 revision it speaks).
 */
export function versionNegotiationFor(protocol: DownstreamProtocol): VersionNegotiationOptions {
  switch (protocol) {
    case 'auto':
      return { mode: 'auto' };
    case '2026-07-28':
      return { mode: { pin: '2026-07-28' } };
    case '2025-11-25':
      return { mode: 'legacy' };
  }
}

/**
 * What the SDK wrapped in its probe failure: our own fetch refuses a redirect, a rejected
 * credential or a private address by throwing a {@link ProxyError}, which the probe reports as
 * `EraNegotiationFailed` with that error as its cause. That refusal is the story, not the era.
 */
export function unwrapProbeFailure(error: unknown): unknown {
  if (
    error instanceof SdkError &&
    error.code === SdkErrorCode.EraNegotiationFailed &&
    ProxyError.isInstance(error.cause)
  )
    return error.cause;
  return error;
}

/** Whether a server answered that it does not speak the protocol version it was asked for (-32022). */
function refusedVersion(error: unknown): boolean {
  if (error instanceof ProtocolError) return error.code === ProtocolErrorCode.UnsupportedProtocolVersion;
  // Over HTTP a 2026-only server refuses the 2025 handshake with HTTP 400 and the -32022 body.
  return error instanceof SdkHttpError && /-32022|unsupported protocol version/i.test(error.message);
}

/**
 * Whether a failed connect says the server does not speak `protocol` (as opposed to being down,
 * refusing a credential, …): a pin to 2026-07-28 that the server's `server/discover` did not offer
 * (or that it did not answer), or a 2025 handshake the server refused as an unsupported version.
 */
export function isProtocolMismatch(protocol: PinnedProtocol, error: unknown): boolean {
  if (protocol === '2026-07-28') {
    return (
      error instanceof SdkError &&
      error.code === SdkErrorCode.EraNegotiationFailed &&
      !ProxyError.isInstance(error.cause)
    );
  }
  return refusedVersion(error);
}

/**
 * The error for a server that does not speak the version its config pins (issue 31): it names the
 * setting, since a pinned version never falls back, and what to set instead.
 */
export function protocolMismatch(server: string, protocol: PinnedProtocol, error: unknown): ProxyError {
  const other = protocol === '2026-07-28' ? '2025-11-25' : '2026-07-28';
  return new ProxyError(
    'protocol-mismatch',
    `Server "${server}" does not speak MCP ${protocol}, which its configuration pins ("protocol": "${protocol}"); a pinned version never falls back. Set "protocol" to "auto" (or "${other}") to connect to it.`,
    { cause: error },
  );
}
