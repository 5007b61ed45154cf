/**
 * One process of `household-restart.test.ts`: starts identity on the data folder at argv[2] as
 * the app does, trusts the shop, enrols the child's passkey with a software authenticator, asks
 * approval of a $15 invoice and approves it as the child, then prints what it did as one JSON
 * line and exits without any shutdown step, as a crash would leave the folder.
 *
 *   node --import tsx tests/identity/household-child.ts <data folder>
 */
import { join } from 'node:path';
import { trustMerchant } from '../../identity/index';
import { householdStoreLocation, openHouseholdStore, readHouseholdEnv, startIdentity } from '../../lib/index';
import { loadOrCreateMerchantKey } from '../../shop-agent/index';
import { signCredential } from '../../shop-agent/sign-credential';
import { createSoftwareAuthenticator } from './software-authenticator';

const [dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error('usage: household-child <data folder>');
const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir });
const identity = await startIdentity(env, { store: await openHouseholdStore(householdStoreLocation(env)) });
const merchant = await loadOrCreateMerchantKey(join(dataDir, 'shop'));
await trustMerchant(identity.store.identity.merchants, { did: merchant.did, name: 'Pizza Shop', now: new Date() });

const codes = Object.fromEntries(identity.codes.map(({ role, code }) => [role, code]));
const authenticator = createSoftwareAuthenticator({ origin: env.origin, rpId: env.rpId });
const registration = await identity.passkeys.registration.options({ code: codes.child ?? '' });
if (!registration.ok) throw new Error(registration.reason);
const enrolled = await identity.passkeys.registration.verify({
  ceremonyId: registration.ceremonyId,
  response: authenticator.register(registration.options),
});
if (!enrolled.verified) throw new Error(enrolled.reason);
const session = await identity.passkeys.findSession(enrolled.session.token);
if (!session) throw new Error('no session');

const { jws: invoice } = await signCredential(merchant, {
  type: 'Invoice',
  subject: {
    merchantId: merchant.did,
    merchantName: 'Pizza Shop',
    items: [
      { sku: 'large-pepperoni', name: 'Large pepperoni pizza', qty: 1, unitPriceCents: 1500, listPriceCents: 1500 },
    ],
    totalCents: 1500,
    currency: 'usd',
    deliverTo: '12 Main St',
  },
  ttlSeconds: 300,
  now: new Date(),
});
const requested = await identity.approvals.request(invoice);
if (!requested.ok) throw new Error(requested.reason);
const started = await identity.passkeys.approval.options({ session, approvalId: requested.approvalId });
if (!started.ok) throw new Error(started.reason);
const approved = await identity.passkeys.approval.verify({
  session,
  ceremonyId: started.ceremonyId,
  response: authenticator.assert(started.options),
});
if (!approved.verified) throw new Error(approved.reason);

process.stdout.write(
  `${JSON.stringify({
    adminDid: identity.household.adminDid,
    members: identity.household.members,
    memberships: identity.household.memberships,
    settlementDid: identity.household.settlementDid,
    credentialId: enrolled.session.credentialId,
    sessionToken: enrolled.session.token,
    parentCode: codes.parent,
    approvalId: requested.approvalId,
    invoice,
  })}\n`,
);
process.exit(0);
