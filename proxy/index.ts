/** The extensible-mcp proxy library: the public entry every other folder imports. */
export { defaultConfigPaths, loadConfig, type ProxyConfig, resolveConfigPath, type ServerConfig } from './config';
export {
  type CreateProxyOptions,
  clampTopK,
  createProxy,
  type EmbeddingOptions,
  type ExtensibleProxy,
  type LocalTool,
  type ProxyLogger,
  type StartReport,
} from './create-proxy';
export {
  acquirePidFile,
  addServerToConfig,
  bindingUrl,
  type CredentialLookup,
  checkPidFile,
  createTokenCredentials,
  credentialRejected,
  type PidFileCheck,
  type PresentedCredential,
  parseTokens,
  pidFilePath,
  processStartTime,
  readTokensFile,
  reloadServers,
  resolveTokensPath,
  runAddServer,
  sameServerUrl,
  signalRunningProxy,
  type TokenCredentialsOptions,
  type Verification,
  verifyServer,
  writeToken,
} from './credentials/index';
export { type DiscoveryStore, memoryDiscoveryStore } from './discovery-store';
export {
  type Admission,
  Downstream,
  type DownstreamSpec,
  fetchWithoutRedirects,
  type LinkableServer,
} from './downstream';
export { type Embedder, loadMiniLm, miniLmModel } from './embedder';
export { type ProxyEnv, readProxyEnv } from './env';
export { ProxyError, type ProxyErrorCode, proxyErrorCodes } from './errors';
export { type AccessControlOptions, accessControl } from './filters/access-control';
export { discoveryGate } from './filters/discovery-gate';
export { hideTools } from './filters/hide-tools';
export { type LoadControlOptions, loadControl } from './filters/load-control';
export { similarityThreshold } from './filters/similarity-threshold';
export { proxyOptionsFromConfig } from './from-config';
export { nameSeparator, qualifyName } from './names';
export type {
  CallFilter,
  CallRequest,
  CallVerdict,
  EventHook,
  FilterContext,
  LoadFilter,
  LoadRequest,
  LoadVerdict,
  PipelineName,
  ProxyEvent,
  ResponseFilter,
  ResponseVerdict,
  SearchFilter,
  SearchHit,
  SearchQuery,
} from './pipeline';
export {
  type AdmissionFacts,
  bundleRouter,
  createHostBuiltins,
  createRouteResolver,
  type EvidenceStore,
  type HostBuiltins,
  keyFromDidKey,
  loadBundle,
  openSqliteEvidenceStore,
  type PolicyBundle,
  PolicyError,
  type PolicyOutcome,
  policyAugmenter,
  policyFilter,
  type RouteResolver,
  regoPolicyFilter,
  singleUseFilter,
} from './policy/index';
export { type HttpEndpoint, type ServeHttpOptions, serveHttp } from './serve-http';
export { type IndexedTool, type IndexMode, ToolIndex } from './tool-index';
export {
  createTransparentProxy,
  type ElicitationFilterOptions,
  elicitationFilter,
  elicitationMiddleware,
  loadTransparentConfig,
  runTransparentCli,
  type TransparentConfig,
} from './transparent/index';
