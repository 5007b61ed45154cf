import type { IOType } from 'node:child_process';
import type { Transport } from '@modelcontextprotocol/client';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { fetchWithoutRedirects } from '../downstream/downstream';
import type { UpstreamConfig } from './transparent-config';

/** Options for {@link createUpstreamTransport}. */
export interface UpstreamTransportOptions {
  /** What happens to a stdio child's stderr: shown on ours (`inherit`, the default) or dropped (`ignore`). */
  readonly stderr?: IOType;
}

/**
 * The client transport for the configured upstream: a stdio child (its `env` block on top of the
 * SDK's safe default environment) or Streamable HTTP that never follows a redirect.
 */
export function createUpstreamTransport(upstream: UpstreamConfig, options: UpstreamTransportOptions = {}): Transport {
  if (upstream.kind === 'stdio') {
    return new StdioClientTransport({
      command: upstream.command,
      args: [...upstream.args],
      env: { ...upstream.env },
      stderr: options.stderr ?? 'inherit',
    });
  }
  // A redirect could carry the session (and any credential) to another host: refuse it (SPEC §3.2).
  return new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: fetchWithoutRedirects });
}

/** A short human description of the upstream for logs and errors (never includes env values). */
export function describeUpstream(upstream: UpstreamConfig): string {
  return upstream.kind === 'stdio'
    ? `command ${[upstream.command, ...upstream.args].join(' ')}`
    : `URL ${upstream.url}`;
}
