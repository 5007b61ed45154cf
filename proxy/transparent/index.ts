/** Transparent mode (SPEC §3.10): the `mcp-elicitation-proxy` drop-in and its elicitation middleware. */
export type { BlockedCall, BlockReason, BlockStatus } from './blocked-call';
export { blockedCallResult } from './blocked-call';
export type { TransparentProxy, TransparentProxyOptions } from './create-transparent-proxy';
export { createTransparentProxy, UPSTREAM_CLIENT_CAPABILITIES } from './create-transparent-proxy';
export type { ElicitationFilterOptions } from './elicitation-filter';
export { elicitationFilter, resolveElicitationPolicy } from './elicitation-filter';
export type {
  Elicit,
  ElicitationCall,
  ElicitationMiddleware,
  ElicitationOutcome,
} from './elicitation-middleware';
export { elicitationMiddleware } from './elicitation-middleware';
export { isMissing } from './is-missing';
export { loadTransparentConfig } from './load-transparent-config';
export { matchSecretMarker } from './match-secret-marker';
export type {
  ElicitationPolicy,
  ElicitFieldCopy,
  PrimitiveFieldType,
  ToolPolicy,
  TransparentConfig,
  UpstreamConfig,
} from './transparent-config';
export { DEFAULT_SECRET_MARKERS, parseTransparentConfig } from './transparent-config';
