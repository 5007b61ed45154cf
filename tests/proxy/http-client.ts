import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

/** A real SDK client connected to an MCP endpoint over Streamable HTTP. */
export async function connectHttpClient(url: string): Promise<Client> {
  const client = new Client({ name: 'http-test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}
