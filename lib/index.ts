/**
 * The household runtime (SPEC §2): environment, the one SQLite store, and identity started on
 * it. The public entry `app/` imports; payments, events and the composition root join it later.
 */
export { type HouseholdEnv, readHouseholdEnv } from './env';
export { runHouseholdCli } from './household-cli';
export {
  type IdentityOptions,
  type OpenIdentity,
  openIdentity,
  type StartedIdentity,
  startIdentity,
  storeFileName,
} from './start-identity';
export { type HouseholdStore, type HouseholdStoreOptions, openHouseholdStore } from './store';
