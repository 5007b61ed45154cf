import type { ClientOptions } from '@modelcontextprotocol/client';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import type { Gateway } from '../gateway/types';
import { createSearchModeServer, type SearchModeServerOptions } from './search-mode-server';

/** Options of {@link connectInMemory}: who the host's client is, and the scope it carries. */
export interface ConnectInMemoryOptions extends SearchModeServerOptions {
  readonly name?: string;
  /** Client capabilities to declare (e.g. `{ elicitation: { form: {} } }`). */
  readonly capabilities?: ClientOptions['capabilities'];
}

/**
 * An in-process host's face (the app's agent loop): a real MCP client linked to a new search-mode
 * session over in-memory transports. Everything it does goes through the gateway's pipelines.
 */
export async function connectInMemory(gateway: Gateway, options: ConnectInMemoryOptions): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await createSearchModeServer(gateway, {
    principal: options.principal,
    ...(options.scope !== undefined && { scope: options.scope }),
  }).connect(serverSide);
  const client = new Client(
    { name: options.name ?? 'in-process', version: '1.0.0' },
    options.capabilities ? { capabilities: options.capabilities } : undefined,
  );
  await client.connect(clientSide);
  return client;
}
