import { randomUUID } from 'node:crypto';
import type { AllowanceHoldResult, AllowanceRecord, AllowanceStore } from './allowance-store';
import {
  type AllowanceCover,
  type AllowanceTerms,
  allowanceCovers,
  allowanceHashOf,
  allowanceTermsSchema,
  canonicalTerms,
  parseCanonicalTerms,
  periodKeyOf,
} from './allowance-terms';
import type { PasskeyAssertion } from './credentials';
import type { Household } from './household';
import { IdentityError } from './identity-error';
import { decodeSegment } from './safe-json';
import { verifyAllowance } from './verify-allowance';
import { createCredentialVerifier, householdKeys } from './verify-credential';
import { verifyAssertionFast } from './verify-passkey-assertion';

/** Options of {@link createAllowances}. */
export interface AllowancesOptions {
  readonly household: Household;
  readonly store: AllowanceStore;
  /** Origin and relying party of the parent's passkey assertion. */
  readonly origin: string;
  readonly rpId: string;
  readonly clock?: () => Date;
}

/** What the parent fills in; the id and the hash are the household's. */
export interface AllowanceDraft {
  readonly merchantDid: string;
  readonly merchantName: string;
  readonly perOrderCapCents: number;
  readonly budgetCents: number;
  readonly period: 'day' | 'week';
  readonly timeZone: string;
  /** Seconds since the epoch; default now. */
  readonly notBefore?: number;
  readonly expiresAt: number;
}

/** An allowance as the parent's window lists it. */
export interface AllowanceView {
  readonly allowanceId: string;
  readonly terms: AllowanceTerms;
  readonly state: 'active' | 'revoked' | 'expired' | 'not-started';
  /** What is left of the current period's budget (0 once revoked or expired). */
  readonly remainingCents: number;
  readonly periodKey: string;
  readonly revokedAt?: string;
}

/** Whether an allowance stands in for the parent on an order, and how much it leaves. */
export type AllowanceCoverOutcome =
  | { readonly status: 'covered'; readonly allowanceId: string; readonly remainingCents: number }
  /**
   * An allowance exists for this child at this merchant, but does not cover this order: the parent
   * decides. `cause` is the refusal's code; `period` the allowance's, once its terms verified.
   */
  | {
      readonly status: 'not-covered';
      readonly allowanceId: string;
      readonly reason: string;
      readonly cause: 'revoked' | 'budget-spent' | 'not-covered';
      readonly period?: 'day' | 'week';
    }
  | { readonly status: 'none' };

/** The allowance an order is paid on, as the child's order card and the audit page say it. */
export interface AllowanceStanding {
  readonly allowanceId: string;
  readonly period: 'day' | 'week';
  /** What the period has left once this order is paid (its hold counted once). */
  readonly remainingCents: number;
}

/**
 * What {@link Allowances.hold} did: the store's answer, or the terms refused the order. A refusal
 * names the allowance's period once its terms were read, for the words of the hand-over to the parent.
 */
export type AllowanceHoldOutcome =
  | Extract<AllowanceHoldResult, { readonly ok: true }>
  | (Exclude<AllowanceHoldResult, { readonly ok: true }> & { readonly period?: 'day' | 'week' })
  | {
      readonly ok: false;
      readonly reason: 'not-covered';
      readonly detail: string;
      readonly period?: 'day' | 'week';
    };

/** Outcomes of issuing and revoking. */
export type AllowanceOutcome =
  | { readonly ok: true; readonly record: AllowanceRecord }
  | { readonly ok: false; readonly reason: string };

/** Standing allowances (docs/human-authority.md "Standing allowances"): issue, list, cover, hold, revoke. */
export interface Allowances {
  /** Fresh terms for the parent's form, with their hash: the challenge of the passkey ceremony. */
  draft(draft: AllowanceDraft): { ok: true; terms: AllowanceTerms; termsHash: string } | { ok: false; reason: string };
  /** The household signs the `Allowance` once the parent's passkey assertion over the terms' hash verified. */
  issue(input: { readonly terms: AllowanceTerms; readonly assertion: PasskeyAssertion }): Promise<AllowanceOutcome>;
  list(): Promise<readonly AllowanceView[]>;
  revoke(allowanceId: string): Promise<AllowanceOutcome>;
  /** Whether the newest allowance of a child at a merchant covers an order now (read only; the hold is the spend). */
  cover(order: {
    readonly childDid: string;
    readonly merchantDid: string;
    readonly totalCents: number;
  }): Promise<AllowanceCoverOutcome>;
  /**
   * The allowance an order stands on, for the windows (read only): the one its amount is held
   * against, or else the one that would cover it now; `undefined` when none does.
   */
  standing(order: {
    readonly invoiceId: string;
    readonly childDid: string;
    readonly merchantDid: string;
    readonly totalCents: number;
  }): Promise<AllowanceStanding | undefined>;
  /**
   * Spends an order's amount on its allowance, atomically against revocation and the period's
   * budget, after verifying the allowance again: the charge runs only on `ok`.
   */
  hold(input: {
    readonly allowanceId: string;
    readonly invoiceId: string;
    readonly childDid: string;
    readonly merchantDid: string;
    readonly totalCents: number;
  }): Promise<AllowanceHoldOutcome>;
  /** Frees an order's hold when the rail declined it. */
  release(invoiceId: string): Promise<void>;
  /** The allowance an order's amount is held against, if any: an order holding budget is paid on the allowance. */
  holdOf(invoiceId: string): ReturnType<AllowanceStore['holdOf']>;
}

