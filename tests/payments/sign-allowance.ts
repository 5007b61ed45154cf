import { createAllowances } from '../../identity/index';
import { assertCall } from '../identity/call-approval-support';
import { origin, rpId } from '../identity/support';
import type { TestHousehold } from './household';

const day = 24 * 60 * 60;

/**
 * The parent signs a standing allowance at the household's shop with the passkey, as the parent
 * window does: $5.00 an order and $10.00 a day (or `limits`), in Paris time, for thirty days.
 */
export async function signAllowance(
  started: TestHousehold,
  limits: { readonly perOrderCapCents: number; readonly budgetCents: number } = {
    perOrderCapCents: 500,
    budgetCents: 1000,
  },
) {
  const { runtime, members } = started;
  const allowances = createAllowances({
    household: runtime.identity.household,
    store: runtime.identity.store.allowances,
    origin,
    rpId,
  });
  const drafted = allowances.draft({
    merchantDid: runtime.merchant?.did ?? '',
    merchantName: 'Main Street Pizza',
    ...limits,
    period: 'day',
    timeZone: 'Europe/Paris',
    expiresAt: Math.floor(Date.now() / 1000) + 30 * day,
  });
  if (!drafted.ok) throw new Error(drafted.reason);
  const issued = await allowances.issue({
    terms: drafted.terms,
    assertion: assertCall(members.parent.authenticator, drafted.termsHash),
  });
  if (!issued.ok) throw new Error(issued.reason);
  return { allowances, allowanceId: drafted.terms.id };
}
