/**
 * The household runtime (SPEC §2): environment, the one SQLite store, and identity started on
 * it. The public entry `app/` imports; payments, events and the composition root join it later.
 */

export { defaultClaudeModel } from './agent/agent-loop';
export type { AttackMoveName } from './agent/attacks';
export { ChatError, type ChatErrorCode } from './agent/chat-error';
export { type ChatStore, chatMigrations, createMemoryChatStore, createSqliteChatStore } from './agent/chat-store';
export { type ChatServiceOptions, createChatService } from './agent/create-chat-service';
export type {
  ChatEvent,
  ChatEventBody,
  ChatService,
  PlannerInfo,
} from './agent/types';
export {
  type AuditCheckpoint,
  type AuditCheckpointReport,
  type AuditCheckpointReportKind,
  type AuditCheckpoints,
  type AuditCheckpointsOptions,
  auditCheckpointsFileName,
  type CheckpointRefusal,
  createAuditCheckpoints,
  defaultCheckpointEvery,
} from './audit/audit-checkpoints';
export { AuditError, type AuditErrorCode, auditErrorCodes } from './audit/audit-error';
export {
  type AuditEntry,
  type AuditFilter,
  type AuditHead,
  type AuditListener,
  type AuditLog,
  type AuditQuery,
  createSqliteAuditLog,
  type SqliteAuditLogOptions,
} from './audit/audit-log';
export { type CheckpointStore, createFileCheckpointStore } from './audit/checkpoint-store';
export {
  auditChannel,
  createPostgresAuditLog,
  type PostgresAuditLogOptions,
  postgresAuditMigrations,
} from './audit/postgres-audit-log';
export { runAuditVerify } from './audit/run-audit-verify';
export {
  createShopWitness,
  type ShopWitnessEndpoint,
  type ShopWitnessOptions,
  shopWitnessEndpoint,
} from './audit/shop-witness';
export {
  type AuditChainVerdict,
  type VerifiedCheckpoint,
  type VerifyAuditChainOptions,
  verifyAuditChain,
  type WitnessVouch,
} from './audit/verify-audit-chain';
export {
  createFileWitness,
  type Witness,
  type WitnessedCheckpoint,
  type WitnessReceipt,
  type WitnessSubmission,
} from './audit/witness';
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
export {
  describeHouseholdStore,
  type HouseholdStore,
  type HouseholdStoreLocation,
  householdStoreLocation,
  openHouseholdStore,
  openSqliteHouseholdStore,
} from './store';
export { appRoute, identityRoute, mcpRoute, type RouteHandler, shopMcpRoute } from './web/app-route';
export {
  chatEventStream,
  chatTokenHeader,
  findChatSession,
  maxChatBodyBytes,
  maxChatMessageLength,
  requireChatSession,
  resumePointOf,
} from './web/chat-http';
export {
  bannerLines,
  type CreateHouseholdAppOptions,
  closeHouseholdAppOnSignals,
  createHouseholdApp,
  getHouseholdApp,
  type HouseholdApp,
  plannerLabel,
  setHouseholdApp,
  startHouseholdApp,
} from './web/household-app';
export { AppHttpError, checkOrigin, jsonResponse, readJsonBody } from './web/http';
export {
  LogFilter,
  type LogSource,
  liveLogStream,
  logFilterOf,
  logResumePoint,
  matchesLogFilter,
} from './web/live-log';
export { createMcpEndpoint, type McpEndpoint, type McpEndpointOptions } from './web/mcp-endpoint';
export {
  type AuditLink,
  createOrderAudit,
  type LinkCheck,
  type OrderAudit,
  type OrderAuditOptions,
  type OrderAuditView,
  type OrderSummary,
} from './web/order-audit';
export { createShopMcpEndpoint, type ShopMcpEndpointOptions, shopMcpPath } from './web/shop-mcp-endpoint';
