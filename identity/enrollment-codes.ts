import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IdentityEventSink } from './events';
import { type IdentityStore, type Role, roles } from './store';

/** How long an enrollment code stays usable after it is issued: one day, enough to walk to the device. */
export const enrollmentCodeLifetimeMs = 24 * 60 * 60 * 1000;

/**
 * Wrong codes allowed from one approval-window session, per role, within
 * {@link enrollmentFailureWindowMs} before that session is throttled (issue 26 item 12: five
 * anonymous wrong codes once locked the real member out; now they throttle only the window that
 * typed them).
 */
export const enrollmentFailureLimit = 5;

/** The sliding window a session's wrong codes are counted in. */
export const enrollmentFailureWindowMs = 15 * 60 * 1000;

/**
 * Wrong codes allowed per role from every source together within {@link enrollmentCeilingWindowMs}:
 * the ceiling that keeps a 12-symbol code unguessable however many sessions a guesser opens
 * (identity/README.md has the arithmetic). Reaching it locks the role, even for the right code,
 * until the failures age out or the operator issues a fresh code (`npm run household --
 * rotate-codes`), which resets the role's lock: only failures against the live code count.
 */
export const enrollmentFailureCeiling = 30;

/** The sliding window the ceiling is counted in. */
export const enrollmentCeilingWindowMs = 60 * 60 * 1000;

/** Crockford base32: no I, L, O or U, so a code read aloud or typed from a terminal survives. */
const crockford = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** 12 symbols of 5 bits: 60 random bits, `<role>-XXXX-XXXX-XXXX`. */
const symbols = 12;

/** What {@link issueEnrollmentCodes} needs. */
export interface IssueEnrollmentCodesOptions {
  readonly store: Pick<IdentityStore, 'enrollment' | 'passkeys'>;
  readonly now: Date;
  /** Rotate exactly these roles (enrolled or not); default: every role without an enrolled passkey. */
  readonly roles?: readonly Role[];
  /**
   * Leave a role whose code is still live (unused and unexpired) alone instead of replacing it, as
   * an app start does: a second instance starting beside the first must not void the codes the
   * first one printed. Default `false` (rotate-codes replaces).
   */
  readonly keepLive?: boolean;
  readonly events?: IdentityEventSink;
}

/** A fresh code, to print to the operator's terminal and nowhere else. */
export interface IssuedEnrollmentCode {
  readonly role: Role;
  readonly code: string;
}

/**
 * Issues one-time enrollment codes (SPEC §5.3): each role without an enrolled passkey (or each role
 * named, for `rotate-codes --role`) gets a fresh code that replaces its previous one, or, with
 * `keepLive`, only when it has no live one (one atomic step in the store, so of several instances
 * starting at once only one issues). Only the code's SHA-256 is stored; the code itself is returned
 * once, for the terminal.
 */
export async function issueEnrollmentCodes(options: IssueEnrollmentCodesOptions): Promise<IssuedEnrollmentCode[]> {
  const issuedAt = options.now.getTime();
  const wanted: Role[] = [];
  if (options.roles !== undefined) {
    wanted.push(...new Set(options.roles));
  } else {
    for (const role of roles) {
      if ((await options.store.passkeys.listByRole(role)).length === 0) wanted.push(role);
    }
  }
  const issued: IssuedEnrollmentCode[] = [];
  for (const role of wanted) {
    const code = `${role}-${grouped(randomSymbols())}`;
    const record = {
      role,
      codeHash: hashEnrollmentCode(code),
      issuedAt,
      expiresAt: issuedAt + enrollmentCodeLifetimeMs,
    };
    if (options.keepLive === true) {
      if (!(await options.store.enrollment.issueCode(record, issuedAt))) continue;
    } else {
      await options.store.enrollment.replaceCode(record);
    }
    options.events?.({ kind: 'enrollment-code-issued', role });
    issued.push({ role, code });
  }
  return issued;
}

/** What {@link checkEnrollmentCode} needs. */
export interface CheckEnrollmentCodeOptions {
  readonly store: Pick<IdentityStore, 'enrollment'>;
  /** The code as the person typed it; case, spaces and Crockford look-alikes (O, I, L) are forgiven. */
  readonly code: string;
  readonly now: Date;
  /**
   * Who is guessing: an opaque id of the approval-window session (the HTTP handlers use a hash of
   * the window's cookie). A guesser who drops the cookie gets a fresh source per guess; the
   * per-role ceiling bounds them.
   */
  readonly source?: string;
}

/** The outcome of {@link checkEnrollmentCode}. */
export type EnrollmentCodeCheck =
  | { readonly ok: true; readonly role: Role; readonly codeHash: string }
  | { readonly ok: false; readonly reason: string; readonly rateLimited: boolean; readonly role?: Role };

