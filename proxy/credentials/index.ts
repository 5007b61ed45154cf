/** Downstream credentials (SPEC §3.9): the tokens file, URL binding, `add-server` and live reload. */
export {
  type AddServerIo,
  addServerToConfig,
  type RunAddServerOptions,
  runAddServer,
  type Verification,
  verifyServer,
} from './add-server';
export {
  credentialInvalid,
  credentialRejected,
  isSendableToken,
  mentionsAuthFailure,
  minutesSince,
} from './credential-rejected';
export {
  type CredentialedFetchOptions,
  type CredentialLookup,
  credentialedFetch,
  type FetchLike,
  type PresentedCredential,
  redactCredential,
} from './credentialed-fetch';
export {
  acquirePidFile,
  checkPidFile,
  type HeldPidFile,
  type PidFileCheck,
  type PidRecord,
  pidFilePath,
  processStartTime,
  type SignalOutcome,
  signalRunningProxy,
} from './pid-file';
export { type ReloadReport, type ReloadServersOptions, reloadServers } from './reload-servers';
export { bindingUrl, sameServerUrl } from './same-server-url';
export { createTokenCredentials, type TokenCredentialsOptions } from './token-credentials';
export {
  type ParsedTokens,
  parseTokens,
  readTokensFile,
  resolveTokensPath,
  type TokensLocation,
  type TokensRead,
  tokensFileMode,
  writeFileAtomic,
  writeToken,
} from './tokens-file';
