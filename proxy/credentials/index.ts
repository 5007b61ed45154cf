/** Downstream credentials (SPEC §3.9): the tokens file, URL binding and redaction. `add-server` and reloads live in `cli/`. */
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
  type CredentialRequest,
  credentialedFetch,
  type FetchLike,
  type PresentedCredential,
  redactCredential,
} from './credentialed-fetch';
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
