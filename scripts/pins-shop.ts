/**
 * `npm run pins:shop`: writes `shop-agent/pins.json`, the hash of every tool the shipped shop agent
 * lists (docs/pinning.md). Run it as the upgrade step after changing the shop agent, review the
 * diff, and commit it: a household seeds its pin store from this file at start.
 */
import { writeFile } from 'node:fs/promises';
import { generateShopPins, shopPinsFile } from '../lib/shop-pins';

const pins = await generateShopPins();
await writeFile(shopPinsFile, `${JSON.stringify(pins, null, 2)}\n`);
const tools = Object.keys(pins.servers.pizza ?? {});
process.stdout.write(`shop-agent/pins.json: ${tools.length} tools pinned (${tools.join(', ')})\n`);
