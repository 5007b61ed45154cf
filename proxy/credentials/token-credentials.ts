import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { credentialInvalid, isSendableToken } from './credential-rejected';
import type { CredentialLookup } from './credentialed-fetch';
import { sameServerUrl } from './same-server-url';
import { readTokensFile, type TokensRead } from './tokens-file';

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
 * 2. reads the tokens file again whenever it changed (rotation needs no restart);
 * 3. refuses a value that cannot be a header value rather than letting the HTTP stack quote it;
 * 4. tracks, per server name, a hash of the value and since when it has been unchanged: the
 *    file's mtime when this value was first seen, a lower bound that survives restarts (the
 *    file cannot have changed after its mtime) and is not reset by later edits of other lines.
 */
export function createTokenCredentials(options: TokenCredentialsOptions): CredentialLookup {
  const now = options.now ?? Date.now;
  const tokensFile = changedTokensFile(options.tokensPath);
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
    const read = tokensFile();
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

/**
 * The tokens file as {@link readTokensFile} reads it, read again only when its stat changed: a
 * `stat` per request instead of a read and a parse. Any write changes the change time (and the
 * atomic replace of `writeFileAtomic` the inode), so an edited or rotated file is read by the next
 * request, as before. File times are coarse (a few ms), so, as git does for "racily clean" files,
 * a file changed less than a second before it was read is read again until it has been quiet. A
 * file that cannot be stat'ed is read (and its failure reported) every time.
 */
function changedTokensFile(path: string): () => TokensRead {
  let last: { stamp: string; quiet: boolean; read: TokensRead } | undefined;
  return function tokensFile() {
    let stat: ReturnType<typeof statSync>;
    try {
      stat = statSync(path, { throwIfNoEntry: false });
    } catch {
      return readTokensFile(path);
    }
    const stamp = stat ? `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}` : 'absent';
    if (last?.stamp === stamp && last.quiet) return last.read;
    // A change between the stat and the read shows in the next request's stat.
    last = { stamp, quiet: stat === undefined || Date.now() - stat.ctimeMs >= 1_000, read: readTokensFile(path) };
    return last.read;
  };
}
