import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createGateway, type DownstreamSpec, openSqlitePinStore, type PinsFile } from '../proxy/index';

/** The name the household gives its shop's server: the pins file's only server. */
export const shopServerName = 'pizza';

/**
 * The pins file the demo ships for its shop (docs/pinning.md), found from the repository root as
 * the policy bundles are: the hash of every tool the shipped shop agent lists, so the shop's first
 * listing in a household is checked against it instead of being trusted on first use.
 */
export const shopPinsFile = resolve('shop-agent/pins.json');

/** The shipped shop agent as a stdio child on `dataDir`, told the settlement DID whose receipts ship orders. */
export function shippedShopSpec(options: {
  readonly dataDir: string;
  readonly settlementDid?: string;
}): DownstreamSpec {
  return {
    kind: 'stdio',
    command: process.execPath,
    args: ['--import', 'tsx', resolve('shop-agent/main.ts')],
    env: {
      SHOP_AGENT_DATA: options.dataDir,
      ...(options.settlementDid === undefined ? {} : { SHOP_SETTLEMENT_DID: options.settlementDid }),
    },
  };
}

/**
 * The pins file of the shipped shop agent, as `npm run pins:shop` writes it: the shop is started as
 * the household starts it (a stdio child, on a scratch data folder) behind a gateway with a pin
 * store of its own, and its first listing is pinned exactly as a household would pin it (the raw
 * definitions, canonical JSON, SHA-256). Its tools' definitions hold no per-run value (no key, DID
 * or URL), so every run, and every household, computes the same hashes.
 */
export async function generateShopPins(): Promise<PinsFile> {
  const dataDir = await mkdtemp(join(tmpdir(), 'shop-pins-'));
  const store = openSqlitePinStore({ path: ':memory:' });
  const gateway = createGateway({
    servers: { [shopServerName]: shippedShopSpec({ dataDir }) },
    pinStore: store,
    embeddings: false,
    // Quiet but for faults: the caller reports what was pinned.
    logger: { info: () => undefined, error: (message, error) => console.error(message, error ?? '') },
  });
  try {
    const started = await gateway.start();
    const failed = started.failed.find((server) => server.name === shopServerName);
    if (failed !== undefined) throw new Error(`the shop did not start: ${failed.reason}`);
    const tools: Record<string, string> = {};
    for (const status of await store.status(shopServerName)) {
      if (status.pinned !== undefined) tools[status.tool] = status.pinned;
    }
    return { servers: { [shopServerName]: tools } };
  } finally {
    await gateway.close();
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
