import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import {
  FIXTURE_NOW,
  FIXTURE_PAYEE,
  fixtureParty,
  spendCredential,
  spendLimitTrust,
} from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import {
  createGateway,
  createHostBuiltins,
  createRouteResolver,
  type EvidenceStore,
  type Gateway,
  loadBundle,
  openSqliteEvidenceStore,
  policyFilter,
  type ResolveInDoubt,
  singleUseFilter,
} from '../../proxy/index';
import { callTool, connectClient, memoryLogger } from '../proxy/helpers';

/**
 * A payment rail downstream for the settlement tests (SPEC §4.7): a real MCP server object linked
 * in-process, whose `pay` tool the test makes succeed, decline, fail with a protocol error or hang,
 * and which counts every call it really ran.
 */

const directory = new URL('../../policies/spend-limit', import.meta.url).pathname;
const requester = fixtureParty('requester');
const approver = fixtureParty('approver');
/** The spend-limit clock: every fixture credential is valid at it. */
export const POLICY_NOW_MS = FIXTURE_NOW * 1000;
/** The qualified name the model calls. */
export const PAY_TOOL = 'rail__pay';
/** The arguments whose credential fields are evidence. */
export const EVIDENCE_FIELDS = ['requesterCredential', 'approverCredential'] as const;

/** How the rail answers its next calls. */
export type RailMode = 'succeed' | 'decline' | 'error' | 'hang';

/** A promise with its resolver, to wait on events instead of sleeping. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

/** A new {@link Deferred}. */
export function deferred<T = void>(): Deferred<T> {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** The rail's controls and what it saw. */
export interface PayRail {
  readonly server: Server;
  /** What the next call does. */
  mode: RailMode;
  /** Every call that reached the rail, in order (the arguments it received). */
  readonly calls: Record<string, unknown>[];
  /** Resolves with the call number as each call starts (index n resolves when call n+1 arrives). */
  readonly started: Deferred<number>[];
  /** When set, the first successful call waits for it before answering. */
  holdFirst?: Promise<void>;
  /** Lets every hung call finish (cleanup). */
  releaseHung(): void;
}

/** The receipt text of the rail's n-th call. */
export function receiptText(call: number): string {
  return `receipt #${call}`;
}

/** A rail whose `pay(amountCents, payee)` answers per its `mode`. */
export function payRail(): PayRail {
  const hung = deferred();
  const server = new Server({ name: 'rail', version: '1.0.0' }, { capabilities: { tools: {} } });
  const rail: PayRail = {
    server,
    mode: 'succeed',
    calls: [],
    started: Array.from({ length: 100 }, () => deferred<number>()),
    releaseHung: () => hung.resolve(),
  };
  server.setRequestHandler('tools/list', () => ({
    tools: [
      {
        name: 'pay',
        description: 'Pay an amount in cents to a payee',
        inputSchema: {
          type: 'object',
          properties: { amountCents: { type: 'integer' }, payee: { type: 'string' } },
          required: ['amountCents', 'payee'],
        },
      },
    ],
  }));
  server.setRequestHandler('tools/call', async (request): Promise<CallToolResult> => {
    rail.calls.push({ ...request.params.arguments });
    const number = rail.calls.length;
    rail.started[number - 1]?.resolve(number);
    switch (rail.mode) {
      case 'decline':
        return { content: [{ type: 'text', text: 'card declined' }], isError: true };
      case 'error':
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'the rail refused the request (400)');
      case 'hang':
        await hung.promise;
        return { content: [{ type: 'text', text: 'too late' }] };
      case 'succeed':
        if (number === 1 && rail.holdFirst) await rail.holdFirst;
        return { content: [{ type: 'text', text: receiptText(number) }], structuredContent: { receipt: number } };
    }
  });
  return rail;
}

/** A requester credential for `amountCents`, with the given `jti`. */
export function payCredential(amountCents: number, jti: string): string {
  return spendCredential({ issuer: requester, type: 'SpendRequest', amountCents, jti });
}

/** Honest arguments of a $`amountCents / 100` payment to the fixture payee. */
export function payArguments(amountCents: number, jti: string): Record<string, unknown> {
  return { amountCents, payee: FIXTURE_PAYEE, requesterCredential: payCredential(amountCents, jti) };
}

/** What {@link governedRail} started. */
export interface GovernedRail {
  readonly gateway: Gateway;
  /** A real SDK client that has already discovered `rail__pay`. */
  readonly client: Client;
  readonly rail: PayRail;
  readonly store: EvidenceStore;
  /** The filter's clock (milliseconds); move it to show nothing is freed by time. */
  readonly clock: { ms: number };
  /** What the evidence filter reported as faults (its `onError`). */
  readonly faults: unknown[];
  pay(args: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/**
 * The spend-limit bundle gating the rail through the real gateway, with single-use evidence spent
 * on success (`spend: 'on-success'`) on a SQLite file (fresh, or `path`).
 */
export async function governedRail(
  options: {
    readonly path?: string;
    readonly callTimeoutMs?: number;
    readonly resolveInDoubt?: ResolveInDoubt;
    readonly clockMs?: number;
  } = {},
): Promise<GovernedRail> {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-settlement-'));
  const store = openSqliteEvidenceStore({ path: options.path ?? join(folder, 'evidence.sqlite'), capacity: 1_000 });
  const bundle = await loadBundle({ directory, builtins: createHostBuiltins(), engine: 'rego' });
  const clock = { ms: options.clockMs ?? POLICY_NOW_MS };
  const rail = payRail();
  const faults: unknown[] = [];
  const filter = singleUseFilter({
    spend: 'on-success',
    inner: policyFilter({ bundle, config: { trust: spendLimitTrust(requester, approver) }, now: () => POLICY_NOW_MS }),
    store,
    evidenceFields: EVIDENCE_FIELDS,
    now: () => clock.ms,
    onError: (error) => faults.push(error),
    ...(options.resolveInDoubt && { resolveInDoubt: options.resolveInDoubt }),
  });
  const gateway = createGateway({
    servers: { rail: { kind: 'in-process', server: rail.server } },
    embeddings: false,
    logger: memoryLogger(),
    callTimeoutMs: options.callTimeoutMs ?? 30_000,
    governance: {
      resolve: createRouteResolver({ routes: [{ name: 'rail', bundle: 'spend-limit' }], unmapped: 'refuse' }),
      bundles: { 'spend-limit': { bundle, filter } },
    },
  });
  await gateway.start();
  const client = await connectClient(gateway);
  await client.callTool({ name: 'search_tools', arguments: { query: 'pay an amount to a payee' } });
  return {
    gateway,
    client,
    rail,
    store,
    clock,
    faults,
    pay: (args) => callTool(client, PAY_TOOL, args),
    async close() {
      rail.releaseHung();
      await client.close();
      await gateway.close();
      await store.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