/**
 * Checks an enrollment code without using it up (SPEC §5.3). The prefix only says which role's code
 * to compare against (and whose failures to count); the role granted is the stored code's role. The
 * code is consumed by the registration ceremony once it verifies, so a cancelled browser prompt
 * does not burn it.
 */
export async function checkEnrollmentCode(options: CheckEnrollmentCodeOptions): Promise<EnrollmentCodeCheck> {
  const now = options.now.getTime();
  // 1. Parse `<role>-XXXX-XXXX-XXXX`. Without a known role there is no code to compare and no
  //    per-role counter to charge; nothing is stored.
  const parsed = parseEnrollmentCode(options.code);
  if (parsed.role === undefined) {
    return {
      ok: false,
      reason: 'not an enrollment code: expected child-XXXX-XXXX-XXXX or parent-XXXX-XXXX-XXXX',
      rateLimited: false,
    };
  }
  const role = parsed.role;
  const source = options.source ?? unidentifiedSource;
  const { enrollment } = options.store;
  const stored = await enrollment.getCode(role);
  // 2. Rate limits before looking at the code: while limited even the right code is refused, so
  //    guessing gains nothing from the answers. Only failures against the live code count, so a
  //    fresh code from the operator resets the role's lock.
  const issuedAt = stored?.issuedAt ?? 0;
  const ceiling = await enrollment.countFailures(role, Math.max(issuedAt, now - enrollmentCeilingWindowMs));
  if (ceiling >= enrollmentFailureCeiling) {
    return {
      ok: false,
      reason: `too many wrong codes for ${role} in the last hour; ask the operator for a fresh code (npm run household -- rotate-codes), which lifts the lock`,
      rateLimited: true,
      role,
    };
  }
  const mine = await enrollment.countFailures(role, Math.max(issuedAt, now - enrollmentFailureWindowMs), source);
  if (mine >= enrollmentFailureLimit) {
    return {
      ok: false,
      reason: `too many wrong codes for ${role} from this window, wait ${enrollmentFailureWindowMs / 60_000} minutes and try again`,
      rateLimited: true,
      role,
    };
  }
  const refuse = async (reason: string): Promise<EnrollmentCodeCheck> => {
    await enrollment.addFailure(role, now, source);
    return { ok: false, reason, rateLimited: false, role };
  };
  if (parsed.canonical === undefined) return refuse('wrong enrollment code');
  // 3. Compare hashes in constant time; an absent code is compared against a dummy so timing says
  //    nothing about whether the role has a live code.
  const codeHash = hashEnrollmentCode(parsed.canonical);
  const expected = stored?.codeHash ?? '0'.repeat(codeHash.length);
  const same =
    expected.length === codeHash.length &&
    timingSafeEqual(Buffer.from(expected, 'utf8'), Buffer.from(codeHash, 'utf8'));
  if (stored === undefined || !same) return refuse('wrong enrollment code');
  // 4. A right code must also be live: unused and unexpired.
  if (stored.usedAt !== undefined)
    return refuse('this enrollment code was already used; ask the operator for a new one');
  if (stored.expiresAt <= now) return refuse('this enrollment code has expired; ask the operator to rotate codes');
  return { ok: true, role: stored.role, codeHash };
}

/** The source charged when a caller names none (in-process callers; the HTTP handlers always name one). */
const unidentifiedSource = 'unidentified';

/** SHA-256 hex of a canonical code: the only form a code is stored in. */
export function hashEnrollmentCode(code: string): string {
  return createHash('sha256').update(code, 'utf8').digest('hex');
}

/** Splits a typed code into its role and canonical form (`child-ABCD-EFGH-JKMN`), forgiving case and look-alikes. */
function parseEnrollmentCode(input: string): { role?: Role; canonical?: string } {
  const match = /^\s*(child|parent)\s*-(.*)$/i.exec(input.slice(0, 200));
  const prefix = match?.[1]?.toLowerCase();
  const role = roles.find((candidate) => candidate === prefix);
  if (role === undefined) return {};
  const body = (match?.[2] ?? '').replace(/[\s-]/g, '').toUpperCase().replace(/O/g, '0').replace(/[IL]/g, '1');
  if (body.length !== symbols || [...body].some((symbol) => !crockford.includes(symbol))) return { role };
  return { role, canonical: `${role}-${grouped(body)}` };
}

/** 60 uniformly random bits as 12 Crockford symbols. */
function randomSymbols(): string {
  let bits = randomBytes(8).readBigUInt64BE();
  let out = '';
  for (let index = 0; index < symbols; index++) {
    out += crockford[Number(bits & 31n)];
    bits >>= 5n;
  }
  return out;
}

function grouped(body: string): string {
  return `${body.slice(0, 4)}-${body.slice(4, 8)}-${body.slice(8, 12)}`;
}
