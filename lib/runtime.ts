import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import {
  approvalTools,
  createAllowances,
  type DidDocument,
  type Household,
  IdentityError,
  type IdentityEvent,
  trustMerchant,
} from '../identity/index';
import {
  type ApprovalDecisionRecord,
  type CallContext,
  createGateway,
  createHostBuiltins,
  createRouteResolver,
  type DownstreamSpec,
  type EmbeddingOptions,
  elicitationFilter,
  type Gateway,
  loadBundle,
  type PinsFile,
  type ProxyLogger,
  passkeyConfirmationRules,
  policyFilter,
  readPinsFile,
  seedPins,
  singleUseFilter,
  type ToolPolicy,
} from '../proxy/index';
import { approvalDecisionEvent } from './approval-decision-event';
import { type AuditCheckpoints, createAuditCheckpoints } from './audit/audit-checkpoints';
import type { AuditLog } from './audit/audit-log';
import { createShopWitness, shopWitnessEndpoint } from './audit/shop-witness';
import { createFileWitness, type Witness } from './audit/witness';
import type { HouseholdEnv } from './env';
import { createEventBus, type EventBus, fromIdentityEvent, fromProxyEvent, type HouseholdEventSink } from './events';
import { limitRequests } from './limits/request-limits';
import { allowanceHandover } from './payments/allowance-handover';
import { evidenceByReference } from './payments/evidence-by-reference';
import { familySpendLookups } from './payments/family-spend-lookups';
import { createMockRail } from './payments/mock-rail';
import { createPaymentsServer, settlementResult } from './payments/payments-server';
import type { PaymentRail } from './payments/rail';
import { recordDecisions } from './payments/recorded-decisions';
import { createSettlement, type Settlement } from './payments/settlement';
import { createStripeRail } from './payments/stripe-rail';
import { shippedShopSpec, shopPinsFile } from './shop-pins';
import { type StartedIdentity, startIdentity } from './start-identity';
import { householdStoreLocation, openHouseholdStore } from './store';
import { createTransparentShop, type TransparentShop } from './transparent-shop';

/** Options of {@link startHouseholdRuntime}; everything but `env` has a production default. */
export interface RuntimeOptions {
  readonly env: HouseholdEnv;
  /** The shop as a downstream; default: `PIZZA_URL` over HTTP, else a stdio child of `shop-agent/main.ts`. */
  readonly shop?: DownstreamSpec;
  /**
   * The hashes the shop's tools are checked against on its first listing in this household
   * (docs/pinning.md); default: the shipped `shop-agent/pins.json`. A store that already knows the
   * shop keeps its own pins.
   */
  readonly shopPins?: PinsFile;
  /** The payment rail; default: Stripe when `STRIPE_SECRET_KEY` is set, else the mock rail. */
  readonly rail?: PaymentRail;
  readonly embeddings?: EmbeddingOptions;
  readonly logger?: ProxyLogger;
  readonly clock?: () => Date;
  /** Test hook: runs after the rail answered and before the receipt is recorded. */
  readonly afterRailCharge?: (invoiceId: string) => void | Promise<void>;
  /** Per-call downstream timeout (the gateway's default otherwise). */
  readonly callTimeoutMs?: number;
  /** Longest wait for the payment rail's answer before the payment is in doubt (settlement's default otherwise). */
  readonly railTimeoutMs?: number;
  /** Waits between tries to reach a `PIZZA_URL` shop that was not up at start (default 1 s, doubling to 10 s). */
  readonly shopRetryMs?: { readonly first: number; readonly max: number };
  /** Subscribed before anything starts, so it sees the start's own events too. */
  readonly onEvent?: HouseholdEventSink;
  /** How often a waiting approval re-reads the store besides the store's notifications (default 1 s). */
  readonly approvalPollMs?: number;
  /** Rows between two signed audit checkpoints (the checkpointer's default otherwise). */
  readonly auditCheckpointEvery?: number;
  /**
   * Where every audit checkpoint is also submitted (SPEC §8); default: the shop's witness when
   * `EXTENSIBLE_MCP_AUDIT_WITNESS` is `shop` and the shop is the configured one (no `shop` option
   * given), plus the `EXTENSIBLE_MCP_AUDIT_WITNESS_FILE` file. The runtime closes them.
   */
  readonly witnesses?: readonly Witness[];
}