/** Standing allowances over their store, signed by the household over the parent's passkey. */
export function createAllowances(options: AllowancesOptions): Allowances {
  const { household, store } = options;
  const clock = options.clock ?? (() => new Date());
  const verifyCredential = createCredentialVerifier(householdKeys(household));
  const context = (now: Date) => ({
    adminDid: household.adminDid,
    webauthn: { rpId: options.rpId, origin: options.origin },
    now,
    verifyCredential,
    verifyAssertion: verifyAssertionFast,
  });
  const refuse = (reason: string) => ({ ok: false, reason }) as const;

  /** The record's terms verified again from its credential; never trusted from the row alone. */
  async function verified(record: AllowanceRecord, now: Date) {
    const credentialId = passkeyIdOf(record.credential);
    const passkey = credentialId === undefined ? undefined : await household.store.passkeys.get(credentialId);
    if (passkey === undefined) return { verified: false, reason: 'the allowance carries no enrolled passkey' } as const;
    return verifyAllowance(
      { allowance: record.credential, membership: household.memberships.parent, enrollment: passkey.enrollment },
      context(now),
    );
  }

  /** Whether the newest allowance of a child at a merchant covers an order now. */
  async function cover(order: Parameters<Allowances['cover']>[0]): Promise<AllowanceCoverOutcome> {
    const record = await store.latestFor(order.childDid, order.merchantDid);
    if (!record) return { status: 'none' };
    const now = clock();
    const verdict = await verified(record, now);
    const outcome: AllowanceCover = verdict.verified
      ? allowanceCovers(
          verdict.terms,
          { ...order, now: Math.floor(now.getTime() / 1000) },
          {
            revoked: record.revokedAt !== undefined,
            spentCents: await store.spentCents(record.allowanceId, periodKeyOf(verdict.terms, now)),
          },
        )
      : { covered: false, reason: verdict.reason, cause: 'not-covered' };
    if (outcome.covered)
      return { status: 'covered', allowanceId: record.allowanceId, remainingCents: outcome.remainingCents };
    const { reason, cause } = outcome;
    return {
      status: 'not-covered',
      allowanceId: record.allowanceId,
      reason,
      cause,
      ...(verdict.verified ? { period: verdict.terms.period } : {}),
    };
  }

  return {
    draft(draft) {
      const now = Math.floor(clock().getTime() / 1000);
      const parsed = allowanceTermsSchema.safeParse({
        id: `urn:uuid:${randomUUID()}`,
        ...draft,
        notBefore: draft.notBefore ?? now,
        childDid: household.members.child,
      });
      if (!parsed.success) return refuse(parsed.error.issues.map((issue) => issue.message).join('; '));
      return { ok: true, terms: parsed.data, termsHash: allowanceHashOf(canonicalTerms(parsed.data)) };
    },

    async issue({ terms, assertion }) {
      // 1. Terms the household would draft: valid, for its own child, not already signed.
      const checked = allowanceTermsSchema.safeParse(terms);
      if (!checked.success) return refuse('the terms are not valid allowance terms');
      if (checked.data.childDid !== household.members.child) return refuse('the terms name another child');
      if (await store.get(checked.data.id)) return refuse('these terms are already signed');
      const termsText = canonicalTerms(checked.data);
      const termsHash = allowanceHashOf(termsText);
      // 2. The parent's enrolled passkey signed exactly these terms' hash.
      const passkey = await household.store.passkeys.get(assertion.credentialId);
      if (passkey?.role !== 'parent') return refuse('the passkey is not enrolled for the parent');
      const signed = await verifyAssertionFast(assertion, {
        challenge: termsHash,
        origin: options.origin,
        rpId: options.rpId,
        publicKeyJwk: passkey.publicKeyJwk,
      });
      if (!signed.verified) return refuse(signed.reason);
      // 3. The household signs the Allowance carrying that assertion, living as long as the terms say.
      const now = clock();
      const credential = await household.issue({
        signer: 'admin',
        type: 'Allowance',
        subject: household.members.parent,
        claims: { role: 'parent', terms: termsText, termsHash, passkey: assertion },
        now,
        expiresAt: new Date(checked.data.expiresAt * 1000),
      });
      // 4. What is stored must verify as the policy will read it.
      const check = await verifyAllowance(
        { allowance: credential, membership: household.memberships.parent, enrollment: passkey.enrollment },
        context(new Date(Math.max(now.getTime(), checked.data.notBefore * 1000))),
      );
      if (!check.verified)
        throw new IdentityError('issue-failed', `the issued allowance does not verify: ${check.reason}`);
      const record: AllowanceRecord = {
        allowanceId: checked.data.id,
        childDid: checked.data.childDid,
        merchantDid: checked.data.merchantDid,
        credential,
        terms: termsText,
        createdAt: now.getTime(),
        expiresAt: checked.data.expiresAt * 1000,
      };
      await store.put(record);
      return { ok: true, record };
    },

    async list() {
      const now = clock();
      const records = await store.list();
      return Promise.all(
        records.map(async (record): Promise<AllowanceView> => {
          const terms = parseCanonicalTerms(record.terms);
          if (terms === undefined)
            throw new IdentityError('conflict', `allowance ${record.allowanceId} holds no readable terms`);
          const periodKey = periodKeyOf(terms, now);
          const seconds = Math.floor(now.getTime() / 1000);
          const state =
            record.revokedAt !== undefined
              ? 'revoked'
              : seconds >= terms.expiresAt
                ? 'expired'
                : seconds < terms.notBefore
                  ? 'not-started'
                  : 'active';
          const spent = await store.spentCents(record.allowanceId, periodKey);
          return {
            allowanceId: record.allowanceId,
            terms,
            state,
            remainingCents: state === 'active' ? Math.max(0, terms.budgetCents - spent) : 0,
            periodKey,
            ...(record.revokedAt === undefined ? {} : { revokedAt: new Date(record.revokedAt).toISOString() }),
          };
        }),
      );
    },

    async revoke(allowanceId) {
      const record = await store.get(allowanceId);
      if (!record) return refuse(`there is no allowance ${allowanceId}`);
      if (!(await store.revoke(allowanceId, clock().getTime()))) return refuse('the allowance is already revoked');
      return { ok: true, record: (await store.get(allowanceId)) ?? record };
    },

    cover,

    async standing(order) {
      const held = await store.holdOf(order.invoiceId);
      if (held !== undefined) {
        const record = await store.get(held.allowanceId);
        const terms = record && parseCanonicalTerms(record.terms);
        if (terms === undefined) return undefined;
        const spent = await store.spentCents(held.allowanceId, held.periodKey);
        return {
          allowanceId: held.allowanceId,
          period: terms.period,
          remainingCents: Math.max(0, terms.budgetCents - spent),
        };
      }
      const covered = await cover(order);
      if (covered.status !== 'covered') return undefined;
      const record = await store.get(covered.allowanceId);
      const terms = record && parseCanonicalTerms(record.terms);
      return (
        terms && { allowanceId: covered.allowanceId, period: terms.period, remainingCents: covered.remainingCents }
      );
    },

    async hold(input) {
      const record = await store.get(input.allowanceId);
      if (!record) return { ok: false, reason: 'unknown' };
      const now = clock();
      // The signature chain and the terms again: the hold is the spend, so it trusts no earlier check.
      const verdict = await verified(record, now);
      if (!verdict.verified) return { ok: false, reason: 'not-covered', detail: verdict.reason };
      const terms = verdict.terms;
      // Budget and revocation are decided inside the store's transaction, not here.
      const fits = allowanceCovers(
        terms,
        { ...input, now: Math.floor(now.getTime() / 1000) },
        { revoked: false, spentCents: 0 },
      );
      if (!fits.covered) return { ok: false, reason: 'not-covered', detail: fits.reason, period: terms.period };
      const held = await store.hold({
        allowanceId: record.allowanceId,
        periodKey: periodKeyOf(terms, now),
        invoiceId: input.invoiceId,
        amountCents: input.totalCents,
        budgetCents: terms.budgetCents,
        now: now.getTime(),
      });
      return held.ok ? held : { ...held, period: terms.period };
    },

    release: (invoiceId) => store.release(invoiceId),

    holdOf: (invoiceId) => store.holdOf(invoiceId),
  };
}

/** The credential id of the passkey assertion an `Allowance` carries (unverified: it only picks the enrollment). */
function passkeyIdOf(jws: string): string | undefined {
  const claims = decodeSegment(jws.split('.')[1] ?? '') as
    | { vc?: { credentialSubject?: { passkey?: { credentialId?: unknown } } } }
    | undefined;
  const id = claims?.vc?.credentialSubject?.passkey?.credentialId;
  return typeof id === 'string' && id.length > 0 && id.length <= 1024 ? id : undefined;
}
