/** Transparent mode (SPEC §3.10): the `mcp-elicitation-proxy` drop-in and its elicitation middleware. */

export { refusedMetaKey } from '../downstream/relay-server-requests';
export type { BlockedCall, BlockReason, BlockStatus } from '../elicitation/blocked-call';
export { blockedCallResult } from '../elicitation/blocked-call';
export type { ElicitationFilterOptions } from '../elicitation/elicitation-filter';
export {
  elicitationFilter,
  passkeyConfirmationRules,
  resolveElicitationPolicy,
} from '../elicitation/elicitation-filter';
export type {
  Elicit,
  ElicitationCall,
  ElicitationMiddleware,
  ElicitationOutcome,
} from '../elicitation/elicitation-middleware';
export { elicitationMiddleware } from '../elicitation/elicitation-middleware';
export { isMissing } from '../elicitation/is-missing';
export { matchSecretMarker } from '../elicitation/match-secret-marker';
export type { TransparentOutcome, TransparentProxy, TransparentProxyOptions } from './create-transparent-proxy';
export { createTransparentProxy, mirrorClientCapabilities } from './create-transparent-proxy';
export { loadTransparentConfig } from './load-transparent-config';
export type {
  ElicitationPolicy,
  ElicitFieldCopy,
  PrimitiveFieldType,
  ToolPolicy,
  TransparentConfig,
  UpstreamConfig,
} from './transparent-config';
export { DEFAULT_SECRET_MARKERS, parseTransparentConfig } from './transparent-config';
export type { TransparentRequests, TransparentRequestsOptions } from './transparent-requests';
export { createTransparentRequests } from './transparent-requests';
