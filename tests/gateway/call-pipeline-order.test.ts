import { afterEach, describe, expect, it } from 'vitest';
import {
  type CallFilter,
  type CallRequest,
  connectInMemory,
  createRouteResolver,
  type GatewayOptions,
  type ProxyEvent,
} from '../../proxy/index';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { bankServer, cleanupStack, loadSpendLimit, startedGateway } from './support';

// SPEC §3.6: call pipeline = access control → discovery gate → rego_policy → extra filters →
// bundle router. Observed through a real SDK client, from the events and from recording filters.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

interface Recorded {
  readonly filter: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

async function setup(options: { regoDenies?: boolean; accessDeny?: readonly string[] } = {}) {
  const invoked: Recorded[] = [];
  const received: unknown[] = [];
  const events: ProxyEvent[] = [];
  const record = (filter: string, request: CallRequest) =>
    invoked.push({ filter, arguments: { ...request.arguments } });
  const regoPolicy: CallFilter = function regoPolicy(request) {
    record('regoPolicy', request);
    return options.regoDenies
      ? { decision: 'deny', reason: 'Refused by the configured Rego policy: payments are paused.' }
      : { decision: 'allow' };
  };
  const tagAmount: CallFilter = function tagAmount(request) {
    record('tagAmount', request);
    // A rewrite: the filters after this one (and the router) must see the new arguments.
    return { decision: 'allow', request: { ...request, arguments: { ...request.arguments, memo: 'tagged' } } };
  };
  const observe: CallFilter = function observe(request) {
    record('observe', request);
    return { decision: 'allow' };
  };
  const governed: CallFilter = function governed(request) {
    record('governed', request);
    return { decision: 'allow' };
  };
  const gatewayOptions: GatewayOptions = {
    servers: { bank: { kind: 'in-process', server: bankServer({ received }) } },
    regoPolicy,
    extraCallFilters: [tagAmount, observe],
    governance: {
      resolve: createRouteResolver({ routes: [{ name: 'bank', bundle: 'spend-limit' }], unmapped: 'pass' }),
      bundles: { 'spend-limit': { bundle: await loadSpendLimit(), filter: governed } },
    },
    onEvent: (event) => events.push(event),
    ...(options.accessDeny && { accessControl: { deny: options.accessDeny } }),
  };
  const gateway = await startedGateway(cleanups, gatewayOptions);
  const client = await connectInMemory(gateway, { principal: { id: 'test' } });
  cleanups.push(() => client.close());
  const callEvents = () =>
    events.filter((event) => event.pipeline === 'call').map((event) => [event.filter, event.decision]);
  return { client, invoked, received, callEvents };
}

const payment = { amountCents: 500, payee: 'did:web:pizza.example' };

describe('call pipeline order (SPEC §3.6)', () => {
  it('runs access control, discovery gate, rego_policy, extra filters, then the bundle router', async () => {
    const { client, invoked, received, callEvents } = await setup();
    expect(await searchNames(client, 'pay an amount to a payee')).toContain('bank__pay');
    expect(textOf(await callTool(client, 'bank__pay', payment))).toBe('paid');
    expect(callEvents()).toEqual([
      ['accessControl', 'allow'],
      ['discoveryGate', 'allow'],
      ['regoPolicy', 'allow'],
      ['tagAmount', 'rewrite'],
      ['observe', 'allow'],
      ['bundleRouter', 'allow'],
    ]);
    expect(invoked.map((entry) => entry.filter)).toEqual(['regoPolicy', 'tagAmount', 'observe', 'governed']);
    expect(received).toEqual([{ ...payment, memo: 'tagged' }]);
  });

  it('rego_policy sees the call as the model made it, before any extra filter rewrote it', async () => {
    const { client, invoked } = await setup();
    await searchNames(client, 'pay an amount to a payee');
    await callTool(client, 'bank__pay', payment);
    expect(invoked.find((entry) => entry.filter === 'regoPolicy')?.arguments).toEqual(payment);
  });

  it('the router hands its bundle the request as the extra filters rewrote it', async () => {
    const { client, invoked } = await setup();
    await searchNames(client, 'pay an amount to a payee');
    await callTool(client, 'bank__pay', payment);
    expect(invoked.find((entry) => entry.filter === 'governed')?.arguments).toEqual({ ...payment, memo: 'tagged' });
  });

  it('a rego_policy deny stops the chain: no extra filter, no router, no downstream', async () => {
    const { client, invoked, received, callEvents } = await setup({ regoDenies: true });
    await searchNames(client, 'pay an amount to a payee');
    const refused = await callTool(client, 'bank__pay', payment);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe('Refused by the configured Rego policy: payments are paused.');
    expect(invoked.map((entry) => entry.filter)).toEqual(['regoPolicy']);
    expect(callEvents()).toEqual([
      ['accessControl', 'allow'],
      ['discoveryGate', 'allow'],
      ['regoPolicy', 'deny'],
    ]);
    expect(received).toEqual([]);
  });

  it('an undiscovered tool is denied by the discovery gate before rego_policy runs', async () => {
    const { client, invoked, received, callEvents } = await setup();
    const refused = await callTool(client, 'bank__pay', payment);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/has not been discovered in this session/);
    expect(callEvents()).toEqual([
      ['accessControl', 'allow'],
      ['discoveryGate', 'deny'],
    ]);
    expect(invoked).toEqual([]);
    expect(received).toEqual([]);
  });

  it('access control refuses a denied tool before the discovery gate is consulted', async () => {
    const { client, invoked, received, callEvents } = await setup({ accessDeny: ['bank__pay'] });
    expect(await searchNames(client, 'pay an amount to a payee')).not.toContain('bank__pay');
    const refused = await callTool(client, 'bank__pay', payment);
    expect(textOf(refused)).toMatch(/blocked by access control/);
    expect(callEvents()).toEqual([['accessControl', 'deny']]);
    expect(invoked).toEqual([]);
    expect(received).toEqual([]);
  });
});
