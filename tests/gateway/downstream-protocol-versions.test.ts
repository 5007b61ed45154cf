import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client, ElicitRequestFormParams } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  connectInMemory,
  createGateway,
  createTokenCredentials,
  type DownstreamProtocol,
  type DownstreamSpec,
  type Gateway,
  type StartReport,
} from '../../proxy/index';
import { startHttpFixture } from '../fixtures/http-fixture-server';
import { type ModernHttpFixture, startModernHttpFixture } from '../fixtures/modern-http-fixture-server';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { cleanupStack, mortalFixture, waitableLogger } from './support';

// Issue 31, SPEC §3.11: every downstream connection negotiates its protocol version per peer,
// as its `protocol` setting allows. The 2026-07-28 fixtures are served by the v2 SDK's factory
// entries with `legacy: 'reject'` (they refuse a 2025 handshake); the 2025 fixtures are the
// hand-wired servers the other tests use (they know nothing of `server/discover`).
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const MODERN_STDIO = fileURLToPath(new URL('../fixtures/modern-stdio-fixture-server.ts', import.meta.url));
const LEGACY_STDIO = fileURLToPath(new URL('../fixtures/stdio-fixture-server.ts', import.meta.url));
const SWITCHING_STDIO = fileURLToPath(new URL('../fixtures/era-switching-stdio-server.ts', import.meta.url));

type Era = '2026-07-28' | '2025-11-25';

/** A folder for what the fixtures record, removed after the test. */
function stateFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-eras-'));
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  return folder;
}

