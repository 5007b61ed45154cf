import { createHash } from 'node:crypto';
import { credentialInvalid, isSendableToken } from './credential-rejected';
import type { CredentialLookup } from './credentialed-fetch';
import { sameServerUrl } from './same-server-url';
import { readTokensFile } from './tokens-file';

/** Options of {@link createTokenCredentials}. */
export interface TokenCredentialsOptions {
  /** The resolved tokens file. */
  readonly tokensPath: string;
  /** Operator log (stderr). Receives paths, names and URLs, never a token. */
  readonly log: (line: string) => void;
  /** Clock, for tests. */
  readonly now?: () => number;
}

/**
 * The tokens-file credential source (SPEC §3.9). For every request it:
 * 1. presents nothing unless the server name is configured with a URL and the request URL is
 *    that URL (URL binding: a runtime load of a configured name at another URL is anonymous);
 * 2. reads the tokens file fresh (rotation needs no restart; the file is small);
 * 3. refuses a value that cannot be a header value rather than letting the HTTP stack quote it;
 * 4. tracks, per server name, a hash of the value and since when it has been unchanged: the
 *    file's mtime when this value was first seen, a lower bound that survives restarts (the
 *    file cannot have changed after its mtime) and is not reset by later edits of other lines.
 */
export function createTokenCredentials(options: TokenCredentialsOptions): CredentialLookup {
  const now = options.now ?? Date.now;
  const seen = new Map<string, { hash: string; since: number }>();
  const said = new Set<string>();
  const once = (key: string, line: string) => {
    if (said.has(key)) return;
    said.add(key);
    options.log(line);
  };

  return function tokenCredentials({ serverName, url, configuredUrl: configured }) {
    if (configured === undefined) return undefined;
    if (!sameServerUrl(configured, url)) {
      once(
        `unbound ${serverName} ${url}`,
        `server "${serverName}": connecting to ${url} without its token (configured for ${configured})`,
      );
      return undefined;
    }
    const read = readTokensFile(options.tokensPath);
    if (!read.found) {
      once(`unread ${read.reason}`, `tokens file ${options.tokensPath} ${read.reason}; connecting without tokens`);
      return undefined;
    }
    for (const line of read.parsed.malformedLines) {
      once(`malformed ${line}`, `tokens file ${options.tokensPath}: line ${line} is not name=value; ignored`);
    }
    const value = read.parsed.tokens.get(serverName);
    if (value === undefined) return undefined;
    if (!isSendableToken(value)) throw credentialInvalid(serverName);
    const hash = createHash('sha256').update(value).digest('hex');
    let entry = seen.get(serverName);
    if (entry?.hash !== hash) {
      entry = { hash, since: Math.min(read.modifiedMs, now()) };
      seen.set(serverName, entry);
    }
    return { headers: { Authorization: `Bearer ${value}` }, unchangedSince: entry.since };
  };
}
