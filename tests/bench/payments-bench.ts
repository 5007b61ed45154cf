import { createHash, createPublicKey, type JsonWebKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createAllowances, type PasskeyRecord, type Role } from '../../identity/index';
import { readHouseholdEnv } from '../../lib/env';
import { familySpendLookups } from '../../lib/payments/family-spend-lookups';
import {
  type CallContext,
  type CallRequest,
  createHostBuiltins,
  createPostgresEvidenceStore,
  type EvidenceStore,
  type HostBuiltins,
  loadBundle,
  openPostgresPool,
  openSqliteEvidenceStore,
  policyFilter,
  postgresEvidenceStoreMigrations,
  singleUseFilter,
} from '../../proxy/index';
import { freePort } from '../e2e/support/app-server';
import { assertCall } from '../identity/call-approval-support';
import { type Member, startTestHousehold, type TestHousehold } from '../payments/household';
import { type HttpShop, startHttpShop } from '../security/fixtures/http-shop';
import { startThrowawayPostgres } from '../support/throwaway-postgres';
import {
  clusterCpuSeconds,
  descendantsCpuSeconds,
  type Latency,
  measure,
  measureInterleaved,
  statFields,
  summarise,
} from './measure';

interface Evidence {
  generatedAt: string;
  webauthn: { rpId: string; origin: string };
  household: {
    adminDid: string;
    adminDocument: { verificationMethod: { publicKeyJwk: Record<string, string> }[] };
    members: Record<Role, string>;
    memberships: Record<Role, string>;
  };
  merchant: { did: string; publicKeyJwk: Record<string, string> };
  enrollments: Record<Role, { credentialId: string; enrollment: string }>;
  orders: { invoiceId: string; totalCents: number; invoice: string; childApproval: string; parentApproval?: string }[];
}

/**
 * The signatures a decision verifies, recorded from its host builtins, and the same
 * verifications done with bare `node:crypto` (keys imported beforehand): the floor no policy
 * code can go under on this machine. Measured beside the decision, it separates the machine's
 * cost of the cryptography from everything the project adds.
 */
function signatureFloor(builtins: HostBuiltins) {
  const checks: {
    algorithm: string | null;
    data: Buffer;
    key: ReturnType<typeof createPublicKey>;
    signature: Buffer;
  }[] = [];
  // Rego hands the key over as JSON text, CEL as a `Map`.
  const key = (jwk: unknown) => {
    const value = typeof jwk === 'string' ? JSON.parse(jwk) : jwk instanceof Map ? Object.fromEntries(jwk) : jwk;
    return createPublicKey({ key: value as JsonWebKey, format: 'jwk' });
  };
  let recording = true;
  const recorded: HostBuiltins = {
    ...builtins,
    jwtVerifyEddsa(jws, jwk) {
      const valid = builtins.jwtVerifyEddsa(jws, jwk);
      if (valid && recording) {
        const [header, payload, signature] = String(jws).split('.');
        const data = Buffer.from(`${header}.${payload}`, 'ascii');
        checks.push({ algorithm: null, data, key: key(jwk), signature: Buffer.from(signature ?? '', 'base64url') });
      }
      return valid;
    },
    verifyWebauthn(authenticatorData, clientDataJson, signature, jwk) {
      const valid = builtins.verifyWebauthn(authenticatorData, clientDataJson, signature, jwk);
      if (valid && recording) {
        const clientDataHash = createHash('sha256')
          .update(Buffer.from(String(clientDataJson), 'base64url'))
          .digest();
        const data = Buffer.concat([Buffer.from(String(authenticatorData), 'base64url'), clientDataHash]);
        checks.push({
          algorithm: 'sha256',
          data,
          key: key(jwk),
          signature: Buffer.from(String(signature), 'base64url'),
        });
      }
      return valid;
    },
  };
  return {
    builtins: recorded,
    /** Stops recording after one decision; returns how many signatures it verified. */
    freeze(): number {
      recording = false;
      return checks.length;
    },
    verifyAll() {
      for (const check of checks) {
        const valid =
          check.algorithm === null
            ? verify(null, check.data, check.key, check.signature)
            : verify(check.algorithm, check.data, { key: check.key, dsaEncoding: 'der' }, check.signature);
        if (!valid) throw new Error('a recorded signature did not verify');
      }
    },
  };
}

