import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The images' HEALTHCHECK (deploy/healthcheck.mjs through deploy/steps.sh), against a loopback
// server that answers as told: the app is healthy only when the household is up AND tool search
// is hybrid; an app on keyword search (no model) stays unhealthy, so the shop never starts.
const root = fileURLToPath(new URL('../..', import.meta.url));
let answer: { status: number; body: string } = { status: 200, body: '{}' };
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((_request, response) => {
    response.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function check(
  step: 'healthcheck-app' | 'healthcheck-shop',
  url = base,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['deploy/steps.sh', step, url], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.once('exit', (code) => resolve({ code, output: output.trim() }));
  });
}

describe('the healthchecks', () => {
  it('the app is healthy when the household is up and search is hybrid', async () => {
    answer = { status: 200, body: JSON.stringify({ status: 'ok', searchMode: 'hybrid' }) };
    expect(await check('healthcheck-app')).toEqual({ code: 0, output: 'healthy: app' });
  });

  it.each([
    ['lexical search (no model)', 200, { status: 'ok', searchMode: 'lexical' }, /tool search is lexical, not hybrid/],
    ['the model still loading', 200, { status: 'ok', searchMode: 'loading' }, /tool search is loading, not hybrid/],
    ['a household that did not start', 503, { error: 'the household did not start' }, /HTTP 503/],
    ['an answer without a status', 200, { searchMode: 'hybrid' }, /the household is not up/],
  ])('the app is unhealthy with %s', async (_name, status, body, reason) => {
    answer = { status, body: JSON.stringify(body) };
    const result = await check('healthcheck-app');
    expect(result.code).toBe(1);
    expect(result.output).toMatch(reason);
  });

  it('the app is unhealthy when nothing answers', async () => {
    const result = await check('healthcheck-app', 'http://127.0.0.1:1');
    expect(result.code).toBe(1);
    expect(result.output).toMatch(/^unhealthy: /);
  });

  it('the shop is healthy when /healthz says ok, and only then', async () => {
    answer = { status: 200, body: JSON.stringify({ ok: true }) };
    expect(await check('healthcheck-shop')).toEqual({ code: 0, output: 'healthy: shop' });
    answer = { status: 200, body: JSON.stringify({ ok: false }) };
    expect((await check('healthcheck-shop')).code).toBe(1);
    answer = { status: 403, body: '{}' };
    expect((await check('healthcheck-shop')).code).toBe(1);
  });
});
