/** The household store's migrations runner is the proxy's: one implementation for every SQLite file. */
export { type AppliedMigration, applyMigrations, type Migration } from '../proxy/index';