/**
 * The fully gated charge decision (SPEC §13) on the committed $15 evidence: single-use reserve →
 * fetch-plan lookups → every signature (invoice, two approvals, two memberships, two enrollments,
 * two passkey assertions) → policy → release, on both engines. `everySignature` verifies all of
 * them each time; `rememberedSignatures` lets the host remember valid EdDSA signatures, as a
 * running household does for its long-lived memberships and enrollments. `everySignature` is
 * measured in alternation with its signature floor (the same nine verifications, bare).
 */
async function gatedDecision(
  engine: 'rego' | 'cel',
  rememberVerified: boolean,
  folder: string,
  evidenceStore?: () => Promise<EvidenceStore>,
): Promise<Latency & { floor?: { signatures: number; bareVerification: Latency } }> {
  const { decide, floor, signatures } = await gatedDecider(engine, rememberVerified, folder, evidenceStore);
  // Remembered signatures are not verified again, so only the every-signature decision has this floor.
  if (rememberVerified) return measure(decide, { iterations: 1_000, warmup: 50 });
  const { decision, bareSignatures } = await measureInterleaved(
    { decision: decide, bareSignatures: async () => floor.verifyAll() },
    { iterations: 1_000, warmup: 50 },
  );
  return { ...decision, floor: { signatures, bareVerification: bareSignatures } };
}

/**
 * Today's gated decision, ready to measure: one decision made (and its nine signatures counted),
 * then `decide` makes the same one again, releasing the evidence each time.
 */
async function gatedDecider(
  engine: 'rego' | 'cel',
  rememberVerified: boolean,
  folder: string,
  evidenceStore: () => Promise<EvidenceStore> = async () =>
    openSqliteEvidenceStore({ path: join(folder, `${engine}-${rememberVerified}.sqlite`), capacity: 1000 }),
) {
  const evidence = JSON.parse(
    readFileSync(new URL('../../identity/fixtures/evidence.json', import.meta.url), 'utf8'),
  ) as Evidence;
  const order = evidence.orders[1];
  if (!order?.parentApproval) throw new Error('the fixture has no $15 order');
  const passkeys = new Map(
    (['child', 'parent'] as const).map((role) => [
      evidence.enrollments[role].credentialId,
      { role, enrollment: evidence.enrollments[role].enrollment } as unknown as PasskeyRecord,
    ]),
  );
  const store = {
    passkeys: { get: async (id: string) => passkeys.get(id) },
    merchants: {
      list: async () => [
        { did: evidence.merchant.did, name: 'Pizza Shop', publicKeyJwk: evidence.merchant.publicKeyJwk, trustedAt: 0 },
      ],
    },
  } as unknown as Parameters<typeof familySpendLookups>[0]['store'];
  const now = () => new Date(evidence.generatedAt).getTime();
  const floor = signatureFloor(createHostBuiltins({ webauthn: { rpId: evidence.webauthn.rpId }, rememberVerified }));
  const bundle = await loadBundle({
    directory: new URL('../../policies/family-spend', import.meta.url).pathname,
    builtins: floor.builtins,
    engine,
  });
  const filter = singleUseFilter({
    inner: policyFilter({
      bundle,
      config: {
        household: {
          adminDid: evidence.household.adminDid,
          adminJwk: evidence.household.adminDocument.verificationMethod[0]?.publicKeyJwk,
        },
        webauthn: evidence.webauthn,
      },
      resolvers: familySpendLookups({ household: evidence.household, store }),
      now,
    }),
    store: await evidenceStore(),
    evidenceFields: ['invoice', 'childApproval', 'parentApproval'],
    spend: 'on-success',
    now,
  });
  const request: CallRequest = {
    tool: 'payments__charge_invoice',
    toolName: 'charge_invoice',
    server: { name: 'payments', admission: 'in-process' },
    arguments: {
      invoiceId: order.invoiceId,
      amountCents: order.totalCents,
      merchantId: evidence.merchant.did,
      invoice: order.invoice,
      childApproval: order.childApproval,
      parentApproval: order.parentApproval,
    },
    hasOutputSchema: false,
    credentialFields: ['invoice', 'childApproval', 'parentApproval'],
  };
  const context: CallContext = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 'bench' } };
  const decide = async () => {
    const verdict = await filter(request, context);
    if (verdict.decision !== 'allow' || !verdict.wrap) throw new Error('the gated decision did not allow');
    // A reported failure releases the evidence, so the next decision starts from the same state.
    await verdict.wrap(async () => ({ status: 'failed', reason: 'bench' }));
  };
  await decide();
  const signatures = floor.freeze();
  if (signatures !== 9) throw new Error(`the $15 decision verified ${signatures} signatures, not 9`);
  return { decide, floor, signatures };
}

