import { describe, expect, it } from 'vitest';
import type { CallFilter, CallRequest, SearchHit, ServerFacts } from '../gateway/types';
import { bundleRouter, createRouteResolver } from './bundle-router';
import { createHostBuiltins } from './host-builtins';
import { loadBundle } from './load-bundle';
import { policyAugmenter } from './policy-augmenter';

const admissions: Record<string, ServerFacts> = {
  bank: { name: 'bank', url: 'https://bank.example/mcp', admission: 'config' },
  EvilCase: { name: 'EvilCase', url: 'HTTPS://Evil.Example/mcp/', admission: 'runtime' },
  evilslash: { name: 'other', url: 'https://evil.example/mcp///', admission: 'runtime' },
  notes: { name: 'notes', url: 'https://notes.example/mcp', admission: 'runtime' },
  payments: { name: 'payments', admission: 'in-process' },
};
const marker =
  (label: string): CallFilter =>
  async () => ({ decision: 'deny', reason: label });
const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 's' } };
/** A call as the gateway stamps it: the server's admission facts, never a name to look up. */
const call = (server: string): CallRequest => ({
  tool: `${server}__t`,
  toolName: 't',
  server: admissions[server],
  arguments: {},
  hasOutputSchema: false,
  credentialFields: [],
});

describe('bundle router', () => {
  const resolve = createRouteResolver({
    routes: [
      { name: 'evilcase', bundle: 'banned' },
      { url: 'https://evil.example/mcp', bundle: 'banned' },
      { name: 'payments', admission: 'in-process', bundle: 'spend' },
    ],
    classifier: (facts) => (facts.name === 'payments' ? 'other' : facts.name === 'notes' ? 'spend' : undefined),
    unmapped: 'refuse',
  });
  const router = bundleRouter({ resolve, bundles: { spend: marker('spend'), other: marker('other') } });

  it('banned catches case and trailing-slash variants', async () => {
    expect(await router(call('EvilCase'), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('banned'),
    });
    expect(await router(call('evilslash'), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('banned'),
    });
  });

  it('the map wins over the classifier', async () => {
    expect(await router(call('payments'), context)).toEqual({ decision: 'deny', reason: 'spend' });
  });

  it('the classifier decides for servers the map does not name', async () => {
    expect(await router(call('notes'), context)).toEqual({ decision: 'deny', reason: 'spend' });
  });

  it('unmapped servers get the configured default', async () => {
    expect(await router(call('bank'), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('ungoverned'),
    });
    const passing = bundleRouter({
      resolve: createRouteResolver({ routes: [], unmapped: 'pass' }),
      bundles: {},
    });
    expect(await passing(call('bank'), context)).toEqual({ decision: 'allow' });
    const defaulted = bundleRouter({
      resolve: createRouteResolver({ routes: [], unmapped: { bundle: 'spend' } }),
      bundles: { spend: marker('spend') },
    });
    expect(await defaulted(call('bank'), context)).toEqual({ decision: 'deny', reason: 'spend' });
  });

  it('refuses a tool the gateway knows nothing about and a route to a bundle that is not loaded', async () => {
    expect((await router({ ...call('ghost'), toolName: undefined }, context)).decision).toBe('deny');
    const broken = bundleRouter({
      resolve: createRouteResolver({ routes: [{ name: 'bank', bundle: 'typo' }], unmapped: 'pass' }),
      bundles: {},
    });
    expect((await broken(call('bank'), context)).decision).toBe('deny');
  });
});

describe('policy augmenter', () => {
  it('adds credential parameters and sentences to governed tools without changing ranking', async () => {
    const bundle = await loadBundle({
      directory: new URL('../../policies/spend-limit', import.meta.url).pathname,
      builtins: createHostBuiltins(),
    });
    const resolve = createRouteResolver({
      routes: [{ name: 'bank', bundle: 'spend-limit' }],
      unmapped: 'pass',
    });
    const augment = policyAugmenter({ resolve, bundles: { 'spend-limit': bundle } });
    const hit = (name: string, server: string, score: number): SearchHit => ({
      name,
      toolName: name.split('__')[1] ?? name,
      server: admissions[server],
      description: 'Pays.',
      inputSchema: { type: 'object', properties: { amountCents: { type: 'integer' } }, required: ['amountCents'] },
      score,
      similarity: score,
    });
    const hits = [hit('bank__pay', 'bank', 0.9), hit('notes__add', 'notes', 0.5)];
    const result = await augment(hits, { query: 'pay', topK: 5 }, context);
    expect(result.map((entry) => [entry.name, entry.score])).toEqual([
      ['bank__pay', 0.9],
      ['notes__add', 0.5],
    ]);
    const pay = result[0];
    expect(Object.keys(pay?.inputSchema.properties ?? {})).toEqual([
      'amountCents',
      'requesterCredential',
      'approverCredential',
    ]);
    expect(pay?.inputSchema.required).toEqual(['amountCents', 'requesterCredential']);
    expect(pay?.description).toContain('Always provide `requesterCredential`');
    expect(pay?.description).toContain('also provide `approverCredential`');
    expect(result[1]).toBe(hits[1]);
  });
});
