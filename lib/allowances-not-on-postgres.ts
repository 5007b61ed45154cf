import { type AllowanceStore, IdentityError } from '../identity/index';

/**
 * The allowance store of a household on PostgreSQL until its twin exists (docs/human-authority.md):
 * no standing allowance can be signed there (`put` is refused with the reason), so none exists,
 * and every order asks for the approvals it would without one. Fail closed: an allowance never
 * stands in for the parent on a store that cannot spend its budget atomically across instances.
 */
export function allowancesNotOnPostgres(): AllowanceStore {
  const refuse = (): never => {
    throw new IdentityError(
      'store-failed',
      'standing allowances have no PostgreSQL store yet: sign them on a household that runs on its SQLite file',
    );
  };
  return {
    put: async () => refuse(),
    revoke: async () => refuse(),
    get: async () => undefined,
    list: async () => [],
    latestFor: async () => undefined,
    hold: async () => ({ ok: false, reason: 'unknown' }),
    release: async () => undefined,
    spentCents: async () => 0,
    holdOf: async () => undefined,
  };
}
