/**
 * The composed household for the payment tests: `startHouseholdRuntime` on a fresh data folder,
 * the real shop as a stdio child, a real MCP client on the embedded proxy, and a software
 * authenticator per member enrolled through the real passkey ceremony with the start's codes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import type { Role, SessionRecord } from '../../identity/index';
import { readHouseholdEnv } from '../../lib/env';
import { createMemoryMockRailStore, createMockRail } from '../../lib/payments/mock-rail';
import type { ChargeRequest, PaymentRail } from '../../lib/payments/rail';
import { type HouseholdRuntime, type RuntimeOptions, startHouseholdRuntime } from '../../lib/runtime';
import { connectInMemory } from '../../proxy/index';
import { createSoftwareAuthenticator, type SoftwareAuthenticator } from '../identity/software-authenticator';
import { textOf } from '../proxy/helpers';

/** A member signed in with their own authenticator. */
export interface Member {
  readonly authenticator: SoftwareAuthenticator;
  readonly session: SessionRecord;
}

/** The household under test. */
export interface TestHousehold {
  readonly runtime: HouseholdRuntime;
  readonly client: Client;
  readonly dataDir: string;
  readonly members: Record<Role, Member>;
  /** Runs `search_tools` then `call_tool`, as a model would; returns the parsed JSON or the error text. */
  call(
    tool: string,
    args: Record<string, unknown>,
    query?: string,
  ): Promise<{ result: CallToolResult; json?: Record<string, unknown> }>;
  /** A merchant-signed invoice from the shop. */
  invoice(items: ReadonlyArray<{ sku: string; qty: number }>, deliverTo?: string): Promise<Record<string, unknown>>;
  /** `request_approval`, then every required role approves with its passkey. */
  approve(invoice: string, roles?: readonly Role[]): Promise<string>;
  /** The member's passkey yes to a request, straight through the approval window's ceremony. */
  approveAs(role: Role, approvalId: string): Promise<void>;
  /** One `sku` invoiced and approved by every required role: its ids and the evidence the household stored. */
  approved(sku: string): Promise<{ invoiceId: string; approvalId: string; evidence: Record<string, string> }>;
  /**
   * A cheese slice ($4.00) invoiced and approved by the child: its ids, and the arguments of the
   * charge that pays it with the evidence the household stored.
   */
  approvedSlice(): Promise<{ invoiceId: string; approvalId: string; args: Record<string, unknown> }>;
  close(): Promise<void>;
}

/**
 * The mock rail on memory, recording every charge request that reaches it (to prove none did, or
 * one). `declineWhen` declines with a code; each charge waits for `gate` before the rail answers.
 */
export function countingMockRail(
  options: { declineWhen?: (request: ChargeRequest) => string | undefined; gate?: Promise<void> } = {},
): { rail: PaymentRail; charges: ChargeRequest[] } {
  const charges: ChargeRequest[] = [];
  const inner = createMockRail({
    store: createMemoryMockRailStore(),
    ...(options.declineWhen === undefined ? {} : { declineWhen: options.declineWhen }),
  });
  return {
    charges,
    rail: {
      name: 'mock',
      async charge(request, chargeOptions) {
        charges.push(request);
        await options.gate;
        return inner.charge(request, chargeOptions);
      },
    },
  };
}

