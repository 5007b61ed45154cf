import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { cliEnv, configIn, runCli } from './cli-run';
import { leakScan, testTokens } from './leak-scan';

const leaks = leakScan();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function fixture(bearer: string): Promise<HttpFixture> {
  const started = await startHttpFixture({ bearer });
  cleanups.push(() => started.close());
  return started;
}

/**
 * Starts the proxy over stdio and closes its stdin once it reports its servers connected, which
 * stops it: the proxy serves at once, so an empty stdin would stop it before that.
 */
async function startAndStop(configPath: string, env: Record<string, string>) {
  const result = await runCli(['--config', configPath], { env: cliEnv(env), closeStdinAfter: 'connected ' });
  leaks.capture(result.stdout);
  leaks.capture(result.stderr);
  return result;
}

describe('EXTENSIBLE_MCP_TOKENS_FILE', () => {
  it('set but missing: the proxy refuses to start, exit 2, naming the resolved path', async () => {
    const { folder, configPath } = configIn({ mcpServers: {} });
    const result = await startAndStop(configPath, { EXTENSIBLE_MCP_TOKENS_FILE: 'secrets/missing' });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(
      `${join(folder, 'secrets', 'missing')}: tokens file not found (EXTENSIBLE_MCP_TOKENS_FILE=secrets/missing`,
    );
    expect(result.stderr).not.toMatch(/connected \d+ of/);
  });

  it('relative to the config folder: logs the resolved path and the server gets its token', async () => {
    const server = await fixture(testTokens.relative);
    const { folder, configPath } = configIn({ mcpServers: { notion: { url: server.url } } });
    mkdirSync(join(folder, 'secrets'));
    writeFileSync(join(folder, 'secrets', 'tok'), `notion='${testTokens.relative}'\n`, { mode: 0o600 });
    const result = await startAndStop(configPath, { EXTENSIBLE_MCP_TOKENS_FILE: 'secrets/tok' });
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(`tokens: ${join(folder, 'secrets', 'tok')} (EXTENSIBLE_MCP_TOKENS_FILE)`);
    expect(result.stderr).toContain('connected 1 of 1 servers: notion');
    expect(server.seen.map((request) => request.headers.authorization)).toContain(`Bearer ${testTokens.relative}`);
  });

  it('"~" expands to the home folder', async () => {
    const server = await fixture(testTokens.relative);
    const { folder: home } = configIn({});
    const { configPath } = configIn({ mcpServers: { notion: { url: server.url } } });
    writeFileSync(join(home, 'emcp-tokens'), `notion=${testTokens.relative}\n`, { mode: 0o600 });
    const result = await startAndStop(configPath, { HOME: home, EXTENSIBLE_MCP_TOKENS_FILE: '~/emcp-tokens' });
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(`tokens: ${join(home, 'emcp-tokens')} (EXTENSIBLE_MCP_TOKENS_FILE)`);
    expect(result.stderr).toContain('connected 1 of 1 servers: notion');
  });

  it('unset: the tokens file beside the config, logged even when absent', async () => {
    const { folder, configPath } = configIn({ mcpServers: {} });
    const result = await startAndStop(configPath, {});
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(`tokens: ${join(folder, 'tokens')}\n`);
  });
});