/**
 * The gated decision on a $4.00 order that the parent's standing allowance covers (issue 29), ready
 * to measure: the same single-use reserve → fetch-plan lookups → family-spend policy → release as
 * {@link gatedDecider}, with the child's approval and the allowance (the household's signature, the
 * parent's membership, enrollment and passkey assertion over the terms' hash, and the period's spend
 * read from the store) in place of the parent's approval. On a real household (SQLite), every
 * signature verified every time. One decision is made first and its signatures counted: nine, as
 * with the parent's approval; the same order on the child's solo tier would verify five, so a
 * decision that stopped reading the allowance cannot be measured in its place. `hold` is the
 * settlement's spend of that order on the allowance (the chain verified again, then the budget in
 * one `BEGIN IMMEDIATE` transaction), released each time.
 */
async function allowanceDecider(engine: 'rego' | 'cel') {
  const household = await startTestHousehold({ engine });
  try {
    const { runtime } = household;
    const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: household.dataDir });
    const identity = runtime.identity;
    const allowances = createAllowances({
      household: identity.household,
      store: identity.store.allowances,
      origin: env.origin,
      rpId: env.rpId,
    });
    const drafted = allowances.draft({
      merchantDid: runtime.merchant?.did ?? '',
      merchantName: 'Main Street Pizza',
      perOrderCapCents: 500,
      budgetCents: 1000,
      period: 'day',
      timeZone: 'Europe/Paris',
      expiresAt: Math.floor(Date.now() / 1000) + 30 * 24 * 60 * 60,
    });
    if (!drafted.ok) throw new Error(drafted.reason);
    const issued = await allowances.issue({
      terms: drafted.terms,
      assertion: assertCall(household.members.parent.authenticator, drafted.termsHash),
    });
    if (!issued.ok) throw new Error(issued.reason);
    const slice = await household.approvedSlice();
    if ('parentApproval' in slice.args) throw new Error('the allowance order carries a parent approval');
    const floor = signatureFloor(createHostBuiltins({ webauthn: { rpId: env.rpId } }));
    const bundle = await loadBundle({
      directory: new URL('../../policies/family-spend', import.meta.url).pathname,
      builtins: floor.builtins,
      engine,
    });
    const now = () => Date.now();
    const filter = singleUseFilter({
      inner: policyFilter({
        bundle,
        config: {
          household: { adminDid: identity.household.adminDid, adminJwk: identity.household.adminJwk },
          webauthn: { rpId: env.rpId, origin: env.origin },
        },
        resolvers: familySpendLookups({
          household: identity.household,
          store: identity.store.identity,
          allowances: identity.store.allowances,
        }),
        now,
      }),
      store: openSqliteEvidenceStore({ path: join(household.dataDir, `allowance-${engine}.sqlite`), capacity: 1000 }),
      evidenceFields: ['invoice', 'childApproval', 'parentApproval'],
      spend: 'on-success',
      now,
    });
    const request: CallRequest = {
      tool: 'payments__charge_invoice',
      toolName: 'charge_invoice',
      server: { name: 'payments', admission: 'in-process' },
      arguments: slice.args,
      hasOutputSchema: false,
      credentialFields: ['invoice', 'childApproval', 'parentApproval'],
    };
    const context: CallContext = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 'bench' } };
    const decide = async () => {
      const verdict = await filter(request, context);
      if (verdict.decision !== 'allow' || !verdict.wrap) throw new Error('the allowance decision did not allow');
      await verdict.wrap(async () => ({ status: 'failed', reason: 'bench' }));
    };
    await decide();
    const signatures = floor.freeze();
    if (signatures !== 9) throw new Error(`the allowance decision verified ${signatures} signatures, not 9`);
    const order = {
      allowanceId: drafted.terms.id,
      invoiceId: slice.invoiceId,
      childDid: identity.household.members.child,
      merchantDid: runtime.merchant?.did ?? '',
      totalCents: 400,
    };
    const hold = async () => {
      const held = await allowances.hold(order);
      if (!held.ok) throw new Error(`the allowance did not hold the order: ${held.reason}`);
      await allowances.release(order.invoiceId);
    };
    return { decide, hold, signatures, close: () => household.close() };
  } catch (error) {
    await household.close();
    throw error;
  }
}