/** The household side, composed and started. */
export interface HouseholdRuntime {
  readonly gateway: Gateway;
  readonly identity: StartedIdentity;
  readonly settlement: Settlement;
  readonly events: EventBus;
  readonly rail: PaymentRail;
  /** Every event of the bus, hash-chained on disk (SPEC §8): the live log and audit pages read it. */
  readonly audit: AuditLog;
  /** The audit checkpointer: whether it signs, or why it refuses to (SPEC §8). */
  readonly checkpoints: AuditCheckpoints;
  /**
   * The shop as a transparent proxy gated by this household (docs/human-authority.md): the shop's
   * own tools, `cancel_order` only after the child's passkey over exactly that call. Absent when
   * the shop runs in this process.
   */
  readonly transparentShop: TransparentShop | undefined;
  /** The merchant pinned for the `pizza` server, once the shop answered (at start, or later over `PIZZA_URL`). */
  readonly merchant?: { readonly did: string; readonly name: string } | undefined;
  close(): Promise<void>;
}

/** The runtime's own calls (pinning the merchant) run as the operator in a scope of their own, never a model's. */
const operatorContext: CallContext = {
  principal: { id: 'operator' },
  scope: { kind: 'session', id: 'household-operator' },
};
/**
 * The household's own per-tool rules, as a config file would name them (docs/human-authority.md):
 * an order's delivery address is asked in a form when missing; cancelling a shop order is
 * confirmed by the child's passkey over exactly that call (`confirm_if` with `passkey`, enforced
 * by `approval_required`).
 */
export const householdToolPolicies = {
  pizza__request_invoice: {
    required: [],
    elicit: {
      message: 'Where should the order be delivered? The shop signs this address into the invoice.',
      fields: { deliverTo: { title: 'Delivery address', description: 'Street and number, e.g. 12 Main St' } },
    },
  },
  pizza__cancel_order: { required: [], confirmIf: { always: true, passkey: ['child'] } },
} as const satisfies Record<string, ToolPolicy>;

/** The policy bundle that governs `payments`. */
const familySpendDirectory = resolve('policies/family-spend');

/**
 * The composition root of the household (SPEC §2, STYLE): builds the whole household side from the
 * environment — identity on the data folder, the rail, settlement, the `payments` server under the
 * `family-spend` bundle with single-use evidence through settlement, the approval local tools, and
 * the shop as a downstream — and pins the merchant. Starting it twice on one data folder changes
 * nothing. The only place that decides which store, rail, bundles and servers are used.
 */
