/**
 * Issue 29, transparent mode: `confirm_if: {always: true}` has the person confirm the exact call
 * through a form before it is forwarded, and `ambiguous_if` clarifies a vague value first. Both
 * were parsed and ignored. Driven through the real transparent CLI over stdio, in front of a real
 * upstream process that records every call it runs, for a 2025-11-25 session and a 2026-07-28
 * client (whose forms travel as `input_required` rounds).
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ElicitRequestFormParams, ElicitResult } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { TRANSPARENT_BIN } from './cli-process';

const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
});

/** The YAML: the mortal server upstream, whose `work` calls land in `<stateDir>/calls`. */
function configFor(stateDir: string): string {
  const path = join(stateDir, 'proxy.yaml');
  const server = resolve('tests/gateway/mortal-stdio-server.ts');
  writeFileSync(
    path,
    [
      'upstream:',
      `  command: ${JSON.stringify(process.execPath)}`,
      `  args: ["--import", "tsx", ${JSON.stringify(server)}, ${JSON.stringify(stateDir)}]`,
      'tools:',
      '  work:',
      '    ambiguous_if:',
      '      field: label',
      '      query_min_length: 4',
      '      generic_terms: [stuff, "some food"]',
      '    confirm_if:',
      '      always: true',
      '',
    ].join('\n'),
  );
  return path;
}

/** What the upstream ran: the labels of its `work` calls, in order. */
function ran(stateDir: string): string[] {
  const calls = join(stateDir, 'calls');
  return existsSync(calls) ? readFileSync(calls, 'utf8').split('\n').filter(Boolean) : [];
}

const eras = {
  '2025-11-25 session': {},
  '2026-07-28 client': { versionNegotiation: { mode: { pin: '2026-07-28' } } },
} as const;

/** A client of `era` on the transparent CLI whose forms are answered by `answers`, in order; records each form. */
async function connect(era: keyof typeof eras, stateDir: string, answers: ElicitResult[]) {
  const forms: ElicitRequestFormParams[] = [];
  const client = new Client(
    { name: 'confirm-test', version: '1' },
    { ...eras[era], capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    forms.push(request.params as ElicitRequestFormParams);
    return answers.shift() ?? { action: 'cancel' };
  });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [TRANSPARENT_BIN, '--config', configFor(stateDir)],
      stderr: 'ignore',
    }),
  );
  clients.push(client);
  return { client, forms };
}

function work(client: Client, label: string) {
  return client.callTool({ name: 'work', arguments: { label } });
}

describe.each(Object.keys(eras) as (keyof typeof eras)[])('transparent mode, %s', (era) => {
  it('confirm_if: a yes forwards the exact call once, after showing every argument', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-confirm-'));
    const { client, forms } = await connect(era, stateDir, [{ action: 'accept', content: { confirm: true } }]);
    const result = await work(client, 'margherita\u202Eati');

    expect(textOf(result)).toMatch(/^done margherita\u202Eati by \d+$/);
    expect(ran(stateDir)).toEqual(['margherita\u202Eati']);
    expect(forms).toHaveLength(1);
    // The reversing character is shown as an escape, never applied.
    expect(forms[0]?.message).toContain('"work"');
    expect(forms[0]?.message).toContain('requested by the agent');
    expect(forms[0]?.message).toContain('"label": "margherita\\u202Eati"');
    expect(forms[0]?.message).not.toContain('\u202E');
  });

  it.each([
    ['a decline', { action: 'decline' }, 'declined'],
    ['a cancel', { action: 'cancel' }, 'cancelled'],
    ['a yes with the box left unticked', { action: 'accept', content: { confirm: false } }, 'declined'],
  ] as const)('confirm_if: %s forwards nothing and says why', async (_, answer, status) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-confirm-'));
    const { client } = await connect(era, stateDir, [answer as ElicitResult]);
    const result = await work(client, 'pepperoni');

    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      error: 'tool_call_blocked',
      tool: 'work',
      reason: 'confirmation_declined',
      status,
    });
    expect(ran(stateDir)).toEqual([]);
  });

  it('ambiguous_if: a vague value is clarified, and the clarified value is what is confirmed and forwarded', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-clarify-'));
    const { client, forms } = await connect(era, stateDir, [
      { action: 'accept', content: { label: 'one large margherita' } },
      { action: 'accept', content: { confirm: true } },
    ]);
    const result = await work(client, ' Some Food ');

    expect(textOf(result)).toMatch(/^done one large margherita by \d+$/);
    expect(ran(stateDir)).toEqual(['one large margherita']);
    expect(forms[0]?.message).toContain('" Some Food "');
    expect(forms[0]?.requestedSchema.properties).toHaveProperty('label');
    expect(forms[1]?.message).toContain('"label": "one large margherita" (entered by you)');
  });

  it('ambiguous_if: an answer as vague as the question forwards nothing', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-clarify-'));
    const { client, forms } = await connect(era, stateDir, [{ action: 'accept', content: { label: 'stuff' } }]);
    const result = await work(client, 'abc');

    expect(result.structuredContent).toMatchObject({ reason: 'ambiguous_input', missing_or_ambiguous: ['label'] });
    expect(forms).toHaveLength(1);
    expect(ran(stateDir)).toEqual([]);
  });
});

describe('transparent mode, a client that cannot show forms', () => {
  it('is refused a call that needs confirmation, and nothing is forwarded', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-confirm-'));
    const client = new Client({ name: 'no-forms', version: '1' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [TRANSPARENT_BIN, '--config', configFor(stateDir)],
        stderr: 'ignore',
      }),
    );
    clients.push(client);
    const result = await work(client, 'pepperoni');

    expect(result.structuredContent).toMatchObject({ reason: 'confirmation_unavailable', status: 'blocked' });
    expect(ran(stateDir)).toEqual([]);
  });
});
