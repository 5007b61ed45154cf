import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGateway,
  createTokenCredentials,
  type DownstreamSpec,
  type Gateway,
  type StartReport,
} from '../../proxy/index';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { callTool, connectClient, eventLog, memoryLogger, searchNames, textOf } from '../proxy/helpers';
import { leakScan, testTokens } from './leak-scan';

const leaks = leakScan();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function fixture(bearer?: string, options: { reflectHeaders?: boolean } = {}): Promise<HttpFixture> {
  const started = await startHttpFixture({ ...options, ...(bearer !== undefined && { bearer }) });
  cleanups.push(() => started.close());
  return started;
}

function tokensFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'emcp-tokens-')), 'tokens');
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** A proxy wired as the CLI wires it: URL servers bound to their configured URLs. */
async function credentialedProxy(options: {
  servers: Record<string, DownstreamSpec & { kind: 'http' }>;
  tokensPath: string;
  now?: () => number;
}): Promise<{ proxy: Gateway; started: StartReport; client: Client; logs: string[] }> {
  const logger = memoryLogger();
  const events = eventLog();
  const proxy = createGateway({
    embeddings: false,
    logger,
    onEvent: events.onEvent,
    // The fixtures listen on loopback: runtime loads of them need the operator's opt-in (SPEC §3.4).
    allowLocalhostLoads: true,
    servers: options.servers,
    credentials: createTokenCredentials({
      tokensPath: options.tokensPath,
      log: (line) => logger.info(line),
      ...(options.now && { now: options.now }),
    }),
  });
  cleanups.push(async () => {
    await proxy.close();
    leaks.capture(logger.lines);
    leaks.capture(events.events);
  });
  const started = await proxy.start();
  return { proxy, started, client: await connectClient(proxy), logs: logger.lines };
}

async function visible<T>(result: Promise<T>): Promise<T> {
  const value = await result;
  leaks.capture(value);
  return value;
}

function authorizations(server: HttpFixture, path: string): (string | undefined)[] {
  return server.seen.filter((request) => request.path === path).map((request) => request.headers.authorization);
}

describe('URL binding (SPEC §3.9)', () => {
  it('sends the token to the configured URL, with every request of the session', async () => {
    const server = await fixture(testTokens.configured);
    const { client } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: server.url } },
      tokensPath: tokensFile(`# operator tokens\nnotion="${testTokens.configured}"\n`),
    });
    expect(await visible(searchNames(client, 'echoes back the message'))).toContain('notion__echo');
    expect(textOf(await visible(callTool(client, 'notion__echo', { message: 'hi' })))).toBe('echo: hi');
    const seen = authorizations(server, '/mcp');
    expect(seen.length).toBeGreaterThan(2);
    expect(new Set(seen)).toEqual(new Set([`Bearer ${testTokens.configured}`]));
  });

  it('load_mcp_server of a configured name at another URL is refused, so no token can follow it', async () => {
    const server = await fixture();
    // "notion" is configured (its URL is down at startup); the name stays the operator's (SPEC §3.4).
    const attacker = await fixture();
    for (const url of [server.altUrl, attacker.url]) {
      const { started, client } = await credentialedProxy({
        servers: { notion: { kind: 'http', url: server.downUrl } },
        tokensPath: tokensFile(`notion=${testTokens.configured}\n`),
      });
      expect(started.failed.map((failure) => failure.name)).toEqual(['notion']);
      const loaded = await visible(
        client.callTool({ name: 'load_mcp_server', arguments: { server_name: 'notion', url } }),
      );
      expect(textOf(loaded)).toMatch(/"notion" belongs to the operator's configuration/);
    }
    // The operator-configured URL did get the token at startup: binding, not a missing token.
    expect(authorizations(server, '/down')).toEqual([
      `Bearer ${testTokens.configured}`,
      `Bearer ${testTokens.configured}`,
    ]);
    expect(authorizations(server, '/alt/mcp')).toEqual([]);
    expect(attacker.seen).toEqual([]);
  });

  it('a server loaded at runtime under a new name sends no Authorization header', async () => {
    const configured = await fixture(testTokens.configured);
    const other = await fixture();
    const { client } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: configured.url } },
      tokensPath: tokensFile(`notion=${testTokens.configured}\nnewcomer=${testTokens.other}\n`),
    });
    const loaded = await visible(
      client.callTool({ name: 'load_mcp_server', arguments: { server_name: 'newcomer', url: other.url } }),
    );
    expect(textOf(loaded)).toMatch(/Loaded "newcomer" with 5 tools/);
    expect(await visible(searchNames(client, 'adds two numbers', 10))).toContain('newcomer__add');
    expect((await visible(callTool(client, 'newcomer__add', { a: 1, b: 2 }))).structuredContent).toEqual({ sum: 3 });
    expect(other.seen.length).toBeGreaterThan(2);
    expect(other.seen.every((request) => request.headers.authorization === undefined)).toBe(true);
  });

  it('load_mcp_server of a configured name at exactly its configured URL presents the token', async () => {
    const server = await fixture('not-yet');
    const { started, client } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: server.url } },
      tokensPath: tokensFile(`notion=${testTokens.configured}\n`),
    });
    // Rejected at startup (the server did not accept the token yet), so not connected.
    expect(started.failed.map((failure) => failure.name)).toEqual(['notion']);
    server.auth.bearer = testTokens.configured;
    const loaded = await visible(
      client.callTool({ name: 'load_mcp_server', arguments: { server_name: 'notion', url: server.url } }),
    );
    expect(textOf(loaded)).toMatch(/Loaded "notion" with 5 tools/);
    expect(authorizations(server, '/mcp').at(-1)).toBe(`Bearer ${testTokens.configured}`);
  });
});