/** Starts a household on a new data folder (or `dataDir`), with the mock rail unless `rail` is given. */
export async function startTestHousehold(
  options: {
    engine?: 'rego' | 'cel';
    dataDir?: string;
    rail?: PaymentRail;
    afterRailCharge?: RuntimeOptions['afterRailCharge'];
    callTimeoutMs?: number;
    railTimeoutMs?: number;
    onEvent?: RuntimeOptions['onEvent'];
    enrol?: boolean;
    auditCheckpointEvery?: number;
    approvalPollMs?: number;
    /** More household environment (`PIZZA_URL`, `EXTENSIBLE_MCP_AUDIT_WITNESS_FILE`, …). */
    env?: Readonly<Record<string, string>>;
  } = {},
): Promise<TestHousehold> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'household-payments-')));
  const env = readHouseholdEnv({
    ...options.env,
    EXTENSIBLE_MCP_DATA: dataDir,
    EXTENSIBLE_MCP_POLICY_ENGINE: options.engine ?? 'rego',
  });
  const runtime = await startHouseholdRuntime({
    env,
    embeddings: false,
    ...(options.rail === undefined ? {} : { rail: options.rail }),
    ...(options.afterRailCharge === undefined ? {} : { afterRailCharge: options.afterRailCharge }),
    ...(options.callTimeoutMs === undefined ? {} : { callTimeoutMs: options.callTimeoutMs }),
    ...(options.railTimeoutMs === undefined ? {} : { railTimeoutMs: options.railTimeoutMs }),
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
    ...(options.auditCheckpointEvery === undefined ? {} : { auditCheckpointEvery: options.auditCheckpointEvery }),
    ...(options.approvalPollMs === undefined ? {} : { approvalPollMs: options.approvalPollMs }),
  });
  const client = await connectInMemory(runtime.gateway, { name: 'payments-test', principal: { id: 'test' } });
  const members = {} as Record<Role, Member>;
  if (options.enrol !== false) {
    for (const { role, code } of runtime.identity.codes) {
      const authenticator = createSoftwareAuthenticator({ origin: env.origin, rpId: env.rpId });
      const started = await runtime.identity.passkeys.registration.options({ code });
      if (!started.ok) throw new Error(started.reason);
      const enrolled = await runtime.identity.passkeys.registration.verify({
        ceremonyId: started.ceremonyId,
        response: authenticator.register(started.options),
      });
      if (!enrolled.verified) throw new Error(enrolled.reason);
      const session = await runtime.identity.passkeys.findSession(enrolled.session.token);
      if (!session) throw new Error('no session');
      members[role] = { authenticator, session };
    }
  }

  const household: TestHousehold = {
    runtime,
    client,
    dataDir,
    members,
    async call(tool, args, query) {
      await client.callTool({
        name: 'search_tools',
        arguments: { query: query ?? tool.replaceAll('_', ' '), top_k: 50 },
      });
      const result = (await client.callTool({
        name: 'call_tool',
        arguments: { tool_name: tool, arguments: args },
      })) as CallToolResult;
      const text = textOf(result);
      let json: Record<string, unknown> | undefined;
      if (!result.isError && text.startsWith('{')) json = JSON.parse(text) as Record<string, unknown>;
      return json === undefined ? { result } : { result, json };
    },
    async invoice(items, deliverTo = '12 Main St') {
      const { result, json } = await household.call(
        'pizza__request_invoice',
        { items, deliverTo },
        'pizza invoice order',
      );
      if (!json) throw new Error(`no invoice: ${textOf(result)}`);
      return json;
    },
    async approve(invoice, roles) {
      const { result, json } = await household.call('request_approval', { invoice }, 'request approval household');
      if (!json) throw new Error(`approval request refused: ${textOf(result)}`);
      const approvalId = String(json.approvalId);
      for (const role of roles ?? (json.requiredRoles as Role[])) await household.approveAs(role, approvalId);
      return approvalId;
    },
    async approveAs(role, approvalId) {
      const member = members[role];
      const started = await runtime.identity.passkeys.approval.options({ session: member.session, approvalId });
      if (!started.ok) throw new Error(started.reason);
      const approved = await runtime.identity.passkeys.approval.verify({
        session: member.session,
        ceremonyId: started.ceremonyId,
        response: member.authenticator.assert(started.options),
      });
      if (!approved.verified) throw new Error(approved.reason);
    },
    async approved(sku) {
      const { invoice, invoiceId } = (await household.invoice([{ sku, qty: 1 }])) as {
        invoice: string;
        invoiceId: string;
      };
      const approvalId = await household.approve(invoice);
      const { json } = await household.call('await_approval', { approvalId }, 'await approval');
      return { invoiceId, approvalId, evidence: json?.evidence as Record<string, string> };
    },
    async approvedSlice() {
      const { invoiceId, approvalId, evidence } = await household.approved('cheese-slice');
      const args = { invoiceId, amountCents: 400, merchantId: runtime.merchant?.did, ...evidence };
      return { invoiceId, approvalId, args };
    },
    async close() {
      await client.close();
      await runtime.close();
      if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true });
    },
  };
  return household;
}