/** The pids a modern stdio fixture recorded, one per process started from its command. */
function startsIn(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

function modernStdio(startsFile: string, protocol?: DownstreamProtocol): DownstreamSpec {
  return {
    kind: 'stdio',
    command: process.execPath,
    args: ['--import', 'tsx', MODERN_STDIO, startsFile],
    ...(protocol && { protocol }),
  };
}

async function modernHttp(): Promise<ModernHttpFixture> {
  const fixture = await startModernHttpFixture();
  cleanups.push(() => fixture.close());
  return fixture;
}

/** A downstream that speaks only `era`, over `transport`, as a spec with `protocol`. */
async function downstream(
  transport: 'stdio' | 'http',
  era: Era,
  protocol: DownstreamProtocol,
): Promise<DownstreamSpec> {
  if (transport === 'stdio') {
    if (era === '2026-07-28') return modernStdio(join(stateFolder(), 'starts'), protocol);
    return { kind: 'stdio', command: process.execPath, args: ['--import', 'tsx', LEGACY_STDIO], protocol };
  }
  if (era === '2026-07-28') return { kind: 'http', url: (await modernHttp()).url, protocol };
  const fixture = await startHttpFixture();
  cleanups.push(() => fixture.close());
  return { kind: 'http', url: fixture.url, protocol };
}

/** A started gateway (lexical search) and what it logged; unlike `startedGateway`, a failed start is a result. */
async function gatewayWith(
  servers: Record<string, DownstreamSpec>,
  options: { readonly callTimeoutMs?: number; readonly tokens?: string } = {},
): Promise<{ gateway: Gateway; report: StartReport; logger: ReturnType<typeof waitableLogger> }> {
  const logger = waitableLogger();
  const { tokens, ...rest } = options;
  const tokensPath = tokens === undefined ? undefined : join(stateFolder(), 'tokens');
  if (tokensPath !== undefined) writeFileSync(tokensPath, tokens ?? '', { mode: 0o600 });
  const gateway = createGateway({
    embeddings: false,
    logger,
    servers,
    ...rest,
    ...(tokensPath !== undefined && {
      credentials: createTokenCredentials({ tokensPath, log: (line) => logger.info(line) }),
    }),
  });
  cleanups.push(() => gateway.close());
  return { gateway, report: await gateway.start(), logger };
}

/** A search-mode session of `gateway` whose client answers every form with `name`, recording what it was asked. */
async function session(
  gateway: Gateway,
  options: { readonly elicitation?: boolean; readonly name?: string; readonly answerAfter?: Promise<void> } = {},
): Promise<{ client: Client; forms: ElicitRequestFormParams[] }> {
  const elicitation = options.elicitation ?? true;
  const client = await connectInMemory(gateway, {
    principal: { id: 'test' },
    ...(elicitation && { capabilities: { elicitation: { form: {} } } }),
  });
  cleanups.push(() => client.close());
  const forms: ElicitRequestFormParams[] = [];
  if (elicitation) {
    client.setRequestHandler('elicitation/create', async (request) => {
      forms.push(request.params as ElicitRequestFormParams);
      await options.answerAfter;
      return { action: 'accept', content: { name: options.name ?? 'Ada' } };
    });
  }
  return { client, forms };
}

describe('each downstream speaks the protocol version its setting allows', () => {
  const cases: [transport: 'stdio' | 'http', era: Era, protocol: DownstreamProtocol, outcome: 'works' | 'refused'][] =
    [];
  for (const transport of ['stdio', 'http'] as const) {
    for (const era of ['2026-07-28', '2025-11-25'] as const) {
      const wrong = era === '2026-07-28' ? '2025-11-25' : '2026-07-28';
      cases.push([transport, era, 'auto', 'works'], [transport, era, era, 'works'], [transport, era, wrong, 'refused']);
    }
  }

  it.each(cases)('%s server speaking only %s, protocol %s: %s', async (transport, era, protocol, outcome) => {
    const { gateway, report, logger } = await gatewayWith({ fx: await downstream(transport, era, protocol) });
    if (outcome === 'refused') {
      // A pinned version never falls back: the server is not connected, and the reason names the setting.
      expect(report.connected).toEqual([]);
      expect(report.failed).toEqual([
        {
          name: 'fx',
          reason: `Server "fx" does not speak MCP ${protocol}, which its configuration pins ("protocol": "${protocol}"); a pinned version never falls back. Set "protocol" to "auto" (or "${era}") to connect to it.`,
        },
      ]);
      const { client } = await session(gateway);
      expect(await searchNames(client, 'echoes back the message')).toEqual([]);
      return;
    }
    expect(report).toEqual({ connected: ['fx'], failed: [] });
    // The operator sees which version the connection negotiated.
    await logger.waitFor(`server "fx": connected, MCP ${era}`);
    const { client } = await session(gateway);
    expect(await searchNames(client, 'echoes back the message')).toContain('fx__echo');
    const result = await callTool(client, 'fx__echo', { message: `over ${era}` });
    expect(result.isError).toBeUndefined();
    expect(textOf(result)).toBe(`echo: over ${era}`);
  });
});

describe('a stdio server under auto is probed once per process', () => {
  it('a 2026-07-28 server: its restart after a crash connects from the first verdict, no second probe process', async () => {
    const starts = join(stateFolder(), 'starts');
    const { gateway, report, logger } = await gatewayWith({ fx: modernStdio(starts) });
    expect(report.connected).toEqual(['fx']);
    // The probe's sibling process, then the session's own child.
    expect(startsIn(starts)).toHaveLength(2);
    const { client } = await session(gateway);
    expect(await searchNames(client, 'exits the server process before answering')).toContain('fx__crash');
    const lost = await callTool(client, 'fx__crash');
    expect(textOf(lost)).toMatch(/outcome is unknown/);

    const next = await callTool(client, 'fx__whoami');
    expect(next.isError).toBeUndefined();
    // One more process: the restarted child, which is the one that answered.
    const after = startsIn(starts);
    expect(after).toHaveLength(3);
    expect(textOf(next)).toBe(after[2]);
    await logger.waitFor('server "fx": connected, MCP 2026-07-28 (as its first start negotiated)');
  });

  it('a 2025-11-25 server: the same, with the verdict that it speaks only the 2025 handshake', async () => {
    const mortal = mortalFixture(cleanups, { protocol: 'auto' });
    const { gateway, report, logger } = await gatewayWith({ mortal: mortal.spec });
    expect(report.connected).toEqual(['mortal']);
    expect(mortal.starts()).toHaveLength(2);
    const { client } = await session(gateway);
    expect(await searchNames(client, 'does one unit of work')).toContain('mortal__work');
    await callTool(client, 'mortal__work', { label: 'first', die: true });
    const next = await callTool(client, 'mortal__work', { label: 'second' });
    const starts = mortal.starts();
    expect(starts).toHaveLength(3);
    expect(textOf(next)).toBe(`done second by ${starts[2]}`);
    await logger.waitFor('server "mortal": connected, MCP 2025-11-25 (as its first start negotiated)');
  });

  it('another server admitted with the same command connects from the same verdict', async () => {
    const starts = join(stateFolder(), 'starts');
    const { gateway, report } = await gatewayWith({ one: modernStdio(starts) });
    expect(report.connected).toEqual(['one']);
    expect(startsIn(starts)).toHaveLength(2);
    expect(await gateway.admit('two', modernStdio(starts))).toEqual({
      server: 'two',
      tools: 7,
      protocolVersion: '2026-07-28',
    });
    expect(startsIn(starts)).toHaveLength(3);
  });
});

describe('a stdio server upgraded between two starts', () => {
  it('is asked again when it refuses the version its first start negotiated, and is then spoken to in the new one', async () => {
    const folder = stateFolder();
    const eraFile = join(folder, 'era');
    const starts = join(folder, 'starts');
    writeFileSync(eraFile, '2025-11-25');
    const { gateway, report, logger } = await gatewayWith({
      fx: { kind: 'stdio', command: process.execPath, args: ['--import', 'tsx', SWITCHING_STDIO, eraFile, starts] },
    });
    expect(report.connected).toEqual(['fx']);
    await logger.waitFor('server "fx": connected, MCP 2025-11-25');
    const { client } = await session(gateway);
    expect(await searchNames(client, 'reports the process id of the server')).toContain('fx__whoami');
    const old = Number(textOf(await callTool(client, 'fx__whoami')));
    expect(startsIn(starts)).toEqual([expect.any(String), String(old)]);

    // Upgraded to a 2026-07-28-only server, then the child goes away.
    writeFileSync(eraFile, '2026-07-28');
    process.kill(old, 'SIGKILL');
    await logger.waitFor('server "fx": connection closed');
    const next = await callTool(client, 'fx__whoami');
    expect(next.isError).toBeUndefined();
    await logger.waitFor('server "fx": no longer speaks the protocol version it first negotiated');
    await logger.waitFor('server "fx": connected, MCP 2026-07-28');
    // The restart from the old verdict (refused), then one probe and the child that answered.
    const after = startsIn(starts);
    expect(after).toHaveLength(5);
    expect(textOf(next)).toBe(after[4]);
  });
});

describe('a 2026-07-28 downstream keeps the behaviour of a 2025 one', () => {
  for (const transport of ['stdio', 'http'] as const) {
    it(`${transport}: tool list changes arrive on its listen stream and re-index it`, async () => {
      const { gateway, logger } = await gatewayWith({ fx: await downstream(transport, '2026-07-28', 'auto') });
      const { client } = await session(gateway);
      expect(await searchNames(client, 'adds a new tool to this server')).toContain('fx__grow');
      expect(await searchNames(client, 'freshly grown widget tool')).not.toContain('fx__widget');
      await callTool(client, 'fx__grow', { name: 'widget' });
      await logger.waitFor('server "fx": tool list changed, re-indexed');
      expect(await searchNames(client, 'a tool added at run time widget')).toContain('fx__widget');
      expect(textOf(await callTool(client, 'fx__widget'))).toBe('widget ran');
    });

    it(`${transport}: an input_required elicitation reaches the calling session's form and completes the call`, async () => {
      const { gateway } = await gatewayWith({ fx: await downstream(transport, '2026-07-28', 'auto') });
      const other = await session(gateway, { name: 'Mallory' });
      const chat = await session(gateway, { name: 'Grace' });
      expect(await searchNames(chat.client, 'greets the caller by name')).toContain('fx__greet');
      const result = await callTool(chat.client, 'fx__greet');
      expect(result.isError).toBeUndefined();
      expect(textOf(result)).toBe('Hello, Grace!');
      expect(chat.forms).toEqual([
        expect.objectContaining({
          message: 'What is your name?',
          requestedSchema: expect.objectContaining({ required: ['name'] }),
        }),
      ]);
      expect(other.forms).toEqual([]);
    });

    it(`${transport}: two sessions asked at once each answer their own call's question`, async () => {
      // A 2026 server's question belongs to the call it answered: with Grace's call still waiting
      // for her answer, Ada's call to the same server is asked and completes (a 2025 server's
      // request, carrying no call, would be refused here: SPEC §3.10).
      const { gateway } = await gatewayWith({ fx: await downstream(transport, '2026-07-28', 'auto') });
      let answer: () => void = () => undefined;
      const grace = await session(gateway, { name: 'Grace', answerAfter: new Promise((done) => (answer = done)) });
      const ada = await session(gateway, { name: 'Ada' });
      for (const { client } of [grace, ada])
        expect(await searchNames(client, 'greets the caller by name')).toContain('fx__greet');
      const graceCall = callTool(grace.client, 'fx__greet');
      await vi.waitFor(() => expect(grace.forms).toHaveLength(1));
      expect(textOf(await callTool(ada.client, 'fx__greet'))).toBe('Hello, Ada!');
      answer();
      expect(textOf(await graceCall)).toBe('Hello, Grace!');
      expect([grace.forms.length, ada.forms.length]).toEqual([1, 1]);
    });

    it(`${transport}: a session that cannot answer a form gets the request refused, with the reason`, async () => {
      const { gateway, logger } = await gatewayWith({ fx: await downstream(transport, '2026-07-28', 'auto') });
      const { client } = await session(gateway, { elicitation: false });
      expect(await searchNames(client, 'greets the caller by name')).toContain('fx__greet');
      const result = await callTool(client, 'fx__greet');
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain('the client does not support form-mode elicitation');
      // The server never ran to completion: a refusal, not an outcome in doubt.
      expect(textOf(result)).not.toMatch(/outcome is unknown/);
      await logger.waitFor(
        'server "fx" sent elicitation/create; refused: the client does not support form-mode elicitation',
      );
    });

    it(`${transport}: a server that asks without end is stopped at the round cap: a failure, never in doubt`, async () => {
      const { gateway } = await gatewayWith({ fx: await downstream(transport, '2026-07-28', 'auto') });
      const chat = await session(gateway, { name: 'Grace' });
      expect(await searchNames(chat.client, 'asks for your name again whatever the answer')).toContain('fx__nag');
      const result = await callTool(chat.client, 'fx__nag');
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(/round/i);
      // Every round was answered with input_required: the tool never completed.
      expect(textOf(result)).not.toMatch(/outcome is unknown/);
      expect(chat.forms.length).toBeGreaterThan(1);
    });

    it(`${transport}: a hung call times out with a clear error and the next call is served`, async () => {
      const { gateway } = await gatewayWith(
        { fx: await downstream(transport, '2026-07-28', 'auto') },
        { callTimeoutMs: 1000 },
      );
      const { client } = await session(gateway);
      expect(await searchNames(client, 'waits forever and never answers')).toContain('fx__hang');
      const hung = await callTool(client, 'fx__hang');
      expect(hung.isError).toBe(true);
      expect(textOf(hung)).toMatch(/Server "fx" did not answer "hang" within 1 s/);
      expect(textOf(hung)).toMatch(/outcome is unknown/);
      expect(await searchNames(client, 'echoes back the message')).toContain('fx__echo');
      expect(textOf(await callTool(client, 'fx__echo', { message: 'still here' }))).toBe('echo: still here');
    });
  }

  it('http: a 404 is the refusal of a server that has no session to lose: the call is not sent again', async () => {
    const fixture = await modernHttp();
    const { gateway, logger } = await gatewayWith({ fx: { kind: 'http', url: fixture.url } });
    const { client } = await session(gateway);
    expect(await searchNames(client, 'echoes back the message')).toContain('fx__echo');
    fixture.refuseCalls.status = 404;
    const refused = await callTool(client, 'fx__echo', { message: 'refused' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^Server "fx" failed on "echo": /);
    expect(textOf(refused)).not.toMatch(/outcome is unknown/);
    expect(fixture.methods.filter((method) => method === 'tools/call')).toHaveLength(1);
    expect(fixture.methods.filter((method) => method === 'server/discover')).toHaveLength(1);
    expect(logger.lines.some((line) => line.includes('its session is gone'))).toBe(false);
  });

  it('http: a restarted server is reached again without any session to renew, and its change stream is re-opened', async () => {
    const first = await modernHttp();
    const { gateway, logger } = await gatewayWith({ fx: { kind: 'http', url: first.url } });
    const { client } = await session(gateway);
    expect(await searchNames(client, 'adds a new tool to this server')).toContain('fx__grow');
    expect(await searchNames(client, 'echoes back the message')).toContain('fx__echo');
    // A server shutting down ends its listen streams on purpose; the proxy still wants one.
    await first.close();
    await logger.waitFor('server "fx": its change stream was ended by the server; it is re-opened at the next call');
    const second = await startModernHttpFixture({ port: first.port });
    cleanups.push(() => second.close());

    // No session to lose: the request goes to the new process as it is, once.
    expect(textOf(await callTool(client, 'fx__echo', { message: 'after restart' }))).toBe('echo: after restart');
    expect(second.methods.filter((method) => method === 'tools/call')).toHaveLength(1);
    expect(second.methods).not.toContain('server/discover');
    expect(logger.lines.some((line) => line.includes('its session is gone'))).toBe(false);
    // The re-opened stream carries the new process's changes.
    await logger.waitFor('server "fx": change stream re-opened, tools re-read');
    await callTool(client, 'fx__grow', { name: 'gadget' });
    await logger.waitFor('server "fx": tool list changed, re-indexed');
    expect(await searchNames(client, 'a tool added at run time gadget')).toContain('fx__gadget');
  });
});

describe('a 2026-07-28 HTTP downstream and its credential', () => {
  it('gets the bearer token on every request, the protocol probe included', async () => {
    const fixture = await startModernHttpFixture({ bearer: 'tok-2026' });
    cleanups.push(() => fixture.close());
    const { gateway, report } = await gatewayWith(
      { fx: { kind: 'http', url: fixture.url } },
      { tokens: 'fx=tok-2026\n' },
    );
    expect(report.connected).toEqual(['fx']);
    const { client } = await session(gateway);
    expect(await searchNames(client, 'echoes back the message')).toContain('fx__echo');
    expect(textOf(await callTool(client, 'fx__echo', { message: 'with a token' }))).toBe('echo: with a token');
    expect(fixture.methods.slice(0, 2)).toEqual(['server/discover', 'subscriptions/listen']);
    expect(fixture.methods).toContain('tools/call');
    expect(new Set(fixture.authorizations)).toEqual(new Set(['Bearer tok-2026']));
  });

  it('a rejected token, already at the probe, is reported as the credential, not as the protocol', async () => {
    const fixture = await startModernHttpFixture({ bearer: 'the-right-one' });
    cleanups.push(() => fixture.close());
    for (const protocol of ['auto', '2026-07-28'] as const) {
      const { report } = await gatewayWith(
        { fx: { kind: 'http', url: fixture.url, protocol } },
        { tokens: 'fx=a-stale-one\n' },
      );
      expect(report.failed).toEqual([
        { name: 'fx', reason: expect.stringMatching(/^Server "fx" rejected its token \(HTTP 401\)\. /) },
      ]);
      expect(JSON.stringify(report)).not.toContain('a-stale-one');
    }
  });
});
