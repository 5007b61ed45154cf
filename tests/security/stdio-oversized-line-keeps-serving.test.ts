/**
 * Issue 11 item 7: one 11 MB JSON-RPC line used to end the stdio proxy (exit code 0, no error).
 * The oversized message gets a JSON-RPC error naming the limit, carrying the request's id, and
 * the proxy goes on answering.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type CliProcess, initialize, startCli, writeCliConfig } from './fixtures/cli-process';

let cli: CliProcess | undefined;
afterEach(() => {
  cli?.child.kill('SIGKILL');
  cli = undefined;
});

describe('stdio proxy and an oversized JSON-RPC line', () => {
  it('answers the 11 MB request with an error and keeps serving', async () => {
    cli = startCli(writeCliConfig({ mcpServers: {} }));
    const init = await initialize(cli);
    expect(init.result).toBeDefined();

    // An SDK client serialises the id after the params: the proxy must still find it.
    const huge = {
      jsonrpc: '2.0',
      method: 'tools/call',
      params: { name: 'search_tools', arguments: { query: 'x'.repeat(11 * 1024 * 1024) } },
      id: 2,
    };
    cli.write(JSON.stringify(huge));
    const list = await cli.request(3, 'tools/list');

    const refused = await cli.next((message) => message.id === 2);
    expect(refused.error?.message).toMatch(/larger than \d+ bytes/);
    expect(list.error).toBeUndefined();
    expect(list.result?.tools).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'search_tools' })]));
    expect(cli.child.exitCode).toBeNull();
  });

  it('answers a line that is not JSON with a parse error and keeps serving', async () => {
    cli = startCli(writeCliConfig({ mcpServers: {} }));
    await initialize(cli);
    cli.write('{"jsonrpc":"2.0","id":2,"method":');
    const refused = await cli.next((message) => message.error !== undefined);
    expect(refused).toMatchObject({ id: null, error: { code: -32700 } });
    const list = await cli.request(3, 'tools/list');
    expect(list.result?.tools).toBeDefined();
  });
});