export async function startHouseholdRuntime(options: RuntimeOptions): Promise<HouseholdRuntime> {
  const { env } = options;
  const clock = options.clock ?? householdClock(env);
  const logger = options.logger ?? { info: () => undefined, error: () => undefined };
  const events = createEventBus({ onInvalid: (error) => logger.error('event dropped', error) });
  // The audit log is subscribed first and required, so an event is committed before any other
  // listener (the live log) sees it. Until the store is open (identity opens it) and the inherited
  // head is read, the start's own events wait in the bus's queue, in order.
  let opened: (audit: AuditLog) => void = () => undefined;
  let failed: (error: Error) => void = () => undefined;
  const ready = new Promise<AuditLog>((resolve, reject) => {
    opened = resolve;
    failed = reject;
  });
  ready.catch(() => undefined);
  events.subscribe(
    async (event) => {
      await (await ready).append(event);
    },
    // Required: a policy decision the table cannot take is refused (EventBus.record).
    { required: true },
  );
  if (options.onEvent) events.subscribe(options.onEvent);
  let identity: StartedIdentity;
  try {
    // The one place this process chooses its store: DATABASE_URL, else the data folder's SQLite file.
    const store = await openHouseholdStore(householdStoreLocation(env));
    identity = await startIdentity(env, {
      store,
      clock,
      events: (event: IdentityEvent) => events.emit(fromIdentityEvent(event)),
      ...(options.approvalPollMs === undefined ? {} : { approvalPollMs: options.approvalPollMs }),
    });
  } catch (error) {
    failed(new Error('the household did not start, so its events have no audit table', { cause: error }));
    throw error;
  }
  const { store } = identity;
  let gateway: Gateway | undefined;
  let transparentShop: TransparentShop | undefined;
  let checkpoints: AuditCheckpoints | undefined;
  const witnesses = options.witnesses ?? defaultWitnesses(env, identity, options.shop === undefined, logger);
  try {
    // The chain as earlier processes left it: rows after their last checkpoint up to here are theirs, unsigned.
    const audit = identity.store.audit;
    const inherited = await audit.head();
    opened(audit);
    await events.flush();
    // The admin signs the chain's head now, every N rows, and at close (SPEC §8) — each only over a
    // chain verified from the previous checkpoint (the store's or a witness's) — and hands each to
    // the witnesses; on the system clock, not the household's test clock, as the events' own times are.
    checkpoints = createAuditCheckpoints({
      audit,
      household: identity.household,
      store: store.checkpoints,
      // One signer per checkpoint period however many instances share the chain: this one, while it holds the lease.
      lease: { store: store.checkpointLease, owner: randomUUID() },
      inherited,
      witnesses,
      ...(options.auditCheckpointEvery === undefined ? {} : { every: options.auditCheckpointEvery }),
      onError: (error) => logger.error('audit checkpoint failed', error),
      report: (report) => {
        // In words, on the terminal and in the chain (the live log shows it); the checkpointer
        // waits for the row of an unvouched tail before it signs anything after it.
        if (report.kind === 'audit-checkpoint-refused' || report.kind === 'audit-tail-unvouched') {
          logger.error(report.message);
        }
        return events.record({
          source: 'runtime',
          ...report,
          ...(report.data === undefined ? {} : { data: { ...report.data } }),
        });
      },
    });
    void checkpoints.checkpoint();
    if (env.settlementDidFile !== undefined) await publishSettlementDid(env.settlementDidFile, identity);
    const { household } = identity;
    const rail =
      options.rail ??
      (env.stripeSecretKey === undefined
        ? createMockRail({ store: store.mockRail })
        : createStripeRail({ secretKey: env.stripeSecretKey }));
    // The parent's standing allowances (docs/human-authority.md): read by family-spend, spent by settlement.
    const allowances = createAllowances({
      household,
      store: store.allowances,
      origin: env.origin,
      rpId: env.rpId,
      clock,
    });
    const settlement = createSettlement({
      household,
      approvals: identity.approvals,
      payments: store.payments,
      rail,
      allowances,
      events,
      clock,
      ...(options.afterRailCharge === undefined ? {} : { afterRailCharge: options.afterRailCharge }),
      ...(options.railTimeoutMs === undefined ? {} : { railTimeoutMs: options.railTimeoutMs }),
    });

    const builtins = createHostBuiltins({ webauthn: { rpId: env.rpId } });
    const bundle = await loadBundle({ directory: familySpendDirectory, builtins, engine: env.policyEngine });
    const now = () => clock().getTime();
    const recorded = recordDecisions({ events, policyTitle: bundle.guidance.title });
    const governed = recorded.singleUse(
      singleUseFilter({
        inner: recorded.policy(
          policyFilter({
            bundle,
            config: {
              household: { adminDid: household.adminDid, adminJwk: household.adminJwk },
              webauthn: { rpId: env.rpId, origin: env.origin },
            },
            resolvers: familySpendLookups({
              household,
              store: store.identity,
              allowances: store.allowances,
              clock,
            }),
            now,
            onDecision: recorded.onPolicyDecision,
          }),
        ),
        store: store.evidence,
        evidenceFields: ['invoice', 'childApproval', 'parentApproval'],
        spend: 'on-success',
        // A payment in doubt is settled from the rail by its idempotency key (the invoice jti).
        resolveInDoubt: async (request) => {
          const outcome = await settlement.resolve(String(request.arguments.invoiceId));
          if (outcome.status === 'succeeded') return { status: 'completed', result: settlementResult(outcome) };
          if (outcome.status === 'unknown') return { status: 'unknown', reason: outcome.reason };
          return { status: 'failed', reason: outcome.reason };
        },
        now,
        onError: (error) => logger.error('single-use evidence store', error),
      }),
    );

    // The shop's first listing is checked against the shipped hashes, never trusted on first use:
    // a shop tool that changed or is new since the pins file was made is held for the operator.
    const seeded = await seedPins(store.pins, options.shopPins ?? readPinsFile(shopPinsFile));
    if (seeded.seeded.length > 0) logger.info(`pins: fixed ahead of first use: ${seeded.seeded.join(', ')}`);
    const shop = options.shop ?? shopSpec(env, household);
    // The household's gate for calls a person must approve (docs/human-authority.md): search mode's
    // `approval_required` and the transparent shop's use the same one, so the same windows, ledger
    // and audit rows decide both.
    const approvalGate = {
      gate: identity.callApprovals.gate,
      store: store.evidence,
      now,
      // Required: an allow the audit chain cannot take is refused (EventBus.record).
      onDecision: (decision: ApprovalDecisionRecord) => events.record(approvalDecisionEvent(decision)),
      onError: (error: unknown) => logger.error('approval_required', error),
    };
    const limits = limitRequests({
      store: store.limits,
      invoiceTool: { server: 'pizza', tool: 'request_invoice' },
      now,
    });
    gateway = createGateway({
      servers: {
        pizza: shop,
        payments: { kind: 'in-process', server: createPaymentsServer(settlement) },
      },
      localTools: approvalTools(identity.approvals),
      discoveryStore: store.discovery,
      // Every listing of every server is checked against the household's own pins (SPEC §3.13).
      pinStore: store.pins,
      pinReviewCommand: 'npm run household -- pins',
      // By reference first (the policy sees stored evidence), then a form for a missing required
      // field such as the delivery address; credential fields are never asked for.
      extraCallFilters: [
        // First: a caller over its bounds is refused before a form is shown or anything is signed.
        limits,
        // An order the allowance no longer covers goes to the parent rather than to a refusal.
        allowanceHandover({ settlement }),
        evidenceByReference({ store: store.identity }),
        elicitationFilter({ tools: householdToolPolicies, passkeyConfirmations: 'approval-required' }),
      ],
      // Last of the call filters that may rewrite arguments: the approval is over the call as forwarded.
      approvalRequired: {
        rules: passkeyConfirmationRules(householdToolPolicies),
        ...approvalGate,
      },
      governance: {
        resolve: createRouteResolver({
          routes: [{ name: 'payments', admission: 'in-process', bundle: 'family-spend' }],
          unmapped: 'pass',
        }),
        bundles: { 'family-spend': { bundle, filter: governed } },
      },
      ...(options.embeddings === undefined ? {} : { embeddings: options.embeddings }),
      ...(options.callTimeoutMs === undefined ? {} : { callTimeoutMs: options.callTimeoutMs }),
      logger,
      onEvent: (event) => events.emit(fromProxyEvent(event)),
    });
    // The same shop served transparently (its own tool list, `/mcp/pizza`), gated by the same
    // household: a session opens its own connection to the shop, as the operator configured it.
    transparentShop = createTransparentShop({
      shop,
      tools: householdToolPolicies,
      gateway: {
        extraCallFilters: [limits],
        approvalRequired: { rules: [], ...approvalGate },
        onEvent: (event) => events.emit(fromProxyEvent(event)),
      },
      pinStore: store.pins,
      log: (line) => logger.info(`transparent shop: ${line}`),
    });
    const started = await gateway.start();
    for (const failed of started.failed) logger.error(`server ${failed.name} did not start: ${failed.reason}`);

    // A crash between the rail and the receipt left payments in doubt: settle them from the rail now.
    await settlement.resolveAll();
    let merchant = started.connected.includes('pizza') ? await pinMerchant(gateway, identity, events) : undefined;
    const running = gateway;
    const transparent = transparentShop;
    const signing = checkpoints;
    // In docker the shop starts only once this household is healthy (SPEC §8): a `PIZZA_URL` shop
    // that was not up yet is connected, and its merchant pinned, as soon as it answers.
    const retry =
      options.shop === undefined && env.pizzaUrl !== undefined && !started.connected.includes('pizza')
        ? connectShopLater({
            gateway: running,
            spec: shopOverHttp(env.pizzaUrl),
            delays: options.shopRetryMs ?? { first: 1000, max: 10_000 },
            onConnected: async () => {
              merchant = await pinMerchant(running, identity, events);
            },
            logger,
          })
        : undefined;
    return {
      gateway: running,
      identity,
      settlement,
      events,
      rail,
      audit,
      checkpoints: signing,
      transparentShop: transparent,
      get merchant() {
        return merchant;
      },
      async close() {
        await retry?.stop();
        await transparent?.close();
        await running.close();
        // After the gateway's last events are in the chain, so the shutdown checkpoint covers them.
        await events.flush();
        await signing.close();
        await Promise.all(witnesses.map((witness) => witness.close()));
        // The checkpointer's last reports are rows too: written before the store closes.
        await events.flush();
        identity.close();
      },
    };
  } catch (error) {
    await transparentShop?.close();
    await gateway?.close();
    await checkpoints?.close();
    await Promise.all(witnesses.map((witness) => witness.close()));
    await events.flush();
    identity.close();
    throw error;
  }
}

