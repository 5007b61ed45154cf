import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqlitePinStore } from '../pins/sqlite-pin-store';
import { readProxyEnv } from './env';
import { runPins } from './run-pins';

function folderWithConfig(): { folder: string; config: string } {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-run-pins-'));
  const config = join(folder, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: {} }));
  return { folder, config };
}

async function run(argv: readonly string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runPins({
    argv,
    env: readProxyEnv({}),
    io: { out: (line) => out.push(line), err: (line) => err.push(line) },
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('extensible-mcp pins', () => {
  it('refuses bad usage with exit code 2', async () => {
    const { config } = folderWithConfig();
    for (const argv of [
      [],
      ['approve', 'shop'],
      ['accept', 'shop'],
      ['accept', 'shop', 'order', '--all'],
      ['diff'],
      ['list', 'shop'],
      ['diff', 'shop', '--json'],
    ]) {
      expect((await run([...argv, '--config', config])).code, argv.join(' ')).toBe(2);
    }
  });

  it('never creates a store, and refuses a memory: one', async () => {
    const { config } = folderWithConfig();
    const missing = await run(['list', '--config', config]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/no store at .*proxy\.sqlite/);
    const memory = await run(['list', '--config', config, '--store', 'memory:']);
    expect(memory.code).toBe(2);
    expect(memory.err).toMatch(/memory: store lives inside its proxy process only/);
  });

  it('shows a held definition with terminal controls escaped, and says when nothing is pending (exit 1)', async () => {
    const { folder, config } = folderWithConfig();
    const store = openSqlitePinStore({ path: join(folder, 'proxy.sqlite') });
    await store.pinFirst('shop', []);
    await store.hold('shop', [
      {
        tool: 'order',
        reason: 'new',
        diff: [],
        hashes: { listed: 'b'.repeat(64) },
        definition: JSON.stringify({ name: 'order', description: 'Orders\u001b[2J\u202e now' }),
      },
    ]);
    await store.close();
    const diff = await run(['diff', 'shop', '--config', config]);
    expect(diff.code).toBe(0);
    expect(diff.out).toContain('shop order: new name, no pin');
    expect(diff.out).toContain('Orders\\u001b[2J\\u202e now');
    expect(diff.out.includes('\u001b') || diff.out.includes('\u202e')).toBe(false);
    expect((await run(['diff', 'shop', 'other', '--config', config])).code).toBe(1);
    expect((await run(['reject', 'billing', '--config', config])).code).toBe(1);
    const rejected = await run(['reject', 'shop', 'order', '--config', config]);
    expect(rejected.code).toBe(0);
    expect(rejected.out).toContain(`rejected shop order (${'b'.repeat(64)})`);
    expect(rejected.out).toMatch(/no running proxy signalled/);
    expect((await run(['list', '--config', config])).out).toBe(`shop order rejected listed ${'b'.repeat(12)}`);
  });
});