/**
 * The gated decision with an allowance instead of the parent's approval, beside today's decision
 * with the parent's approval (rego, every signature), measured in alternation in this run so the
 * machine's load weighs on both alike; with the settlement's hold of the allowance's budget.
 */
export async function allowanceBench(): Promise<Record<string, unknown>> {
  const folder = await mkdtemp(join(tmpdir(), 'bench-allowance-'));
  const loadBefore = loadavg()[0];
  const allowance = await allowanceDecider('rego');
  try {
    const parent = await gatedDecider('rego', false, folder);
    const measured = await measureInterleaved(
      { parentApproval: parent.decide, allowance: allowance.decide, allowanceHold: allowance.hold },
      { iterations: 1_000, warmup: 50 },
    );
    return {
      loadAverage: { before: loadBefore, after: loadavg()[0] },
      gatedChargeDecisionWithAllowance: { parentApproval: measured.parentApproval, allowance: measured.allowance },
      allowanceHold: measured.allowanceHold,
      signatures: { parentApproval: parent.signatures, allowance: allowance.signatures },
      notes:
        "gatedChargeDecisionWithAllowance.parentApproval = today's gated decision (the $15 fixture, child and parent approvals, rego, every signature); .allowance = the same decision on a $4.00 order a standing allowance covers ($5.00 an order, $10.00 a day): the child's approval and the allowance's chain (household signature, the parent's membership, enrollment and passkey assertion over the terms' hash) and its period's spend read from SQLite stand in for the parent's approval. Both verify 9 signatures (the order on the child's solo tier would verify 5); the two are measured in alternation. allowanceHold = settlement's spend of that order after the decision (the allowance verified again, then the budget and the revocation read and the hold written in one BEGIN IMMEDIATE transaction), then its release; in neither decision figure.",
    };
  } finally {
    await allowance.close();
    await rm(folder, { recursive: true, force: true });
  }
}

/** What {@link timedOrders} reports: the order's server time, each step's, and the CPU time each process spent. */
export type TimedOrders = Latency & {
  stepsP50Us: Record<string, number>;
  stepsP99Us: Record<string, number>;
  /** This process's CPU time over each step (both instances when there are two), p50. */
  stepsCpuP50Us: Record<string, number>;
  /**
   * CPU time per measured order: this process (the household instances, the bench's own client),
   * the processes it started (the shop), and the PostgreSQL cluster (every backend) when there is one.
   */
  cpuMsPerOrder: { household: number; children: number; postgres?: number };
};

