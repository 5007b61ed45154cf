import { describe, expect, it } from 'vitest';
import type { IdentityEvent } from '../identity/index';
import { createEventBus, fromIdentityEvent, fromProxyEvent, HouseholdEvent } from './events';

describe('the household event bus', () => {
  it('fans a valid event out to every listener, even past one that throws', async () => {
    const errors: Error[] = [];
    const bus = createEventBus({ onInvalid: (error) => errors.push(error) });
    const seen: string[] = [];
    bus.subscribe(() => {
      throw new Error('listener fault');
    });
    bus.subscribe((event) => seen.push(event.kind));
    bus.emit({ source: 'payments', kind: 'charge-started', outcome: 'info', message: 'charging $4.00' });
    await bus.flush();
    expect(seen).toEqual(['charge-started']);
    expect(errors.map((error) => error.message)).toEqual(['listener fault']);
  });

  it('record throws when a required listener fails, before any other listener sees the event; emit never does', async () => {
    const bus = createEventBus();
    const seen: string[] = [];
    let failing = true;
    bus.subscribe((event) => seen.push(`other ${event.kind}`));
    bus.subscribe(
      (event) => {
        if (failing) throw new Error('disk full');
        seen.push(`audit ${event.kind}`);
      },
      { required: true },
    );
    const decision = { source: 'proxy', kind: 'policy-decision', outcome: 'allow', message: 'allowed' } as const;
    await expect(bus.record(decision)).rejects.toThrow('the policy-decision event could not be recorded');
    expect(seen).toEqual([]);
    bus.emit(decision);
    await bus.flush();
    expect(seen).toEqual(['other policy-decision']);
    failing = false;
    seen.length = 0;
    await bus.record(decision);
    expect(seen).toEqual(['audit policy-decision', 'other policy-decision']);
  });

  it('refuses a record whose row failed while an earlier one is still being taken, and fans out neither early', async () => {
    const bus = createEventBus();
    const seen: string[] = [];
    let release: () => void = () => undefined;
    const slow = new Promise<void>((resolve) => {
      release = resolve;
    });
    bus.subscribe(
      async (event) => {
        if (event.message === 'slow') await slow;
        else throw new Error('disk full');
      },
      { required: true },
    );
    bus.subscribe((event) => {
      seen.push(`live ${event.message}`);
    });
    bus.emit({ source: 'proxy', kind: 'policy-decision', outcome: 'allow', message: 'slow' });
    const refused = bus.record({ source: 'proxy', kind: 'policy-decision', outcome: 'allow', message: 'failed' });
    // The failure settles first; it is still the record's, once the slow row is through.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(seen).toEqual([]);
    release();
    await expect(refused).rejects.toThrow('the policy-decision event could not be recorded');
    expect(seen).toEqual(['live slow']);
  });

  it('hands events to a required listener at once and in order, and fans each out after it took it, in emission order', async () => {
    const bus = createEventBus();
    const seen: string[] = [];
    const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
    bus.subscribe(
      async (event) => {
        seen.push(`audit takes ${event.message}`);
        // The first event's write is the slowest: the live listeners must still see it first.
        await turn();
        if (event.message === '1') await turn();
        seen.push(`audit took ${event.message}`);
      },
      { required: true },
    );
    bus.subscribe((event) => {
      seen.push(`live ${event.message}`);
    });
    const recorded = bus.record({ source: 'proxy', kind: 'policy-decision', outcome: 'allow', message: '1' });
    bus.emit({ source: 'proxy', kind: 'policy-decision', outcome: 'allow', message: '2' });
    // Both handed over before either settled (the audit table commits a burst together), in order.
    expect(seen).toEqual(['audit takes 1', 'audit takes 2']);
    await recorded;
    expect(seen).toEqual(['audit takes 1', 'audit takes 2', 'audit took 2', 'audit took 1', 'live 1']);
    await bus.flush();
    expect(seen.slice(5)).toEqual(['live 2']);
  });

  it('drops an event that breaks the schema, and says why', async () => {
    const errors: Error[] = [];
    const bus = createEventBus({ onInvalid: (error) => errors.push(error) });
    const seen: unknown[] = [];
    bus.subscribe((event) => seen.push(event));
    bus.emit({ source: 'payments', kind: 'Charge Started', outcome: 'info', message: 'x' });
    bus.emit({
      source: 'payments',
      kind: 'charge-started',
      outcome: 'info',
      message: 'x',
      secret: 'sk_test_1',
    } as never);
    await bus.flush();
    expect(seen).toEqual([]);
    expect(errors).toHaveLength(2);
  });

  it('maps every identity event and a proxy decision to a valid event', () => {
    const identityEvents: IdentityEvent[] = [
      { kind: 'enrollment-code-issued', role: 'parent' },
      { kind: 'enrollment-refused', reason: 'wrong code' },
      { kind: 'passkey-enrolled', role: 'child', memberDid: 'did:key:z6Mk', credentialId: 'abc' },
      { kind: 'sign-in-succeeded', role: 'child', credentialId: 'abc' },
      { kind: 'passkey-refused', ceremony: 'approval', reason: 'counter went backwards' },
      {
        kind: 'approval-created',
        approvalId: 'a',
        invoiceId: 'urn:uuid:1',
        totalCents: 1500,
        requiredRoles: ['child', 'parent'],
      },
      { kind: 'approval-refused', reason: 'untrusted merchant' },
      { kind: 'approval-approved', approvalId: 'a', invoiceId: 'urn:uuid:1', role: 'child', complete: false },
      { kind: 'approval-declined', approvalId: 'a', invoiceId: 'urn:uuid:1', role: 'parent' },
      { kind: 'approval-expired', approvalId: 'a', invoiceId: 'urn:uuid:1' },
      { kind: 'approval-settled', approvalId: 'a', invoiceId: 'urn:uuid:1' },
      { kind: 'approval-fulfilled', approvalId: 'a', invoiceId: 'urn:uuid:1' },
    ];
    const at = new Date().toISOString();
    for (const event of identityEvents) {
      const mapped = HouseholdEvent.parse({ at, ...fromIdentityEvent(event) });
      // Every event about an order names it, so the live log can filter by order.
      if ('invoiceId' in event) expect(mapped.orderId, event.kind).toBe(event.invoiceId);
    }
    expect(fromIdentityEvent({ kind: 'enrollment-code-issued', role: 'parent' }).message).toBe(
      'enrollment code issued for parent — see terminal',
    );
    const decision = fromProxyEvent({
      ts: at,
      principal: 'chat:abc',
      scope: 'Q2hhdFNjb3BlRGln',
      pipeline: 'call',
      filter: 'discoveryGate',
      tool: 'payments__charge_invoice',
      decision: 'deny',
      reason: 'not discovered',
      durationUs: 12,
    });
    expect(HouseholdEvent.parse({ at, ...decision })).toMatchObject({
      kind: 'call-decision',
      outcome: 'deny',
      session: 'Q2hhdFNjb3BlRGln',
      data: { principal: 'chat:abc' },
    });
  });

  it('turns a held tool into a tool-held event naming what moved and both hashes', () => {
    const at = '2026-01-01T00:00:00.000Z';
    const held = fromProxyEvent({
      ts: at,
      principal: 'operator',
      scope: 'none',
      pipeline: 'listing',
      filter: 'toolPins',
      tool: 'shop__order',
      decision: 'deny',
      reason: 'tool-held: changed',
      durationUs: 0,
      held: {
        server: 'shop',
        tool: 'order',
        reason: 'changed',
        diff: [{ path: '/description', change: 'changed' }],
        hashes: { pinned: 'a'.repeat(64), listed: 'b'.repeat(64) },
      },
    });
    expect(HouseholdEvent.parse({ at, ...held })).toMatchObject({
      kind: 'tool-held',
      outcome: 'deny',
      data: { server: 'shop', tool: 'order', reason: 'changed', changed: ['/description'], pinned: 'a'.repeat(64) },
    });
  });
});