describe('what the model is told', () => {
  it('the server instructions say never to ask for a token in chat', async () => {
    const { client } = await credentialedProxy({ servers: {}, tokensPath: tokensFile('') });
    const instructions = client.getInstructions() ?? '';
    leaks.capture(instructions);
    expect(instructions).toMatch(/Never ask the user for a password, token or API key in chat/);
  });

  it('a configured URL that redirects: the token never reaches the redirect target', async () => {
    const server = await fixture();
    const { started, logs } = await credentialedProxy({
      servers: { moved: { kind: 'http', url: server.redirectUrl } },
      tokensPath: tokensFile(`moved=${testTokens.configured}\n`),
    });
    expect(started.failed.map((failure) => failure.name)).toEqual(['moved']);
    expect(server.seen.map((request) => request.path)).toEqual(['/redirect']);
    expect(logs.join('\n')).toContain(`redirect (HTTP 307) to ${server.url}; redirects are never followed`);
  });
});

describe('a server that echoes its request', () => {
  it('never hands the token it was sent to the model, in text or structured content', async () => {
    const server = await fixture(testTokens.configured, { reflectHeaders: true });
    const { client } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: server.url } },
      tokensPath: tokensFile(`notion=${testTokens.configured}\n`),
    });
    expect(await visible(searchNames(client, 'show the HTTP headers of the request'))).toContain(
      'notion__request_headers',
    );
    const result = await visible(callTool(client, 'notion__request_headers', {}));
    // The downstream did receive the token, and reflected it; the model sees it redacted.
    expect(authorizations(server, '/mcp').at(-1)).toBe(`Bearer ${testTokens.configured}`);
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toMatch(/"authorization":"\[redacted\]"/);
    expect(result.structuredContent).toEqual({ authorization: '[redacted]' });
  });
});

describe('rotation and revocation', () => {
  it('uses a rewritten token on the next call without a restart, and reports a revoked one with its age', async () => {
    const server = await fixture(testTokens.configured);
    const tokensPath = tokensFile(`notion=${testTokens.configured}\n`);
    const { client } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: server.url } },
      tokensPath,
    });
    await visible(searchNames(client, 'echoes back the message'));
    expect(textOf(await visible(callTool(client, 'notion__echo', { message: 'one' })))).toBe('echo: one');

    // Rotate: the server now wants the new token; the tokens file is rewritten; same session.
    server.auth.bearer = testTokens.rotated;
    writeFileSync(tokensPath, `# rotated\nnotion=${testTokens.rotated}\n`);
    // The rotated value was written 90 minutes ago, as far as the age is concerned.
    const ninetyMinutesAgo = new Date(Date.now() - 90 * 60_000);
    utimesSync(tokensPath, ninetyMinutesAgo, ninetyMinutesAgo);
    const before = server.seen.length;
    expect(textOf(await visible(callTool(client, 'notion__echo', { message: 'two' })))).toBe('echo: two');
    expect(server.seen.slice(before).map((request) => request.headers.authorization)).toContain(
      `Bearer ${testTokens.rotated}`,
    );
    expect(server.calls.map((call) => call.args)).toEqual([{ message: 'one' }, { message: 'two' }]);

    // Revoke server-side mid-session.
    server.auth.bearer = testTokens.revokedByServer;
    const revoked: CallToolResult = await visible(callTool(client, 'notion__echo', { message: 'three' }));
    expect(revoked.isError).toBe(true);
    const message = textOf(revoked);
    expect(message).toMatch(/Server "notion" rejected its token \(HTTP 401\)/);
    expect(message).toMatch(/unchanged for at least (9[0-9]|1[0-9]{2}) minutes/);
    expect(message).toMatch(/ask the user to update the "notion" line in the extensible-mcp tokens file/i);
    expect(message).not.toContain(testTokens.rotated);
    expect(server.calls).toHaveLength(2);
  });

  it('says "0 minutes" for a token the operator just rotated that the server still refuses', async () => {
    const server = await fixture('something-else');
    const tokensPath = tokensFile(`notion=${testTokens.wrong}\n`);
    const { client } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: server.url } },
      tokensPath,
    });
    const loaded = await visible(
      client.callTool({ name: 'load_mcp_server', arguments: { server_name: 'notion', url: server.url } }),
    );
    expect(loaded.isError).toBe(true);
    expect(textOf(loaded)).toMatch(/Server "notion" rejected its token \(HTTP 401\).*at least 0 minutes/);
  });

  it('refuses to send a token with a look-alike letter and says so without quoting it', async () => {
    const server = await fixture();
    const homoglyph = `${testTokens.configured.slice(0, 4)}\u043e${testTokens.configured.slice(5)}`;
    const { started, logs } = await credentialedProxy({
      servers: { notion: { kind: 'http', url: server.url } },
      tokensPath: tokensFile(`notion=${homoglyph}\n`),
    });
    expect(started.failed.map((failure) => failure.name)).toEqual(['notion']);
    expect(server.seen).toHaveLength(0);
    const failure = logs.find((line) => line.startsWith('server "notion" failed to start'));
    expect(failure).toMatch(/token for "notion" .* cannot be sent in an HTTP header/);
    for (const line of logs) expect(line).not.toContain(homoglyph);
  });
});
