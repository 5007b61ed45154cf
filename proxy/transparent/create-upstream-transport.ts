import type { IOType } from 'node:child_process';
import type { Client, ClientOptions, PriorDiscovery, Transport } from '@modelcontextprotocol/client';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { fetchWithoutRedirects } from '../downstream/downstream';
import { versionNegotiationFor } from '../downstream/protocol-setting';
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

/** How the proxy's client negotiates with the upstream: its `protocol` setting, default `auto`. */
export function upstreamNegotiation(upstream: UpstreamConfig): Pick<ClientOptions, 'versionNegotiation'> {
  return { versionNegotiation: versionNegotiationFor(upstream.protocol ?? 'auto') };
}

/**
 * What `auto` found per upstream, for this process: the next connection adopts it instead of
 * probing again (over stdio a probe is a sibling process). A connection that fails forgets it.
 */
const verdicts = new Map<string, PriorDiscovery>();

/**
 * Connects `client` (made with {@link upstreamNegotiation}) to the upstream over `transport`. On
 * a 2026-07-28 connection, which gets no unsolicited notifications, it opens the listen stream
 * for the list changes the upstream declares, so they reach the client's notification handlers
 * as a 2025 upstream's would.
 */
export async function connectUpstream(client: Client, upstream: UpstreamConfig, transport: Transport): Promise<void> {
  const key = JSON.stringify(upstream);
  const prior = (upstream.protocol ?? 'auto') === 'auto' ? verdicts.get(key) : undefined;
  try {
    await client.connect(transport, prior === undefined ? undefined : { prior });
  } catch (error) {
    verdicts.delete(key);
    throw error;
  }
  const discover = client.getDiscoverResult();
  if ((upstream.protocol ?? 'auto') === 'auto')
    verdicts.set(key, discover ? { kind: 'modern', discover } : { kind: 'legacy' });
  if (client.getProtocolEra() !== 'modern') return;
  const offered = client.getServerCapabilities() ?? {};
  const filter = {
    ...(offered.tools?.listChanged === true && { toolsListChanged: true }),
    ...(offered.prompts?.listChanged === true && { promptsListChanged: true }),
    ...(offered.resources?.listChanged === true && { resourcesListChanged: true }),
  };
  if (Object.keys(filter).length > 0) await client.listen(filter);
}