/**
 * The witnesses the operator configured (SPEC §8): the shop's — over its `/witness` endpoint when it
 * runs at `PIZZA_URL`, else a `--witness` stdio child on the shop's data folder — and an append-only
 * file. Operator code only: no model session reaches either (the proxy's `pizza` server is the shop's
 * model-facing endpoint, which has no witness tool).
 */
function defaultWitnesses(
  env: HouseholdEnv,
  identity: StartedIdentity,
  configuredShop: boolean,
  logger: ProxyLogger,
): Witness[] {
  const witnesses: Witness[] = [];
  if (env.auditShopWitness && configuredShop) {
    witnesses.push(
      createShopWitness({
        endpoint: shopWitnessEndpoint(env),
        adminJwk: identity.household.adminJwk,
        merchantJwk: () => pinnedMerchantJwk(identity),
        log: (line) => logger.info(`shop witness: ${line}`),
      }),
    );
  }
  if (env.auditWitnessFile !== undefined) witnesses.push(createFileWitness(env.auditWitnessFile));
  return witnesses;
}

/** The public key of the merchant pinned behind `pizza`, once pinned: what the shop's countersignatures verify against. */
async function pinnedMerchantJwk(identity: StartedIdentity): Promise<Readonly<Record<string, string>> | undefined> {
  const did = await identity.store.identity.records.get('household', 'merchant:pizza');
  if (did === undefined) return undefined;
  return (await identity.store.identity.merchants.get(did))?.publicKeyJwk;
}

