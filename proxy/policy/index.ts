/** Public entry of the policy engines and bundles (SPEC §4). Re-exported by `proxy/index.ts`. */
export {
  BANNED,
  type BundleRouterOptions,
  bundleRouter,
  createRouteResolver,
  normaliseName,
  normaliseUrl,
  type Route,
  type RouteClassifier,
  type RouteEntry,
  type RouteResolver,
  type RouteResolverOptions,
} from './bundle-router';
export { CEL_BUILTIN_NAMES, type CelEngineOptions, celChecksSchema, loadCelEngine } from './cel-engine';
export {
  type CommitOptions,
  DEFAULT_EVIDENCE_LEASE_MS,
  type EvidenceId,
  type EvidenceState,
  type EvidenceStore,
  type HeldEvidence,
  type InDoubtOptions,
  type ReserveOptions,
  type ReserveResult,
} from './evidence-store';
export {
  type AssemblyContext,
  type AssemblyResult,
  assembleInput,
  compileFetchPlan,
  type FetchPlan,
  type LookupResolver,
  stripCredentials,
} from './fetch-plan';
export { type Guidance, parseGuidance, renderDenial, renderMissing } from './guidance';
export {
  createHostBuiltins,
  didKeyFromEd25519,
  type Ed25519Jwk,
  type HostBuiltins,
  type HostBuiltinsOptions,
  keyFromDidKey,
} from './host-builtins';
export { type LoadBundleOptions, loadBundle, type PolicyBundle } from './load-bundle';
export { type PolicyAugmenterOptions, policyAugmenter } from './policy-augmenter';
export { normaliseOutcome, type PolicyEngine, type PolicyOutcome, type RawEngineResult } from './policy-engine';
export { type PolicyDecisionRecord, type PolicyFilterOptions, policyFilter } from './policy-filter';
export {
  createPostgresEvidenceStore,
  openPostgresEvidenceStore,
  type PostgresEvidenceStoreOptions,
  type PostgresEvidenceStoreSettings,
  postgresEvidenceStoreMigrations,
} from './postgres-evidence-store';
export { loadRegoEngine, type RegoEngine, type RegoEngineOptions, regoBuiltinTable } from './rego-engine';
export { type RegoPolicyFilterOptions, regoPolicyFilter } from './rego-policy-filter';
export { type SafeJsonResult, safeJsonParse } from './safe-json';
export {
  DEFAULT_MAX_EVIDENCE_LIFETIME_MS,
  DEFAULT_MAX_RESULT_BYTES,
  PAYMENT_IN_PROGRESS_REASON,
  type ResolveInDoubt,
  type SingleUseFilterOptions,
  type SpendMode,
  singleUseFilter,
} from './single-use';
export {
  createSqliteEvidenceStore,
  type EvidenceStoreMigration,
  evidenceStoreMigrations,
  openSqliteEvidenceStore,
  type SqliteEvidenceStoreOptions,
  type SqliteEvidenceStoreSettings,
} from './sqlite-evidence-store';
