import { describe, expect, it } from 'vitest';
import {
  checkEnrollmentCode,
  enrollmentCodeLifetimeMs,
  enrollmentFailureLimit,
  enrollmentFailureWindowMs,
  hashEnrollmentCode,
  issueEnrollmentCodes,
} from './enrollment-codes';
import type { IdentityEvent } from './events';
import type { EnrollmentCodeRecord, EnrollmentStore, PasskeyStore, Role } from './store';

/** The enrollment and passkey parts of the store, in memory, with the compare-and-set of the contract. */
function memoryStore(enrolledRoles: readonly Role[] = []) {
  const codes = new Map<Role, EnrollmentCodeRecord>();
  const failures: Array<{ role: Role; at: number; source: string }> = [];
  const enrollment: EnrollmentStore = {
    replaceCode: async (record) => {
      codes.set(record.role, record);
    },
    issueCode: async (record, now) => {
      const live = codes.get(record.role);
      if (live !== undefined && live.usedAt === undefined && live.expiresAt > now) return false;
      codes.set(record.role, record);
      return true;
    },
    getCode: async (role) => codes.get(role),
    consumeCode: async (role, codeHash, now) => {
      const record = codes.get(role);
      if (
        record === undefined ||
        record.codeHash !== codeHash ||
        record.usedAt !== undefined ||
        record.expiresAt <= now
      ) {
        return false;
      }
      codes.set(role, { ...record, usedAt: now });
      return true;
    },
    addFailure: async (role, now, source) => {
      failures.push({ role, at: now, source });
    },
    countFailures: async (role, since, source) =>
      failures.filter(
        (failure) =>
          failure.role === role && failure.at >= since && (source === undefined || failure.source === source),
      ).length,
  };
  const passkeys = {
    listByRole: async (role: Role) => (enrolledRoles.includes(role) ? [{ role }] : []),
  } as unknown as PasskeyStore;
  return { store: { enrollment, passkeys }, codes, failures };
}

const start = new Date('2026-06-01T10:00:00Z');
const later = (ms: number) => new Date(start.getTime() + ms);

describe('issueEnrollmentCodes', () => {
  it('issues a code per role without a passkey, in the documented format, stored only as its SHA-256', async () => {
    const { store, codes } = memoryStore(['parent']);
    const events: IdentityEvent[] = [];
    const issued = await issueEnrollmentCodes({ store, now: start, events: (event) => events.push(event) });
    expect(issued.map((code) => code.role)).toEqual(['child']);
    const code = issued[0]?.code ?? '';
    expect(code).toMatch(/^child-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$/);
    const stored = codes.get('child');
    expect(stored?.codeHash).toBe(hashEnrollmentCode(code));
    expect(JSON.stringify([...codes.values()])).not.toContain(code.slice(6));
    expect(stored?.expiresAt).toBe(start.getTime() + enrollmentCodeLifetimeMs);
    expect(codes.has('parent')).toBe(false);
    // The event names the role only, never the code.
    expect(events).toEqual([{ kind: 'enrollment-code-issued', role: 'child' }]);
  });

  it('rotates the named roles even when enrolled, and a rotated code replaces the old one', async () => {
    const { store } = memoryStore(['child', 'parent']);
    expect(await issueEnrollmentCodes({ store, now: start })).toEqual([]);
    const [first] = await issueEnrollmentCodes({ store, now: start, roles: ['parent'] });
    const [second] = await issueEnrollmentCodes({ store, now: start, roles: ['parent'] });
    expect(first?.role).toBe('parent');
    expect(second?.code).not.toBe(first?.code);
    expect(await checkEnrollmentCode({ store, code: first?.code ?? '', now: start })).toMatchObject({
      ok: false,
      reason: 'wrong enrollment code',
    });
    expect(await checkEnrollmentCode({ store, code: second?.code ?? '', now: start })).toMatchObject({
      ok: true,
      role: 'parent',
    });
  });

  it('with keepLive, keeps a live code (nothing issued, the printed code still checks) and replaces a used or expired one', async () => {
    const { store } = memoryStore(['parent']);
    const [first] = await issueEnrollmentCodes({ store, now: start, keepLive: true });
    expect(first?.role).toBe('child');
    expect(await issueEnrollmentCodes({ store, now: later(1), keepLive: true })).toEqual([]);
    expect(await checkEnrollmentCode({ store, code: first?.code ?? '', now: later(2) })).toMatchObject({ ok: true });
    const [afterExpiry] = await issueEnrollmentCodes({ store, now: later(enrollmentCodeLifetimeMs), keepLive: true });
    expect(afterExpiry?.code).not.toBe(first?.code);
    const check = await checkEnrollmentCode({
      store,
      code: afterExpiry?.code ?? '',
      now: later(enrollmentCodeLifetimeMs),
    });
    if (!check.ok) throw new Error(check.reason);
    await store.enrollment.consumeCode('child', check.codeHash, later(enrollmentCodeLifetimeMs).getTime());
    expect(
      await issueEnrollmentCodes({ store, now: later(enrollmentCodeLifetimeMs + 1), keepLive: true }),
    ).toHaveLength(1);
  });

  it('codes differ each time (randomness, not a counter)', async () => {
    const { store } = memoryStore();
    const seen = new Set<string>();
    for (let index = 0; index < 50; index++) {
      for (const { code } of await issueEnrollmentCodes({ store, now: start })) seen.add(code.slice(-14));
    }
    expect(seen.size).toBe(100);
  });
});

