import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { checkEnrollmentCode, createCredentialVerifier, householdKeys } from '../../identity/index';
import { householdStoreLocation, openHouseholdStore, openIdentity, readHouseholdEnv } from '../../lib/index';

// A crash at any step loses no approval (SPEC §10.10): one process sets up the household, enrols
// the child's passkey and half-approves a $15 order, then exits with no shutdown step; a new
// process finds every piece of it, live.
const root = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
afterEach(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

function runChild(dataDir: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'tests/identity/household-child.ts', dataDir],
      { cwd: root, env: { PATH: process.env.PATH ?? '' } },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}'));
      },
    );
  });
}

describe('the household after a restart', () => {
  it('keeps the household, the passkey and its counter, the parent code, the session and the half-approved order', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'household-restart-'));
    folders.push(dataDir);
    const before = await runChild(dataDir);

    const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir });
    const identity = await openIdentity(env, { store: await openHouseholdStore(householdStoreLocation(env)) });
    try {
      const { household, store, approvals, passkeys } = identity;
      expect({
        adminDid: household.adminDid,
        members: household.members,
        memberships: household.memberships,
        settlementDid: household.settlementDid,
      }).toEqual({
        adminDid: before.adminDid,
        members: before.members,
        memberships: before.memberships,
        settlementDid: before.settlementDid,
      });
      const passkey = await store.identity.passkeys.get(String(before.credentialId));
      expect(passkey).toMatchObject({ role: 'child', memberDid: household.members.child });
      expect(passkey?.counter).toBeGreaterThan(0);
      expect(await passkeys.findSession(String(before.sessionToken))).toMatchObject({ role: 'child' });
      expect(
        await checkEnrollmentCode({ store: store.identity, code: String(before.parentCode), now: new Date() }),
      ).toMatchObject({
        ok: true,
        role: 'parent',
      });

      const approvalId = String(before.approvalId);
      expect(await approvals.wait({ approvalId, timeoutMs: 1 })).toEqual({
        status: 'pending',
        approvalId,
        waitingFor: ['parent'],
      });
      const record = await store.identity.approvals.get(approvalId);
      expect(record?.invoice).toBe(before.invoice);
      // The child's approval, signed before the crash, still verifies with the household's keys.
      const verdict = await createCredentialVerifier(householdKeys(household))(record?.approvals.child ?? '', {
        type: 'OrderApproval',
        issuer: household.members.child,
        now: new Date(),
      });
      expect(verdict).toMatchObject({ verified: true, credential: { subject: { approvalId, role: 'child' } } });
      expect(await approvals.pendingFor('parent')).toEqual([
        expect.objectContaining({
          approvalId,
          approvedRoles: ['child'],
          terms: expect.objectContaining({ totalCents: 1500 }),
        }),
      ]);
    } finally {
      identity.close();
    }
  });
});
