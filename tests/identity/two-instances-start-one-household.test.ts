/**
 * Issue 28, "starting N instances on one database is safe": two instances start at once on one
 * empty store, each as an app start does (the household opened, then enrollment codes kept if
 * live). They share the sealing key file, as every instance must. There is one household, of
 * four DIDs, and the codes printed by whichever instance issued them still enrol, through the
 * other instance too. Run on SQLite (two connections on one file) and PostgreSQL (two pools).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createApprovals,
  createPasskeys,
  type IdentityStore,
  type IssuedEnrollmentCode,
  issueEnrollmentCodes,
  openHousehold,
  roles,
} from '../../identity/index';
import { householdStoreOpeners } from '../support/household-store-openers';
import { postgresAvailable, postgresUnavailable } from '../support/postgres';
import { createSoftwareAuthenticator } from './software-authenticator';

const origin = 'http://localhost:3000';
const rpId = 'localhost';
const { implementations, cleanUp } = householdStoreOpeners();
const folders: string[] = [];
afterEach(async () => {
  await cleanUp();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** One instance's start: the household, then this start's codes (startIdentity's steps). */
async function start(store: IdentityStore, dataDir: string, now: Date) {
  const household = await openHousehold({ store, dataDir, now: () => now });
  const codes = await issueEnrollmentCodes({ store, now, keepLive: true });
  const approvals = createApprovals({ household, origin, rpId, clock: () => now });
  const passkeys = createPasskeys({ household, approvals, origin, rpId, clock: () => now });
  return { household, codes, passkeys };
}

it.skipIf(postgresAvailable)(`the PostgreSQL start is skipped: ${postgresUnavailable}`, () => {});

describe.each(Object.entries(implementations))(
  'two instances starting at once on one empty %s store',
  (_name, kind) => {
    it('make one household, the codes printed at that start enrol through either instance, and only digests are stored', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'two-starts-'));
      folders.push(dataDir);
      const location = await kind.location();
      const [a, b] = await Promise.all([kind.open(location), kind.open(location)]);
      const now = new Date('2026-06-01T10:00:00.000Z');
      const [first, second] = await Promise.all([start(a.identity, dataDir, now), start(b.identity, dataDir, now)]);

      // One household: the same DIDs and credentials on both, and only its four DIDs in the store.
      expect(second.household.adminDid).toBe(first.household.adminDid);
      expect(second.household.members).toStrictEqual(first.household.members);
      expect(second.household.memberships).toStrictEqual(first.household.memberships);
      expect(second.household.adminJwk).toStrictEqual(first.household.adminJwk);
      expect(second.household.settlementDid).toBe(first.household.settlementDid);
      expect((await a.identity.records.list('did')).map((record) => record.id).sort()).toEqual(
        [first.household.adminDid, first.household.settlementDid, ...Object.values(first.household.members)].sort(),
      );
      // Both instances sign with the one admin key.
      expect(first.household.adminDocument).toStrictEqual(second.household.adminDocument);

      // Each role's code was issued by exactly one of the two starts: nobody's printed code was voided.
      const printed: IssuedEnrollmentCode[] = [...first.codes, ...second.codes];
      expect(printed.map((issued) => issued.role).sort()).toEqual([...roles].sort());
      for (const issued of printed) {
        // Enrol through the instance that did not print it.
        const other = first.codes.includes(issued) ? second : first;
        const authenticator = createSoftwareAuthenticator({ origin, rpId });
        const options = await other.passkeys.registration.options({ code: issued.code });
        if (!options.ok) throw new Error(options.reason);
        const enrolled = await other.passkeys.registration.verify({
          ceremonyId: options.ceremonyId,
          response: authenticator.register(options.options),
        });
        expect(enrolled).toMatchObject({ verified: true, session: { role: issued.role } });
      }
    });
  },
);
