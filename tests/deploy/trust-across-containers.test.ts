import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readHouseholdEnv } from '../../lib/env';
import type { HouseholdEvent } from '../../lib/events';
import { type HouseholdRuntime, startHouseholdRuntime } from '../../lib/runtime';
import { freePort } from '../e2e/support/app-server';
import { type ShopProcess, startShopProcess } from './shop-process';

// SPEC §8 as docker runs it (deploy/docker-compose.yml), without Docker: the household writes its
// public settlement DID to a file and finds no shop at its start; the shop, started afterwards
// with the deploy's own command (`deploy/steps.sh start-shop`), reads the DID from that file; the
// household reaches it over `PIZZA_URL` as soon as it answers and pins its merchant by itself.
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function folder(): Promise<string> {
  const path = await mkdtemp(join(tmpdir(), 'deploy-trust-'));
  cleanups.push(() => rm(path, { recursive: true, force: true }));
  return path;
}

function startShop(options: { port: number; dataDir: string; didFile: string }): ShopProcess {
  const shop = startShopProcess(options);
  cleanups.push(() => shop.stop());
  return shop;
}

describe('trust between the household and a shop in another container', () => {
  it('the household publishes its settlement DID, and pins a PIZZA_URL shop that comes up after it', async () => {
    const home = await folder();
    const port = await freePort();
    const didFile = join(home, 'settlement', 'settlement-did');
    const events: HouseholdEvent[] = [];
    let pinned: (event: HouseholdEvent) => void = () => {};
    const pinnedEvent = new Promise<HouseholdEvent>((resolve) => {
      pinned = resolve;
    });
    const runtime: HouseholdRuntime = await startHouseholdRuntime({
      env: readHouseholdEnv({
        EXTENSIBLE_MCP_DATA: join(home, 'household'),
        PIZZA_URL: `http://127.0.0.1:${port}/mcp`,
        EXTENSIBLE_MCP_SETTLEMENT_DID_FILE: didFile,
      }),
      embeddings: false,
      shopRetryMs: { first: 50, max: 400 },
      onEvent: (event) => {
        events.push(event);
        if (event.kind === 'merchant-pinned') pinned(event);
      },
    });
    cleanups.push(() => runtime.close());
    // No shop yet: nothing pinned, and the public DID (only that) is already published.
    expect(runtime.merchant).toBeUndefined();
    const published = await readFile(didFile, 'utf8');
    expect(published).toBe(`${runtime.identity.household.settlementDid}\n`);
    expect(published).toMatch(/^did:key:z6Mk[1-9A-HJ-NP-Za-km-z]+\n$/);

    const shop = startShop({ port, dataDir: join(home, 'shop'), didFile });
    const started = await shop.logged('server-started');
    expect(started.settlementDid).toBe(runtime.identity.household.settlementDid);
    await pinnedEvent;
    // The event is emitted inside the pin; the runtime records the pin in the microtasks after
    // it, all of which run before the next macrotask (no I/O in between).
    await new Promise((resolve) => setImmediate(resolve));
    expect(runtime.merchant?.did).toBe(started.did);
    const trusted = await runtime.identity.store.identity.merchants.list();
    expect(trusted.map((merchant) => merchant.did)).toEqual([started.did]);
  });

  it('the shop waits for a settlement DID file that is not there yet, and serves once it appears', async () => {
    const home = await folder();
    const port = await freePort();
    const didFile = join(home, 'settlement-did');
    const shop = startShop({ port, dataDir: join(home, 'shop'), didFile });
    await shop.logged('settlement-waiting');
    expect(shop.lines.some((line) => line.event === 'server-started')).toBe(false);
    const did = 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK';
    await writeFile(didFile, `${did}\n`);
    const started = await shop.logged('server-started');
    expect(started.settlementDid).toBe(did);
  });

  it('the shop refuses a settlement DID file that holds anything but an Ed25519 did:key, and does not serve', async () => {
    const home = await folder();
    const didFile = join(home, 'settlement-did');
    await writeFile(didFile, 'did:web:attacker.example\n');
    const shop = startShop({ port: await freePort(), dataDir: join(home, 'shop'), didFile });
    expect(await shop.exited).toBe(2);
    expect(shop.output()).toMatch(/SHOP_SETTLEMENT_DID_FILE: .* does not hold an Ed25519 did:key/);
    expect(shop.lines.some((line) => line.event === 'server-started')).toBe(false);
  });
});