/**
 * The household's clock: the system clock, moved by the offset in `EXTENSIBLE_MCP_TEST_CLOCK_FILE`
 * when a browser test sets one (a missing or unreadable file is no offset).
 */
function householdClock(env: HouseholdEnv): () => Date {
  const file = env.testClockFile;
  if (file === undefined) return () => new Date();
  return () => {
    let offset = 0;
    try {
      offset = Number.parseInt(readFileSync(file, 'utf8'), 10) || 0;
    } catch {
      // No file yet: the clock is the system's.
    }
    return new Date(Date.now() + offset);
  };
}

/**
 * Writes the settlement service's public DID to `file` (atomically: a reader never sees half of
 * it), so a shop in another container can trust this household's receipts (SPEC §8). Only the
 * public `did:key` is written; the key stays sealed in the data folder.
 */
async function publishSettlementDid(file: string, identity: StartedIdentity): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}.partial`;
  await writeFile(partial, `${identity.household.settlementDid}\n`, { mode: 0o644 });
  await rename(partial, file);
}

/**
 * Tries `gateway.admit('pizza', spec)` until it connects, waiting `delays.first` then doubling up
 * to `delays.max` between tries, then runs `onConnected` (pinning the merchant) once. Operator
 * code only: the model's `load_mcp_server` has nothing to do with it. `stop` ends the tries and
 * waits for one in flight.
 */
function connectShopLater(options: {
  readonly gateway: Gateway;
  readonly spec: DownstreamSpec;
  readonly delays: { readonly first: number; readonly max: number };
  readonly onConnected: () => Promise<void>;
  readonly logger: ProxyLogger;
}): { stop(): Promise<void> } {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const attempt = async (delay: number): Promise<void> => {
    if (stopped) return;
    try {
      await options.gateway.admit('pizza', options.spec);
    } catch {
      if (stopped) return;
      timer = setTimeout(() => {
        inFlight = attempt(Math.min(delay * 2, options.delays.max));
      }, delay);
      return;
    }
    if (stopped) return;
    try {
      await options.onConnected();
    } catch (error) {
      options.logger.error('pinning the merchant after the shop came up failed', error);
    }
  };
  timer = setTimeout(() => {
    inFlight = attempt(options.delays.first);
  }, options.delays.first);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}

/**
 * The shop over HTTP at `url`, in whichever version it offers (`protocol: auto`, the default:
 * 2026-07-28 for this project's shop). After a shop container restarts, a call the proxy could not
 * connect yet (the name `shop` still resolving) is sent once more rather than left in doubt
 * (docs/protocol.md, downstream connections).
 */
function shopOverHttp(url: string): DownstreamSpec {
  return { kind: 'http', url };
}

/** The shop as the operator configured it: over HTTP at `PIZZA_URL`, else a stdio child told the settlement DID. */
function shopSpec(env: HouseholdEnv, household: Household): DownstreamSpec {
  if (env.pizzaUrl !== undefined) return shopOverHttp(env.pizzaUrl);
  return shippedShopSpec({ dataDir: join(env.dataDir, 'shop'), settlementDid: household.settlementDid });
}

/**
 * Pins the merchant behind the `pizza` server (SPEC §8): operator code calls `merchant_card` in
 * its own session — no model session — and trusts the DID and key it presents. A later start that
 * finds another DID behind `pizza` refuses to trust it, with a clear message: a changed key is
 * the operator's to accept (`npm run household -- trust-merchant`).
 */
async function pinMerchant(
  gateway: Gateway,
  identity: StartedIdentity,
  events: EventBus,
): Promise<{ did: string; name: string } | undefined> {
  const context = operatorContext;
  await gateway.search({ query: 'merchant_card merchant DID document key', topK: 50 }, context);
  const result = await gateway.call({ tool: 'pizza__merchant_card', arguments: {} }, context);
  const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
  let card: { did?: unknown; name?: unknown; didDocument?: DidDocument } | undefined;
  try {
    card = result.isError ? undefined : (JSON.parse(text) as typeof card);
  } catch {
    card = undefined;
  }
  if (typeof card?.did !== 'string' || typeof card.name !== 'string') {
    events.emit({
      source: 'runtime',
      kind: 'merchant-unpinned',
      outcome: 'error',
      message: 'the shop did not present a merchant card',
    });
    return undefined;
  }
  const records = identity.store.identity.records;
  const pinned = await records.get('household', 'merchant:pizza');
  if (pinned !== undefined && pinned !== card.did) {
    events.emit({
      source: 'runtime',
      kind: 'merchant-key-refused',
      outcome: 'deny',
      message: `the shop now presents ${card.did}, but ${pinned} is pinned; its invoices are refused until the operator trusts the new key (npm run household -- trust-merchant ${card.did})`,
    });
    return undefined;
  }
  try {
    await trustMerchant(identity.store.identity.merchants, {
      did: card.did,
      name: card.name,
      ...(card.didDocument?.verificationMethod[0]?.publicKeyJwk === undefined
        ? {}
        : { publicKeyJwk: card.didDocument.verificationMethod[0].publicKeyJwk }),
      now: new Date(),
    });
  } catch (error) {
    if (!(error instanceof IdentityError)) throw error;
    events.emit({ source: 'runtime', kind: 'merchant-key-refused', outcome: 'deny', message: error.message });
    return undefined;
  }
  await records.insert('household', 'merchant:pizza', card.did);
  if (pinned === undefined) {
    events.emit({
      source: 'runtime',
      kind: 'merchant-pinned',
      outcome: 'ok',
      message: `pinned ${card.name} (${card.did})`,
    });
  }
  return { did: card.did, name: card.name };
}
