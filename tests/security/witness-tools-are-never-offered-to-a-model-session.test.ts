import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { auditVerify } from './fixtures/audit-verify';
import { startHttpShop } from './fixtures/http-shop';

// Issue 26, defect 2: the shop's witness tools are operator-only and never offered to a model
// session. The household's operator code reaches them on the shop's own witness endpoint (`/witness`,
// or a `--witness` stdio child), never through the proxy; the proxy's `pizza` server is the shop's
// model-facing endpoint, which has no witness tool. A model session tries to find and call them.
const folders: string[] = [];
afterAll(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

function folder(prefix: string): string {
  const path = mkdtempSync(join(tmpdir(), prefix));
  folders.push(path);
  return path;
}

describe('the shop witness tools and a model session', () => {
  it('cannot be found or called through the household proxy, while the operator path witnesses every checkpoint', async () => {
    const dataDir = folder('witness-operator-only-');
    const household = await startTestHousehold({ dataDir, enrol: false });
    let head = 0;
    try {
      const { client, runtime } = household;
      const found = (await client.callTool({
        name: 'search_tools',
        arguments: { query: 'pizza shop menu invoice merchant card witness submit latest audit checkpoint', top_k: 50 },
      })) as CallToolResult;
      expect(textOf(found)).toContain('pizza__');
      expect(textOf(found)).not.toMatch(/witness_/);
      const checkpoint = {
        householdDid: runtime.identity.household.adminDid,
        rowId: 1,
        hash: '0'.repeat(64),
        credential: 'x',
      };
      for (const [tool, args] of [
        ['pizza__witness_submit', { checkpoint, adminJwk: runtime.identity.household.adminJwk }],
        ['pizza__witness_latest', { householdDid: runtime.identity.household.adminDid }],
        ['witness_submit', { checkpoint, adminJwk: runtime.identity.household.adminJwk }],
      ] as const) {
        const called = (await client.callTool({
          name: 'call_tool',
          arguments: { tool_name: tool, arguments: args },
        })) as CallToolResult;
        expect(called.isError, `${tool}: ${textOf(called)}`).toBe(true);
      }
      await runtime.checkpoints.checkpoint();
      head = (await runtime.audit.head()).rowId;
    } finally {
      await household.close();
    }
    // The operator path: the shop holds the closing checkpoint, and audit:verify checks against it.
    const { code, output } = await auditVerify(dataDir, { args: ['--witness', 'shop'] });
    expect(output).toMatch(
      /^audit chain verified: (\d+) rows, checkpoint at row \1 signed by .*; the witness shop vouches for rows 1 to \1$/m,
    );
    expect(Number(/verified: (\d+) rows/.exec(output)?.[1])).toBeGreaterThanOrEqual(head);
    expect(code).toBe(0);
  }, 240_000);

  it('over HTTP: /mcp lists no witness tool; /witness lists only them and refuses a checkpoint the household admin did not sign', async () => {
    const shop = await startHttpShop(folder('witness-http-shop-'));
    const connect = async (path: string) => {
      const client = new Client({ name: 'witness-probe', version: '0.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${shop.url}${path}`)));
      return client;
    };
    try {
      const model = await connect('/mcp');
      const modelTools = (await model.listTools()).tools.map((tool) => tool.name);
      await model.close();
      expect(modelTools).toContain('request_invoice');
      expect(modelTools.filter((name) => name.includes('witness'))).toEqual([]);

      const operator = await connect('/witness');
      const witnessTools = (await operator.listTools()).tools.map((tool) => tool.name).sort();
      expect(witnessTools).toEqual(['witness_latest', 'witness_submit']);
      const forged = (await operator.callTool({
        name: 'witness_submit',
        arguments: {
          checkpoint: {
            householdDid: 'did:web:localhost%3A3000',
            rowId: 9,
            hash: 'a'.repeat(64),
            credential: 'e30.e30.c2ln',
          },
          adminJwk: { kty: 'OKP', crv: 'Ed25519', x: 'A'.repeat(43) },
        },
      })) as CallToolResult;
      expect(forged.isError).toBe(true);
      expect(textOf(forged)).toContain('is not signed by the admin key of did:web:localhost%3A3000');
      const latest = (await operator.callTool({
        name: 'witness_latest',
        arguments: { householdDid: 'did:web:localhost%3A3000' },
      })) as CallToolResult;
      expect(latest.structuredContent).toEqual({ checkpoint: null });
      await operator.close();
    } finally {
      await shop.stop();
    }
  }, 120_000);
});
