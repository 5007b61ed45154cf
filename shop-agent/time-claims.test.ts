import { describe, expect, it } from 'vitest';
import { checkTimeClaims } from './time-claims.js';

const NOW = 1_767_225_600;
const at = new Date(NOW * 1000);
const check = (claims: Record<string, unknown>) => checkTimeClaims(claims, { now: at, maxLifetimeSeconds: 300 });

describe('checkTimeClaims (SPEC §5.2)', () => {
  it('accepts a credential inside every bound, including 60 s of skew and the full lifetime', () => {
    expect(check({ iat: NOW, nbf: NOW, exp: NOW + 300 })).toEqual({ ok: true, expiresAt: NOW + 300 });
    expect(check({ iat: NOW + 60, nbf: NOW + 60, exp: NOW + 360 }).ok).toBe(true);
  });

  it.each([
    ['no exp', { iat: NOW, nbf: NOW }, /exp/],
    ['no iat', { nbf: NOW, exp: NOW + 60 }, /iat/],
    ['no nbf', { iat: NOW, exp: NOW + 60 }, /nbf/],
    ['a string exp', { iat: NOW, nbf: NOW, exp: `${NOW + 60}` }, /exp/],
    ['an exp of 1e16', { iat: NOW, nbf: NOW, exp: 1e16 }, /exp/],
    ['iat 61 s ahead', { iat: NOW + 61, nbf: NOW, exp: NOW + 120 }, /iat.*future/],
    ['nbf 61 s ahead', { iat: NOW, nbf: NOW + 61, exp: NOW + 120 }, /not valid yet/],
    ['exp now', { iat: NOW - 10, nbf: NOW - 10, exp: NOW }, /expired/],
    ['exp before iat', { iat: NOW + 30, nbf: NOW, exp: NOW + 10 }, /not after/],
    ['a lifetime one second too long', { iat: NOW, nbf: NOW, exp: NOW + 301 }, /lifetime/],
  ])('refuses %s', (_name, claims, reason) => {
    const verdict = check(claims);
    expect(verdict.ok).toBe(false);
    expect(verdict.ok ? '' : verdict.reason).toMatch(reason);
  });
});
