import { writeFile } from 'node:fs/promises';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv } from '../credentials/cli-run';
import { cleanupStack } from '../gateway/support';
import { callTool, searchNames } from '../proxy/helpers';
import { ASKING_SERVER, startStdioProxy, TRANSPARENT_BIN, watchedText, writeTemporary } from './cli-process';

// SIGHUP reload, complete in both modes (issue 18): change a server's command and a filter, send
// SIGHUP, and the next call uses both; a broken config leaves the old one running with a clear log line.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const SEARCH_BIN = 'bin/extensible-mcp.mjs';

function allText(result: unknown): string {
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return '';
  return content.map((block: { type?: string; text?: string }) => (block.type === 'text' ? block.text : '')).join('\n');
}

/** A real SDK client running the CLI as its stdio child, with the child's stderr watched. */
async function run(args: string[]) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    env: cliEnv(),
    stderr: 'pipe',
  });
  const stderr = transport.stderr;
  if (stderr === null) throw new Error('no stderr');
  const log = watchedText(stderr);
  const client = new Client({ name: 'reload-test', version: '1.0.0' });
  await client.connect(transport);
  cleanups.push(() => client.close());
  const pid = transport.pid;
  if (pid === null) throw new Error('no pid');
  return { client, log, hangUp: () => process.kill(pid, 'SIGHUP') };
}

const asking = (label: string) => ['--import', 'tsx', ASKING_SERVER, label];
/** A transparent-mode config whose upstream is the asking server labelled `label`. */
const yaml = (label: string, policy = '') =>
  `upstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: ${JSON.stringify(asking(label))}\n${policy}`;
/** The reloaded config: another upstream command, and `note` required of `whoami`. */
const requiringNote = 'tools:\n  whoami:\n    required: [note]\n';

describe('SIGHUP in transparent mode', () => {
  it('re-points the upstream and applies the new policy; a broken config keeps the running one', async () => {
    const path = await writeTemporary('config.yaml', yaml('first'));
    const { client, log, hangUp } = await run([TRANSPARENT_BIN, '--config', path]);
    await client.listTools();
    const before = allText(await client.callTool({ name: 'whoami', arguments: {} }));
    expect(before).toMatch(/^first pid=\d+/);

    await writeFile(path, yaml('second', requiringNote));
    hangUp();
    await log.waitFor(/reloaded: serving command/);
    // The new policy: note is now required, and this client cannot show a form.
    const blocked = await client.callTool({ name: 'whoami', arguments: {} });
    expect(blocked.structuredContent).toMatchObject({
      reason: 'elicitation_unsupported',
      missing_or_ambiguous: ['note'],
    });
    // The new command: another process, started with the new arguments.
    const after = allText(await client.callTool({ name: 'whoami', arguments: { note: 'n' } }));
    expect(after).toMatch(/^second pid=\d+ note=n$/);
    expect(after.match(/pid=(\d+)/)?.[1]).not.toBe(before.match(/pid=(\d+)/)?.[1]);

    await writeFile(path, 'upstream: [not yaml\n');
    hangUp();
    await log.waitFor(/reload failed, still running the previous config: .*invalid YAML/);
    expect(allText(await client.callTool({ name: 'whoami', arguments: { note: 'still' } }))).toMatch(
      /^second pid=\d+ note=still$/,
    );
  });

  it('a 2026-07-28 client over stdio: its listen stream hears the reload, and its next request uses the new config', async () => {
    const path = await writeTemporary('config.yaml', yaml('first'));
    const proxy = startStdioProxy(path);
    cleanups.push(() => proxy.child.kill('SIGKILL'));
    const client = new Client(
      { name: 'reload-test-2026', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(proxy.transport);
    cleanups.push(() => client.close());
    expect(client.getProtocolEra()).toBe('modern');
    expect(allText(await client.callTool({ name: 'whoami', arguments: {} }))).toMatch(/^first pid=\d+/);
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler('notifications/tools/list_changed', () => resolve());
    });
    const subscription = await client.listen({ toolsListChanged: true });
    cleanups.push(() => subscription.close());
    expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true });

    await writeFile(path, yaml('second', requiringNote));
    proxy.child.kill('SIGHUP');
    await changed;
    expect(allText(await client.callTool({ name: 'whoami', arguments: { note: 'n' } }))).toMatch(
      /^second pid=\d+ note=n$/,
    );
    const blocked = await client.callTool({ name: 'whoami', arguments: {} });
    expect(blocked.structuredContent).toMatchObject({
      reason: 'elicitation_unsupported',
      missing_or_ambiguous: ['note'],
    });
  });
});

describe('SIGHUP in search mode', () => {
  it('re-points a server and rebuilds the filters; a broken config keeps the running one', async () => {
    const config = (label: string, filters: Record<string, unknown> = {}) =>
      `${JSON.stringify({ mcpServers: { fx: { command: process.execPath, args: asking(label) } }, filters }, null, 2)}\n`;
    const path = await writeTemporary('config.json', config('first'));
    const { client, log, hangUp } = await run([SEARCH_BIN, '--config', path, '--offline']);
    await log.waitFor(/connected 1 of 1 servers/);
    expect(await searchNames(client, 'which server process answered', 10)).toContain('fx__whoami');
    expect(allText(await callTool(client, 'fx__whoami'))).toMatch(/^first pid=/);
    expect(await searchNames(client, 'connect a bank account', 10)).toContain('fx__connect_bank');

    await writeFile(path, config('second', { access_control: { deny: ['fx__connect_bank'] } }));
    hangUp();
    await log.waitFor(/reloaded: filters rebuilt; 0 added, 1 re-pointed, 0 removed, 0 failed/);
    // The re-pointed server is indexed again; a search finds it, and the call reaches the new command.
    expect(await searchNames(client, 'which server process answered', 10)).toContain('fx__whoami');
    expect(allText(await callTool(client, 'fx__whoami'))).toMatch(/^second pid=/);
    // The new filter: connect_bank is now denied, and no longer found.
    const denied = await callTool(client, 'fx__connect_bank');
    expect(denied.isError).toBe(true);
    expect(allText(denied)).toMatch(/access control/);
    expect(await searchNames(client, 'connect a bank account', 10)).not.toContain('fx__connect_bank');

    await writeFile(path, '{"mcpServers": ');
    hangUp();
    await log.waitFor(/reload failed, still running the previous config: /);
    expect(allText(await callTool(client, 'fx__whoami'))).toMatch(/^second pid=/);
  });
});