/**
 * `orders` $15 orders after one warm-up, each step served by the next of `instances` in turn (one
 * instance, or two on one database): the server time of each order, summed over its steps.
 */
async function timedOrders(
  instances: readonly TestHousehold[],
  orders: number,
  options: { readonly around?: MeasuredPhase; readonly postmasterPid?: number } = {},
): Promise<TimedOrders> {
  const around = options.around ?? {};
  const { postmasterPid } = options;
  const durations: bigint[] = [];
  /** Each step's durations over the measured orders: where an order's server time goes. */
  const steps = new Map<string, bigint[]>();
  const stepsCpu = new Map<string, bigint[]>();
  const cpuNow = () => ({
    household: process.cpuUsage(),
    children: descendantsCpuSeconds(process.pid),
    postgres: postmasterPid === undefined ? undefined : clusterCpuSeconds(postmasterPid),
  });
  let cpuAtStart: ReturnType<typeof cpuNow> | undefined;
  let step = 0;
  let measured = false;
  // The next step's instance, and the time it took, added to the order's and to the step's.
  const timed = async <T>(name: string, work: (household: TestHousehold) => Promise<T>, spent: { ns: bigint }) => {
    const household = instances[step++ % instances.length] as TestHousehold;
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    const value = await work(household);
    const end = process.hrtime.bigint();
    const took = end - start;
    spent.ns += took;
    if (measured) {
      steps.set(name, [...(steps.get(name) ?? []), took]);
      const used = process.cpuUsage(cpu);
      stepsCpu.set(name, [...(stepsCpu.get(name) ?? []), BigInt(used.user + used.system) * 1000n]);
      around.step?.(name, { startNs: start, endNs: end, cpuUs: used.user + used.system, systemUs: used.system });
    }
    return value;
  };
  for (let index = 0; index <= orders; index++) {
    // The first order warms every path up; it is not counted.
    measured = index > 0;
    if (index === 1) {
      await around.start?.();
      cpuAtStart = cpuNow();
    }
    const spent = { ns: 0n };
    const invoiceJson = await timed('invoice', (at) => at.invoice([{ sku: 'large-pepperoni', qty: 1 }]), spent);
    const { invoice, invoiceId } = invoiceJson as { invoice: string; invoiceId: string };
    const requested = await timed(
      'request_approval',
      (at) => at.call('request_approval', { invoice }, 'request approval'),
      spent,
    );
    const approvalId = String(requested.json?.approvalId);
    for (const role of ['child', 'parent'] as const) {
      // One ceremony (its options, then its verification) is one step.
      const member = instances[0]?.members[role] as Member;
      await timed(
        `${role} passkey`,
        async (at) => {
          const started = await at.runtime.identity.passkeys.approval.options({ session: member.session, approvalId });
          if (!started.ok) throw new Error(started.reason);
          const response = member.authenticator.assert(started.options);
          return at.runtime.identity.passkeys.approval.verify({
            session: member.session,
            ceremonyId: started.ceremonyId,
            response,
          });
        },
        spent,
      );
    }
    await timed('await_approval', (at) => at.call('await_approval', { approvalId }, 'await approval'), spent);
    const charged = await timed(
      'charge_invoice',
      (at) =>
        at.call(
          'payments__charge_invoice',
          { invoiceId, amountCents: 1500, merchantId: at.runtime.merchant?.did, approvalId },
          'pay charge invoice',
        ),
      spent,
    );
    const fulfilled = await timed(
      'fulfill',
      (at) => at.call('pizza__fulfill', { receipt: charged.json?.receipt }, 'fulfill order'),
      spent,
    );
    const recorded = await timed(
      'record_fulfillment',
      (at) => at.call('record_fulfillment', { commitment: fulfilled.json?.commitment }, 'record fulfillment'),
      spent,
    );
    if (recorded.json?.status !== 'fulfilled')
      throw new Error(
        `the benchmark order did not complete: ${JSON.stringify([charged.json ?? charged.result, fulfilled.json ?? fulfilled.result, recorded.result])}`,
      );
    if (measured) {
      durations.push(spent.ns);
      around.order?.(spent.ns);
    }
  }
  const cpuAtEnd = cpuNow();
  await around.stop?.();
  const perOrder = (seconds: number) => Math.round((seconds * 1000 * 10) / orders) / 10;
  const used = process.cpuUsage(cpuAtStart?.household);
  const cpuMsPerOrder = {
    household: perOrder((used.user + used.system) / 1e6),
    children: perOrder(cpuAtEnd.children - (cpuAtStart?.children ?? 0)),
    ...(cpuAtEnd.postgres === undefined ? {} : { postgres: perOrder(cpuAtEnd.postgres - (cpuAtStart?.postgres ?? 0)) }),
  };
  const per = (map: Map<string, bigint[]>, at: 'p50Us' | 'p99Us') =>
    Object.fromEntries([...map].map(([name, taken]) => [name, summarise(taken)[at]]));
  return {
    ...summarise(durations),
    stepsP50Us: per(steps, 'p50Us'),
    stepsP99Us: per(steps, 'p99Us'),
    stepsCpuP50Us: per(stepsCpu, 'p50Us'),
    cpuMsPerOrder,
  };
}

