import {
  type Approvals,
  type CallApprovals,
  createAllowances,
  createApprovals,
  createCallApprovals,
  createPasskeys,
  type Household,
  type IdentityEventSink,
  type IssuedEnrollmentCode,
  issueEnrollmentCodes,
  openHousehold,
  type Passkeys,
  type Role,
  roles,
} from '../identity/index';
import type { HouseholdEnv } from './env';
import type { HouseholdStore } from './store';

/** The household's identity side, open: its store, household, approvals and passkeys. */
export interface OpenIdentity {
  readonly store: HouseholdStore;
  readonly household: Household;
  readonly approvals: Approvals;
  /** Requests for a person's passkey yes to one gated non-payment call (`approval_required`). */
  readonly callApprovals: CallApprovals;
  readonly passkeys: Passkeys;
  close(): void;
}

/** Identity as an app start leaves it: open, with this start's enrollment codes. */
export interface StartedIdentity extends OpenIdentity {
  /** Codes issued at this start, one per role without a passkey or a live code: for the terminal only. */
  readonly codes: readonly IssuedEnrollmentCode[];
  /**
   * Roles without a passkey whose code, issued by an earlier start or another instance, is still
   * live: it was kept, so the code printed then still enrols.
   */
  readonly keptRoles: readonly Role[];
}

/** What identity is started with besides the environment. */
export interface IdentityOptions {
  /**
   * The household's store, opened by the process's composition root (`openHouseholdStore` on
   * `householdStoreLocation(env)`): identity never chooses it. Identity owns it from here: its
   * `close` closes the store, and so does a failed open.
   */
  readonly store: HouseholdStore;
  readonly events?: IdentityEventSink;
  readonly clock?: () => Date;
  /**
   * How often a waiting approval re-reads the store for another instance's decision (default 1 s):
   * the fallback beside the store's `watch` (PostgreSQL notifies each decision as it commits).
   */
  readonly approvalPollMs?: number;
}

export { storeFileName } from './store';

/**
 * Opens identity on the store it is given: the household (set up on first start, unchanged after;
 * its sealing key in the data folder, never in the store), with approvals and passkeys bound to
 * the configured origin.
 */
export async function openIdentity(env: HouseholdEnv, options: IdentityOptions): Promise<OpenIdentity> {
  const clock = options.clock ?? (() => new Date());
  const events = options.events ?? (() => {});
  const { store } = options;
  try {
    const household = await openHousehold({
      store: store.identity,
      dataDir: env.dataDir,
      adminDid: env.adminDid,
      now: clock,
    });
    // Standing allowances decide who must approve an order (docs/human-authority.md).
    const allowances = createAllowances({
      household,
      store: store.allowances,
      origin: env.origin,
      rpId: env.rpId,
      clock,
    });
    const polling = options.approvalPollMs === undefined ? {} : { pollIntervalMs: options.approvalPollMs };
    const approvals = createApprovals({
      household,
      origin: env.origin,
      rpId: env.rpId,
      allowances,
      events,
      clock,
      ...polling,
    });
    const callApprovals = createCallApprovals({
      household,
      store: store.callApprovals,
      origin: env.origin,
      rpId: env.rpId,
      clock,
      events,
      ...polling,
      describe: async (tool) =>
        tool === 'pizza__cancel_order'
          ? { action: 'cancel an order', at: (await store.identity.merchants.list())[0]?.name ?? 'the shop' }
          : undefined,
    });
    const passkeys = createPasskeys({
      household,
      approvals,
      callApprovals,
      allowances,
      origin: env.origin,
      rpId: env.rpId,
      events,
      clock,
    });
    return { store, household, approvals, callApprovals, passkeys, close: () => store.close() };
  } catch (error) {
    store.close();
    throw error;
  }
}

/**
 * Starts identity as every app start does (SPEC §5.3): opens it, then gives each role without an
 * enrolled passkey and without a live enrollment code a fresh one. A live code is kept (issue 28):
 * an instance starting beside another on one store must not void the codes the other printed, so
 * of several starts at once exactly one issues each role's code. The caller prints the codes to
 * the terminal; the event sink records only that a code was issued.
 */
export async function startIdentity(env: HouseholdEnv, options: IdentityOptions): Promise<StartedIdentity> {
  const identity = await openIdentity(env, options);
  try {
    const codes = await issueEnrollmentCodes({
      store: identity.store.identity,
      now: (options.clock ?? (() => new Date()))(),
      keepLive: true,
      ...(options.events === undefined ? {} : { events: options.events }),
    });
    const keptRoles: Role[] = [];
    for (const role of roles) {
      if (codes.some((issued) => issued.role === role)) continue;
      if ((await identity.store.identity.passkeys.listByRole(role)).length === 0) keptRoles.push(role);
    }
    return { ...identity, codes, keptRoles };
  } catch (error) {
    identity.close();
    throw error;
  }
}
