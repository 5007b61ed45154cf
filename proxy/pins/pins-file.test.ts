import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readPinsFile, seedPins } from './pins-file';
import { openSqlitePinStore } from './sqlite-pin-store';

const hash = 'a'.repeat(64);

function file(content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'emcp-pins-file-')), 'pins.json');
  writeFileSync(path, content);
  return path;
}

describe('the pins file', () => {
  it('reads servers, tools and hashes', () => {
    expect(readPinsFile(file(JSON.stringify({ servers: { shop: { order: hash } } })))).toEqual({
      servers: { shop: { order: hash } },
    });
  });

  it('refuses a malformed file as a config error naming the path and the member', () => {
    const path = file(JSON.stringify({ servers: { shop: { order: 'ABC' } } }));
    expect(() => readPinsFile(path)).toThrow(
      expect.objectContaining({ code: 'config-invalid', message: expect.stringContaining('servers.shop.order') }),
    );
    expect(() => readPinsFile(file('{not json'))).toThrow(/not valid JSON/);
    expect(() => readPinsFile(file(JSON.stringify({ shop: {} })))).toThrow(/invalid pins file/);
  });

  it('fixes the hashes of servers the store does not know, and keeps the pins of those it does', async () => {
    const store = openSqlitePinStore({ path: ':memory:' });
    await store.pinFirst('known', []);
    const report = await seedPins(
      store,
      { servers: { shop: { order: hash }, known: { other: hash } } },
      { now: () => 5 },
    );
    expect(report).toEqual({ seeded: ['shop'], known: ['known'] });
    expect(await store.pin('shop', 'order')).toEqual({
      server: 'shop',
      tool: 'order',
      hash,
      source: 'pins-file',
      pinnedAt: 5,
    });
    expect((await store.read('shop')).known).toBe(true);
    expect(await store.pin('known', 'other')).toBeUndefined();
    await store.close();
  });
});