/** Runs around the measured orders only (after the warm-up order): a profiler's start and stop. */
export interface MeasuredPhase {
  readonly start?: () => Promise<void>;
  readonly stop?: () => Promise<void>;
  /** Each measured step as it is taken (its monotonic start and end, this process's CPU time over it). */
  readonly step?: (name: string, taken: { startNs: bigint; endNs: bigint; cpuUs: number; systemUs: number }) => void;
  /** Each measured order's server time. */
  readonly order?: (nanoseconds: bigint) => void;
}

/** The whole order on the embedded household: SQLite, the shop as a stdio child. */
export async function wholeOrder(orders: number, around: MeasuredPhase = {}): Promise<TimedOrders> {
  const household = await startTestHousehold({ engine: 'rego' });
  try {
    return await timedOrders([household], orders, { around });
  } finally {
    await household.close();
  }
}

/**
 * The whole order over two household instances on one PostgreSQL database, its steps alternating
 * between them (issue 28). They share the data folder (the sealing key's file) and one shop over
 * HTTP (a stdio shop would be each instance's own), which ships on the settlement DID the first
 * instance publishes, as in the compose deployment.
 */
export async function wholeOrderOnTwoInstances(
  orders: number,
  databaseUrl: string,
  around: MeasuredPhase = {},
): Promise<TimedOrders> {
  const dataDir = await mkdtemp(join(tmpdir(), 'bench-two-instances-'));
  const settlementDidFile = join(dataDir, 'settlement-did');
  const port = await freePort();
  const shopStarting = startHttpShop(await mkdtemp(join(tmpdir(), 'bench-shop-')), {
    port,
    env: { SHOP_SETTLEMENT_DID_FILE: settlementDidFile },
  });
  const env = {
    DATABASE_URL: databaseUrl,
    PIZZA_URL: `http://127.0.0.1:${port}/mcp`,
    EXTENSIBLE_MCP_SETTLEMENT_DID_FILE: settlementDidFile,
  };
  const started: TestHousehold[] = [];
  let shop: HttpShop | undefined;
  try {
    const first = await startTestHousehold({ engine: 'rego', dataDir, env });
    started.push(first);
    shop = await shopStarting;
    // The first instance reaches the shop on its next retry, once the shop serves.
    for (let waited = 0; first.runtime.merchant === undefined; waited += 100) {
      if (waited > 30_000) throw new Error('the first instance never reached the shop');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    started.push(await startTestHousehold({ engine: 'rego', dataDir, env, enrol: false }));
    return await timedOrders(started, orders, { around, postmasterPid: await postmasterPidOf(databaseUrl) });
  } finally {
    for (const household of started) await household.close();
    await (shop ?? (await shopStarting.catch(() => undefined)))?.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/**
 * The gated decision (rego, every signature) with its single-use evidence on PostgreSQL, beside
 * the same decision on SQLite measured just before in this run (issue 28). PostgreSQL is a throwaway cluster on
 * this machine with its defaults (fsync on), reached over its unix socket.
 */
async function gatedDecisionOnPostgres(folder: string, sqlite: Latency, databaseUrl: string) {
  const pool = await openPostgresPool({
    url: databaseUrl,
    migrations: { evidence: postgresEvidenceStoreMigrations },
    what: 'bench evidence store',
  });
  try {
    const postgres = await gatedDecision('rego', false, folder, async () =>
      createPostgresEvidenceStore(pool, { capacity: 1000 }),
    );
    const { floor: _floor, ...postgresLatency } = postgres;
    return { sqlite, postgres: postgresLatency };
  } finally {
    await pool.end();
  }
}

/**
 * The floor under every statement on this machine, measured on the cluster the orders ran on: a
 * bare round trip through a pool (`SELECT 1`), and a one-row insert in its own transaction (the
 * round trip and the durable commit), 500 of each after 50 unmeasured.
 */
export async function postgresRoundTrips(url: string): Promise<{ select1: Latency; durableInsert: Latency }> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await pool.query(
      'CREATE TABLE IF NOT EXISTS bench_round_trips (id BIGINT GENERATED ALWAYS AS IDENTITY, at BIGINT)',
    );
    const select1 = await measure(() => pool.query('SELECT 1'), { iterations: 500, warmup: 50 });
    const durableInsert = await measure(
      () => pool.query('INSERT INTO bench_round_trips (at) VALUES ($1)', [Date.now()]),
      {
        iterations: 500,
        warmup: 50,
      },
    );
    return { select1, durableInsert };
  } finally {
    await pool.end();
  }
}

/** The process id of the postmaster serving `url`: every backend is its child (field 4 of the backend's stat). */
async function postmasterPidOf(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const backend = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0;
    return Number(statFields(backend)[1]);
  } finally {
    await client.end();
  }
}

