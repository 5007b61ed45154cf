/**
 * The extensible-mcp proxy library: the one public entry every other folder imports. It exports
 * the gateway, its faces, the filter factories and the types; never a downstream connection, the
 * tool index or CLI plumbing (SPEC §3.12, §10.1).
 */

export { defaultConfigPaths, loadConfig, type ProxyConfig, resolveConfigPath, type ServerConfig } from './config';
export { type CredentialLookup, createTokenCredentials, type TokenCredentialsOptions } from './credentials/index';
export { ProxyError, type ProxyErrorCode, proxyErrorCodes } from './errors';
export { type AccessControlOptions, accessControl } from './filters/access-control';
export {
  type ApprovalDecisionRecord,
  type ApprovalRequiredOptions,
  type ApprovalRule,
  approvalRequired,
  approvalRequiredKey,
  type CallApprovalCheck,
  type CallApprovalGate,
  type CallApprovalProof,
  type GatedCall,
} from './filters/approval-required';
export { type ApprovedCall, callHashOf, canonicalCall } from './filters/call-hash';
export { hideTools } from './filters/hide-tools';
export { type LoadControlOptions, loadControl } from './filters/load-control';
export { similarityThreshold } from './filters/similarity-threshold';
export { gatewayOptionsFromConfig } from './from-config';
export {
  clampTopK,
  createGateway,
  defaultConnectTimeoutMs,
  type EmbeddingOptions,
  type GatewayOptions,
  type Governance,
  type GovernedBundle,
  type LocalTool,
  outcomeMetaKey,
  type ProxyLogger,
} from './gateway/create-gateway';
export { scopeDigest } from './gateway/discovery-scope';
export {
  type DiscoveryLimits,
  type DiscoveryStore,
  defaultDiscoveryLimits,
  memoryDiscoveryStore,
} from './gateway/discovery-store';
export {
  createPostgresDiscoveryStore,
  openPostgresDiscoveryStore,
  type PostgresDiscoveryStoreOptions,
  postgresDiscoveryStoreMigrations,
} from './gateway/postgres-discovery-store';
export {
  createSqliteDiscoveryStore,
  discoveryStoreMigrations,
  openSqliteDiscoveryStore,
  type SqliteDiscoveryStoreOptions,
} from './gateway/sqlite-discovery-store';
export type {
  Admission,
  AdmitReport,
  CallContext,
  CallFilter,
  CallInput,
  CallRequest,
  CallVerdict,
  DiscoveryScope,
  Dispatch,
  DispatchOutcome,
  DownstreamProtocol,
  DownstreamSpec,
  Elicit,
  EventHook,
  Gateway,
  LinkableServer,
  ListingConnection,
  LoadFilter,
  LoadRequest,
  LoadResult,
  LoadVerdict,
  PipelineName,
  Principal,
  ProxyEvent,
  RelayRequest,
  ResponseFilter,
  ResponseVerdict,
  SearchFilter,
  SearchHit,
  SearchMode,
  SearchQuery,
  SearchResult,
  ServerFacts,
  StartReport,
  ToolHeldFacts,
  UrlElicitation,
} from './gateway/types';
export {
  type ConnectSession,
  createHttpHandler,
  createSessionHttpHandler,
  type HttpHandler,
  type HttpHandlerOptions,
  type HttpRequestContext,
} from './http/http-handler';
export { anonymousPrincipal, checkInboundTokens, type InboundToken, readInboundTokens } from './http/inbound-tokens';
export { type HttpEndpoint, type ServeHttpOptions, serveHttp } from './http/serve-http';
export { type ConnectInMemoryOptions, connectInMemory } from './meta-tools/connect-in-memory';
export { createInputRounds, type InputRounds, type InputRoundsOptions, urlWaitMs } from './meta-tools/input-rounds';
export { createSearchModeServer } from './meta-tools/search-mode-server';
export { createStatelessLeg, type StatelessLeg } from './meta-tools/stateless-search-mode-server';
export { nameSeparator, qualifyName } from './names';
export { acquirePidFile, type HeldPidFile, type SignalOutcome, signalRunningProxy } from './pid-file';
export {
  createSqlitePinStore,
  type HeldDefinition,
  type HoldReason,
  openSqlitePinStore,
  type PinStatus,
  type PinStore,
  type PinsFile,
  type PinsIo,
  type PinsTarget,
  pinDefinition,
  pinStoreMigrations,
  readPinsFile,
  runPinsCommand,
  seedPins,
} from './pins/index';
export { createPostgresPinStore, postgresPinStoreMigrations } from './pins/postgres-pin-store';
export {
  createHostBuiltins,
  createPostgresEvidenceStore,
  createRouteResolver,
  createSqliteEvidenceStore,
  DEFAULT_EVIDENCE_LEASE_MS,
  type EvidenceId,
  type EvidenceState,
  type EvidenceStore,
  type EvidenceStoreMigration,
  evidenceStoreMigrations,
  type HeldEvidence,
  type HostBuiltins,
  keyFromDidKey,
  type LookupResolver,
  loadBundle,
  openPostgresEvidenceStore,
  openSqliteEvidenceStore,
  PAYMENT_IN_PROGRESS_REASON,
  type PolicyBundle,
  type PolicyDecisionRecord,
  type PolicyOutcome,
  type PostgresEvidenceStoreOptions,
  type PostgresEvidenceStoreSettings,
  policyFilter,
  postgresEvidenceStoreMigrations,
  type ResolveInDoubt,
  type Route,
  type RouteEntry,
  type RouteResolver,
  regoPolicyFilter,
  type SingleUseFilterOptions,
  type SpendMode,
  type SqliteEvidenceStoreSettings,
  safeJsonParse,
  singleUseFilter,
} from './policy/index';
export { type Embedder, loadMiniLm, miniLmModel } from './search/embedder';
export { type AppliedMigration, applyMigrations, type Migration } from './store/apply-migrations';
export { applyPostgresMigrations, inTransaction, migrationLockKey } from './store/apply-postgres-migrations';
export {
  type ListenPostgresChannelOptions,
  listenPostgresChannel,
} from './store/listen-postgres-channel';
export { openPostgresPool, type PostgresPoolOptions } from './store/open-postgres-pool';
export {
  createPostgresSpentLedger,
  openPostgresSpentLedger,
  postgresSpentLedgerMigrations,
} from './store/postgres-spent-ledger';
export {
  memorySpentLedger,
  openSqliteSpentLedger,
  type SpentLedger,
  spentLedgerMigrations,
} from './store/spent-ledger';
export {
  createTransparentProxy,
  createTransparentRequests,
  DEFAULT_SECRET_MARKERS,
  type ElicitationFilterOptions,
  elicitationFilter,
  elicitationMiddleware,
  loadTransparentConfig,
  passkeyConfirmationRules,
  type ToolPolicy,
  type TransparentConfig,
  type TransparentProxy,
  type TransparentRequests,
  type UpstreamConfig,
} from './transparent/index';
