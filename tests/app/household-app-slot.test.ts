import { afterEach, describe, expect, it, vi } from 'vitest';
import { GET as health } from '../../app/api/health/route';
import { readHouseholdEnv } from '../../lib/env';
import { bannerLines, createMcpEndpoint, getHouseholdApp, setHouseholdApp } from '../../lib/index';
import type { Gateway } from '../../proxy/index';
import { createFakeApp, createFakeChat, origin, request } from './fake-chat';

afterEach(() => {
  setHouseholdApp(undefined);
  vi.unstubAllEnvs();
});

describe('one household app per server process', () => {
  it('survives a re-evaluation of the module (dev-mode reload): the slot is on globalThis', async () => {
    // Were the slot lost, the reloaded module would start a household from the environment: an
    // invalid origin makes that start fail at once, touching nothing.
    vi.stubEnv('EXTENSIBLE_MCP_ORIGIN', 'not an origin');
    const app = createFakeApp(createFakeChat());
    setHouseholdApp(app);
    expect(await getHouseholdApp()).toBe(app);
    expect(getHouseholdApp()).toBe(getHouseholdApp());

    vi.resetModules();
    const reloaded = await import('../../lib/web/household-app');
    expect(reloaded.getHouseholdApp).not.toBe(getHouseholdApp);
    expect(await reloaded.getHouseholdApp()).toBe(app);
  });
});

describe('GET /api/health', () => {
  it('answers once the household app is up', async () => {
    setHouseholdApp(createFakeApp(createFakeChat()));
    const response = await health(request('/api/health', { method: 'GET' }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', searchMode: 'loading' });
  });

  it('is a 503 in words when the household did not start', async () => {
    vi.stubEnv('EXTENSIBLE_MCP_ORIGIN', 'not an origin');
    const errors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const response = await health(request('/api/health', { method: 'GET' }));
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ error: 'the household did not start; the server terminal says why' });
    errors.mockRestore();
  });
});

describe('the start banner', () => {
  it('names the URLs, the agent and the codes of roles without a passkey', () => {
    const lines = bannerLines({
      origin,
      planner: { kind: 'claude', model: 'claude-test' },
      codes: [{ role: 'parent', code: 'ABCD-EFGH' }],
    });
    expect(lines).toContain(`  Child window:  ${origin}/approve?as=child`);
    expect(lines).toContain(`  Parent window: ${origin}/approve?as=parent`);
    expect(lines).toContain('  Agent:         Claude (model claude-test)');
    expect(lines).toContain('  Enrollment code for parent: ABCD-EFGH');
    expect(lines.join('\n')).not.toContain('code for child');
  });
});

describe('the start banner with a kept code', () => {
  it('says a role whose earlier code is still live keeps it, and does not claim both roles have a passkey', () => {
    const lines = bannerLines({
      origin,
      planner: { kind: 'claude', model: 'claude-test' },
      codes: [],
      keptRoles: ['child'],
    });
    expect(lines.join('\n')).toContain('Enrollment code for child: the one printed earlier is still unused');
    expect(lines.join('\n')).not.toContain('Both roles have a passkey');
  });
});

describe('/mcp bearer token', () => {
  const gateway = {} as Gateway;
  const endpoint = createMcpEndpoint({ gateway, origin, tokens: [{ name: 'mcp', token: 'a-token-of-twenty-chars' }] });

  it.each([
    ['no Authorization header', undefined],
    ['another scheme', 'Basic a-token-of-twenty-chars'],
    ['a wrong token', 'Bearer a-token-of-twenty-chars!'],
    ['a prefix of the token', 'Bearer a-token'],
    ['an empty bearer', 'Bearer '],
  ])('refuses %s with 401 and a Bearer challenge, before the gateway is touched', async (_name, authorization) => {
    const response = await endpoint.handle(
      request('/mcp', {
        body: '{}',
        // A real request carries its Host, which the handler checks first (DNS rebinding).
        headers: { host: new URL(origin).host, ...(authorization === undefined ? {} : { authorization }) },
      }),
    );
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="extensible-mcp"');
  });
});

describe('the app environment', () => {
  const pick = ({ httpToken, anthropicApiKey, anthropicModel }: ReturnType<typeof readHouseholdEnv>) => ({
    httpToken,
    anthropicApiKey,
    anthropicModel,
  });

  it('reads the /mcp token and the Claude settings; blank means unset', () => {
    const unset = { httpToken: undefined, anthropicApiKey: undefined, anthropicModel: undefined };
    expect(pick(readHouseholdEnv({}))).toEqual(unset);
    expect(pick(readHouseholdEnv({ EXTENSIBLE_MCP_HTTP_TOKEN: '  ', ANTHROPIC_API_KEY: '' }))).toEqual(unset);
    expect(
      pick(
        readHouseholdEnv({ EXTENSIBLE_MCP_HTTP_TOKEN: 'x'.repeat(16), ANTHROPIC_API_KEY: 'k', ANTHROPIC_MODEL: 'm' }),
      ),
    ).toEqual({ httpToken: 'x'.repeat(16), anthropicApiKey: 'k', anthropicModel: 'm' });
  });

  it('refuses a short token, naming the variable, and never echoes a Stripe key', () => {
    expect(() => readHouseholdEnv({ EXTENSIBLE_MCP_HTTP_TOKEN: 'short' })).toThrow(/EXTENSIBLE_MCP_HTTP_TOKEN/);
    expect(() => readHouseholdEnv({ STRIPE_SECRET_KEY: 'sk_live_secret123' })).toThrow(/STRIPE_SECRET_KEY/);
    try {
      readHouseholdEnv({ STRIPE_SECRET_KEY: 'sk_live_secret123' });
    } catch (error) {
      expect(String(error)).not.toContain('sk_live_secret123');
    }
  });
});