/** A new database `name` on the throwaway cluster at `adminUrl`: its URL. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The payment benchmarks: the gated decision on both engines, and the whole order's server time. */
export async function paymentsBench(): Promise<Record<string, unknown>> {
  const folder = await mkdtemp(join(tmpdir(), 'bench-payments-'));
  // PostgreSQL is a throwaway cluster on this machine with its defaults (fsync on), over its unix socket.
  const cluster = startThrowawayPostgres({ durable: true });
  // The 1-minute load average before and after: on a shared machine the tail follows it.
  const loadBefore = loadavg()[0];
  try {
    const gated = {
      rego: {
        everySignature: await gatedDecision('rego', false, folder),
        rememberedSignatures: await gatedDecision('rego', true, folder),
      },
      cel: {
        everySignature: await gatedDecision('cel', false, folder),
        rememberedSignatures: await gatedDecision('cel', true, folder),
      },
    };
    const { floor: _floor, ...onSqlite } = gated.rego.everySignature;
    const onPostgres = await gatedDecisionOnPostgres(folder, onSqlite, await createDatabase(cluster.url, 'evidence'));
    // One warm-up and nine measured: ten invoices, the most one chat may ask for in a minute (issue 26).
    const order = await wholeOrder(9);
    const householdUrl = await createDatabase(cluster.url, 'household');
    const orderOnTwo = await wholeOrderOnTwoInstances(9, householdUrl);
    const roundTrips = await postgresRoundTrips(householdUrl);
    return {
      loadAverage: { before: loadBefore, after: loadavg()[0] },
      gatedChargeDecision: gated,
      gatedChargeDecisionByStore: onPostgres,
      wholeOrderServerTime: order,
      wholeOrderServerTimeOnTwoInstances: orderOnTwo,
      postgresRoundTrips: roundTrips,
      targets: {
        "gated decision on PostgreSQL p99 <= 2x SQLite's (every signature, rego, run side by side)": {
          value: onPostgres.postgres.p99Us,
          sqliteP99: onPostgres.sqlite.p99Us,
          met: onPostgres.postgres.p99Us <= 2 * onPostgres.sqlite.p99Us,
        },
        'gated decision p99 <= 2 ms (every signature, rego)': {
          value: gated.rego.everySignature.p99Us,
          bareSignaturesP99: gated.rego.everySignature.floor?.bareVerification.p99Us,
          met: gated.rego.everySignature.p99Us <= 2000,
        },
        'gated decision p99 <= 2 ms (every signature, cel)': {
          value: gated.cel.everySignature.p99Us,
          bareSignaturesP99: gated.cel.everySignature.floor?.bareVerification.p99Us,
          met: gated.cel.everySignature.p99Us <= 2000,
        },
        'whole order <= 300 ms of server time (p50)': { value: order.p50Us, met: order.p50Us <= 300_000 },
        'whole order over two instances on PostgreSQL <= 300 ms of server time (p50)': {
          value: orderOnTwo.p50Us,
          met: orderOnTwo.p50Us <= 300_000,
        },
        // Issue 28's goal for the same figure, beside the same order on one instance on SQLite.
        'whole order over two instances on PostgreSQL <= 30 ms of server time (p50)': {
          value: orderOnTwo.p50Us,
          oneInstanceOnSqliteP50: order.p50Us,
          met: orderOnTwo.p50Us <= 30_000,
        },
      },
      notes:
        'gatedChargeDecision = single-use reserve on SQLite + fetch-plan lookups + family-spend policy with all nine signatures of the $15 fixture + release; everySignature verifies each one every time, rememberedSignatures lets the host remember valid EdDSA signatures (passkey assertions are always verified). floor.bareVerification = the same nine signatures verified with bare node:crypto (keys imported beforehand, nothing else), measured in alternation with the decision: the cost of the cryptography alone on this machine, under which no policy code can go. gatedChargeDecisionByStore = the rego every-signature decision with the single-use store on a SQLite file and on PostgreSQL (a throwaway cluster on this machine, defaults, unix socket; reserve and release are round trips there). wholeOrderServerTime = one $15 order through the composed household (shop over stdio, mock rail): search + invoice + request_approval + two passkey ceremonies (server side only) + await_approval + charge by reference + fulfil + record_fulfillment, summed per order, 9 orders after one warm-up (ten invoices a minute is the per-chat limit). wholeOrderServerTimeOnTwoInstances = the same order over two household instances on one PostgreSQL database (one data folder for the sealing key, one shop over HTTP), each step served by the other instance than the step before. stepsP50Us, stepsP99Us = each step alone over the measured orders, where the time of an order goes; stepsCpuP50Us = the CPU time of this process over each step (user + system, every thread: both instances, and the bench client, run in it); cpuMsPerOrder = CPU time per measured order of this process (household), of the processes it started (children: the shop, over stdio or HTTP) and of every PostgreSQL backend of the cluster (postgres), from /proc in ticks of 10 ms. postgresRoundTrips = on the same cluster after the orders, a bare round trip through a pool (SELECT 1) and a one-row insert in its own transaction (its durable commit): the floor under each statement. One warm-up order, so the measured ones still include some JIT compilation. tests/bench/profile-order.ts runs only the two order lines, with the statements each step sends and a CPU profile.',
    };
  } finally {
    cluster.stop();
    await rm(folder, { recursive: true, force: true });
  }
}