describe('checkEnrollmentCode', () => {
  it('accepts the code as typed by a person (case, spaces, O/I/L look-alikes) and grants the stored role', async () => {
    const { store, codes } = memoryStore();
    const [issued] = await issueEnrollmentCodes({ store, now: start, roles: ['child'] });
    const code = issued?.code ?? '';
    const sloppy = ` ${code.toLowerCase().replace(/0/g, 'o').replace(/1/g, 'l').replace(/-/g, ' - ')} `;
    const check = await checkEnrollmentCode({ store, code: sloppy, now: start });
    expect(check).toEqual({ ok: true, role: 'child', codeHash: codes.get('child')?.codeHash });
  });

  it('does not use the code up: only the ceremony consumes it', async () => {
    const { store } = memoryStore();
    const [issued] = await issueEnrollmentCodes({ store, now: start });
    expect((await checkEnrollmentCode({ store, code: issued?.code ?? '', now: start })).ok).toBe(true);
    expect((await checkEnrollmentCode({ store, code: issued?.code ?? '', now: start })).ok).toBe(true);
  });

  it('refuses a wrong code, a used code and an expired code, each with its reason, and counts each failure', async () => {
    const { store, failures } = memoryStore();
    const [child] = await issueEnrollmentCodes({ store, now: start, roles: ['child'] });
    const code = child?.code ?? '';
    expect(await checkEnrollmentCode({ store, code: 'child-0000-0000-0000', now: start })).toEqual({
      ok: false,
      reason: 'wrong enrollment code',
      rateLimited: false,
      role: 'child',
    });
    expect(await checkEnrollmentCode({ store, code: `${code}X`, now: start })).toMatchObject({
      reason: 'wrong enrollment code',
    });
    expect(await checkEnrollmentCode({ store, code, now: later(enrollmentCodeLifetimeMs) })).toMatchObject({
      ok: false,
      reason: 'this enrollment code has expired; ask the operator to rotate codes',
    });
    const check = await checkEnrollmentCode({ store, code, now: start });
    expect(check.ok).toBe(true);
    if (!check.ok) return;
    expect(await store.enrollment.consumeCode('child', check.codeHash, start.getTime())).toBe(true);
    expect(await checkEnrollmentCode({ store, code, now: start })).toMatchObject({
      ok: false,
      reason: 'this enrollment code was already used; ask the operator for a new one',
    });
    expect(failures.filter((failure) => failure.role === 'child')).toHaveLength(4);
  });

  it('refuses a code with an unknown role prefix without counting it against any role', async () => {
    const { store, failures } = memoryStore();
    await issueEnrollmentCodes({ store, now: start });
    const check = await checkEnrollmentCode({ store, code: 'admin-ABCD-EFGH-JKMN', now: start });
    expect(check).toMatchObject({ ok: false, rateLimited: false });
    expect(check.ok ? '' : check.reason).toMatch(/not an enrollment code/);
    expect(failures).toEqual([]);
  });

  it('the prefix picks which code to compare: the child code with a parent prefix is wrong', async () => {
    const { store } = memoryStore();
    const issued = await issueEnrollmentCodes({ store, now: start });
    const childBody = issued.find((code) => code.role === 'child')?.code.slice('child-'.length) ?? '';
    expect(await checkEnrollmentCode({ store, code: `parent-${childBody}`, now: start })).toMatchObject({
      ok: false,
      reason: 'wrong enrollment code',
      role: 'parent',
    });
  });

  it(`throttles a window after ${enrollmentFailureLimit} wrong codes, refusing even the right code there, per role, until the window passes`, async () => {
    const { store } = memoryStore();
    const issued = await issueEnrollmentCodes({ store, now: start });
    const childCode = issued.find((code) => code.role === 'child')?.code ?? '';
    const parentCode = issued.find((code) => code.role === 'parent')?.code ?? '';
    for (let attempt = 0; attempt < enrollmentFailureLimit; attempt++) {
      expect(await checkEnrollmentCode({ store, code: 'child-ZZZZ-ZZZZ-ZZZZ', now: later(attempt) })).toMatchObject({
        rateLimited: false,
      });
    }
    const locked = await checkEnrollmentCode({ store, code: childCode, now: later(10) });
    expect(locked).toEqual({
      ok: false,
      reason: 'too many wrong codes for child from this window, wait 15 minutes and try again',
      rateLimited: true,
      role: 'child',
    });
    // Another window (source) is not throttled by this one's wrong codes.
    expect((await checkEnrollmentCode({ store, code: childCode, now: later(10), source: 'another' })).ok).toBe(true);
    // The parent's attempts are counted separately.
    expect((await checkEnrollmentCode({ store, code: parentCode, now: later(10) })).ok).toBe(true);
    // Once the failures age out of the window, the right code works again.
    expect((await checkEnrollmentCode({ store, code: childCode, now: later(enrollmentFailureWindowMs + 10) })).ok).toBe(
      true,
    );
  });
});
