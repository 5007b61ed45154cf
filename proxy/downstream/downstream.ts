import type { CallToolResult, PriorDiscovery, Tool, Transport } from '@modelcontextprotocol/client';
import {
  type Client,
  InMemoryTransport,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Agent, type Dispatcher } from 'undici';
import { credentialRejected, mentionsAuthFailure, minutesSince } from '../credentials/credential-rejected';
import {
  credentialedFetch,
  type PresentedCredential,
  redactError,
  redactSecrets,
  secretsOf,
} from '../credentials/credentialed-fetch';
import { ProxyError } from '../errors';
import type { Admission, DownstreamProtocol, DownstreamSpec, ServerFacts } from '../gateway/types';
import { AskingClient } from './asking-client';
import { isProtocolMismatch, protocolMismatch, unwrapProbeFailure, versionNegotiationFor } from './protocol-setting';
import { type RelayTarget, relayRequest, relayServerRequests, type ServerRequestRelay } from './relay-server-requests';

/**
 * What the proxy declares to a shared downstream (SPEC §3.10): form elicitation, sampling and
 * roots, answered by the session whose call is in flight when the downstream asks. A 2025 server
 * reads them at `initialize`; a 2026-07-28 server in every request's `_meta` envelope.
 */
export const DOWNSTREAM_CLIENT_CAPABILITIES = { elicitation: { form: {} }, sampling: {}, roots: {} } as const;

/**
 * How many secrets a downstream remembers for redaction: two per credential (the header value
 * and the bare token), so the last four credentials, as a rotation may overlap calls.
 */
const maxRememberedSecrets = 8;

export type { Admission, DownstreamSpec, LinkableServer } from '../gateway/types';

/**
 * What the proxy remembers of its stdio servers' protocol versions for the life of the process,
 * keyed by how a server is started (command, arguments, environment): the verdict of the one
 * `server/discover` probe that server's first start cost (issue 31). A restart, or another admission
 * of the same command, connects from it (the SDK's `ConnectOptions.prior`), so no second probe
 * process is ever spawned for it.
 */
export type ProtocolVerdicts = Map<string, PriorDiscovery>;

/** What a {@link Downstream} needs from its owner. */
export interface DownstreamOptions {
  readonly name: string;
  readonly spec: DownstreamSpec;
  readonly admission: Admission;
  /** Per-call timeout. */
  readonly callTimeoutMs: number;
  /**
   * Timeout for connecting and listing tools (a stdio child may take seconds to start), and for
   * each new TCP connection of an HTTP downstream, its DNS lookup included.
   */
  readonly connectTimeoutMs: number;
  /**
   * Called with the full tool list after every (re)connection and `list_changed`, and awaited: the
   * owner checks the listing (its pins) before the connection counts as made.
   */
  readonly onTools: (tools: Tool[]) => void | Promise<void>;
  readonly log: (line: string) => void;
  /**
   * The credential for a request to `url` (HTTP downstreams only), asked on every request so a
   * rotated token applies to the next one. Supplied by the proxy, never by the spec: the lookup
   * is the single place that decides whether a URL gets a token (SPEC §3.9).
   */
  readonly credentials?: (url: string) => PresentedCredential | undefined;
  /**
   * The HTTP connection pool to use (HTTP downstreams only): a runtime load gets one whose own
   * lookup refuses private addresses (SPEC §3.4). Absent: the downstream's own, whose connect
   * timeout is `connectTimeoutMs` (undici's global pool gives up after 10 s).
   */
  readonly dispatcher?: Dispatcher;
  /**
   * Where the server's own requests go (elicitation, sampling, roots, ping). Present: the proxy
   * declares {@link DOWNSTREAM_CLIENT_CAPABILITIES}; absent: it declares none.
   */
  readonly relay?: ServerRequestRelay;
  /**
   * Verdicts shared with the owner's other downstreams ({@link ProtocolVerdicts}); absent, this
   * downstream keeps its own, which still spares its restarts a probe.
   */
  readonly verdicts?: ProtocolVerdicts;
}

/**
 * `fetch` that never follows a redirect: a redirect could carry a bearer token to another host
 * (SPEC §3.2, §3.9). A 3xx answer becomes an error naming where it pointed.
 */
export async function fetchWithoutRedirects(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, { ...init, redirect: 'manual' });
  if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
    const location = response.headers.get('location');
    const target = location
      ? new URL(location, String(input instanceof Request ? input.url : input)).href
      : 'elsewhere';
    throw new ProxyError(
      'downstream-redirect',
      `The server answered with a redirect (HTTP ${response.status}) to ${target}; redirects are never followed. Use that URL directly if it is trusted.`,
    );
  }
  return response;
}

/**
 * Whether a Streamable HTTP server refused a request for want of a session (SPEC §3.11): 404 on
 * the session, as the protocol says, or the 400 that common servers answer instead ("No valid
 * session ID provided", "Server not initialized"). Either way the server never ran the request.
 * A 2026-07-28 connection has no session to lose: a 404 there is the server's refusal, nothing more.
 */
function isSessionGone(client: Client, error: unknown): boolean {
  if (client.getProtocolEra() === 'modern') return false;
  if (!(error instanceof SdkHttpError)) return false;
  if (error.status === 404) return true;
  return error.status === 400 && /session|not initiali[sz]ed/i.test(error.message);
}

/**
 * SDK failures of a call that never ran, or (a timeout) that the translator reports in doubt: not
 * connected, not a method of the connection's protocol version, an input request the client has
 * no handler for, and a 2026-07-28 server that answered every round with `input_required` until
 * the SDK's round cap (it never completed the call).
 */
const notSent: readonly SdkErrorCode[] = [
  SdkErrorCode.NotConnected,
  SdkErrorCode.RequestTimeout,
  SdkErrorCode.MethodNotSupportedByProtocolVersion,
  SdkErrorCode.CapabilityNotSupported,
  SdkErrorCode.InputRequiredRoundsExceeded,
];

/**
 * Whether a failed call may still have run on the server (SPEC §3.12): anything but an answer or
 * a definite refusal. A server's JSON-RPC error is its answer; a 4xx or 503 on the request, a
 * refused redirect or credential, was a refusal before it ran. A connection that broke (`fetch
 * failed`, a cut stream, a 500 or 502 from something in between) may have broken after the
 * request was delivered: the call is in doubt, never a plain failure that a retry would repeat.
 */
function mayHaveRun(error: unknown): boolean {
  if (ProxyError.isInstance(error)) return false;
  // The server's answer, in-band (a 2026-07-28 server's HTTP 400 with a JSON-RPC body is one too).
  if (error instanceof ProtocolError) return false;
  // Not sent, or timed out: answered by the translator (a timeout is reported in doubt there).
  if (error instanceof SdkError && notSent.includes(error.code)) return false;
  if (error instanceof SdkHttpError) {
    const status = error.status ?? 0;
    return !((status >= 400 && status < 500) || status === 503);
  }
  return true;
}

/**
 * Error codes of a connection that was never made: refused, no route, a name that did not resolve
 * (for now or at all), and undici's connect timeout (which includes the DNS lookup). The request
 * was never written to a socket, so the server cannot have run it.
 */
const unconnectedCodes: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * The cause that shows a failed request never connected (`fetch failed` keeps it in `cause`, a
 * failed attempt at each of a name's addresses in an AggregateError's `errors`), else `undefined`.
 * Only a connect-phase code counts: a socket that broke after connecting may have carried the
 * request, and that call stays in doubt.
 */
function unconnectedCause(error: unknown, depth = 0): (Error & { code: string }) | undefined {
  if (!(error instanceof Error) || depth > 8) return undefined;
  const { code } = error as { code?: unknown };
  if (typeof code === 'string' && unconnectedCodes.has(code)) return error as Error & { code: string };
  if (error instanceof AggregateError && error.errors.length > 0) {
    const causes = error.errors.map((inner) => unconnectedCause(inner, depth + 1));
    // Every address refused: never connected. One that connected and broke: in doubt.
    return causes.every((cause) => cause !== undefined) ? causes[0] : undefined;
  }
  return unconnectedCause(error.cause, depth + 1);
}

/** How long an unconnected call waits before it is sent once more: a restarting server's moment to listen. */
const resendPauseMs = 1000;

function describeRaw(error: unknown): string {
  if (ProxyError.isInstance(error)) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

/**
 * What a connection found, as the SDK takes it back (`ConnectOptions.prior`): the server's
 * `server/discover` answer on a 2026-07-28 connection, else the 2025 handshake.
 */
function verdictOf(client: Client): PriorDiscovery {
  const discover = client.getDiscoverResult();
  return discover === undefined ? { kind: 'legacy' } : { kind: 'modern', discover };
}

/** The key a stdio server's verdict is remembered under: everything that decides what is started. */
function verdictKey(spec: DownstreamSpec): string | undefined {
  if (spec.kind !== 'stdio') return undefined;
  return JSON.stringify([spec.command, spec.args ?? [], Object.entries(spec.env ?? {}).sort()]);
}

/**
 * One downstream MCP server: connects in the protocol version its `protocol` setting allows
 * (issue 31), lists its tools, calls them with a timeout, re-lists on `list_changed` (on a
 * 2026-07-28 connection, from the `subscriptions/listen` stream it opens), and restarts a dead
 * stdio child once on the next call.
 */
export class Downstream {
  readonly name: string;
  readonly spec: DownstreamSpec;
  readonly admission: Admission;
  /** What the gateway vouches for about this server, stamped on every call to it. */
  readonly facts: ServerFacts;
  readonly #options: DownstreamOptions;
  #client: AskingClient | undefined;
  #connecting: Promise<AskingClient> | undefined;
  #closedByUs = false;
  /**
   * The client being connected right now and its transport, so close() can stop it mid-connect:
   * the transport too, since during a `server/discover` probe the client does not hold it yet.
   */
  #opening: { readonly client: Client; readonly transport: Transport } | undefined;
  /** What the latest HTTP request carried: an MCP-level auth error is blamed on it. */
  #presented: PresentedCredential | undefined;
  /**
   * The secrets of the credentials recently presented (the current one and a few before it, so
   * a rotation during a call is covered): removed from everything this server answers.
   */
  readonly #secrets = new Set<string>();
  /** The `protocol` setting; `undefined` for an in-process server, linked in the 2025 handshake. */
  readonly #protocol: DownstreamProtocol | undefined;
  readonly #verdicts: ProtocolVerdicts;
  /** The connection's change stream ended unexpectedly: re-opened (and the tools re-read) at the next call. */
  #watchLost = false;
  /**
   * This HTTP downstream's own connection pool, when its owner gave none: connections time out
   * after `connectTimeoutMs`, not undici's global 10 s, because a name just re-registered (a
   * restarted container) can take longer than that to resolve. Closed with the downstream.
   */
  #agent: Agent | undefined;

  constructor(options: DownstreamOptions) {
    this.name = options.name;
    this.spec = options.spec;
    this.admission = options.admission;
    this.facts = {
      name: options.name,
      admission: options.admission,
      ...(options.spec.kind === 'http' && { url: options.spec.url }),
    };
    this.#options = options;
    this.#protocol = options.spec.kind === 'in-process' ? undefined : (options.spec.protocol ?? 'auto');
    this.#verdicts = options.verdicts ?? new Map();
  }

  /** The MCP protocol version the current connection negotiated; `undefined` while not connected. */
  get protocolVersion(): string | undefined {
    return this.#client?.getNegotiatedProtocolVersion();
  }

  /** The URL it was connected at, for HTTP downstreams. */
  get url(): string | undefined {
    return this.spec.kind === 'http' ? this.spec.url : undefined;
  }

  /** Whether the connection is currently up. */
  get connected(): boolean {
    return this.#client !== undefined;
  }

  /** Connects (if not connected) and reports the tools. Concurrent callers share one attempt. */
  connect(): Promise<AskingClient> {
    if (this.#client) return Promise.resolve(this.#client);
    // Closed for good: never start (or restart) a child after close().
    if (this.#closedByUs) {
      return Promise.reject(new ProxyError('downstream-unavailable', `Server "${this.name}" has been closed.`));
    }
    this.#connecting ??= this.#open().finally(() => {
      this.#connecting = undefined;
      this.#opening = undefined;
    });
    return this.#connecting;
  }

  async #open(): Promise<AskingClient> {
    const { relay } = this.#options;
    const protocol = this.#protocol;
    const client = new AskingClient(
      { name: 'extensible-mcp', version: '0.1.0' },
      {
        ...(relay && { capabilities: DOWNSTREAM_CLIENT_CAPABILITIES }),
        ...(protocol !== undefined && { versionNegotiation: versionNegotiationFor(protocol) }),
      },
    );
    if (relay) relayServerRequests(client, DOWNSTREAM_CLIENT_CAPABILITIES, relay);
    const transport = this.#transport();
    this.#opening = { client, transport };
    client.onclose = () => {
      if (this.#client === client) this.#client = undefined;
      if (!this.#closedByUs) this.#options.log(`server "${this.name}": connection closed`);
    };
    client.setNotificationHandler('notifications/tools/list_changed', async () => {
      try {
        await this.#options.onTools(await this.#listTools(client));
        this.#options.log(`server "${this.name}": tool list changed, re-indexed`);
      } catch (error) {
        this.#options.log(`server "${this.name}": re-listing tools failed: ${this.#describe(error)}`);
      }
    });
    const key = protocol === 'auto' ? verdictKey(this.spec) : undefined;
    const prior = key === undefined ? undefined : this.#verdicts.get(key);
    try {
      await client.connect(transport, { timeout: this.#options.connectTimeoutMs, ...(prior && { prior }) });
      // Opened before the first listing, so that no change between the two goes unseen.
      await this.#watchToolList(client);
      const tools = await this.#listTools(client);
      // close() ran while this connection was being made: stop what was just started.
      if (this.#closedByUs) throw new ProxyError('downstream-unavailable', `Server "${this.name}" has been closed.`);
      this.#client = client;
      // The probe's verdict, remembered: the next start of this command connects without one.
      if (key !== undefined && prior === undefined) this.#verdicts.set(key, verdictOf(client));
      this.#options.log(
        `server "${this.name}": connected, MCP ${client.getNegotiatedProtocolVersion() ?? 'version unknown'}${prior ? ' (as its first start negotiated)' : ''}`,
      );
      await this.#options.onTools(tools);
      return client;
    } catch (raw) {
      await client.close().catch(() => undefined);
      const error = unwrapProbeFailure(raw);
      // A remembered verdict the server now contradicts (it answered, but not in that version: it
      // was upgraded or replaced) is forgotten, and the server is asked again, once: that start has
      // no verdict to fall back on. A child that did not start at all proves nothing.
      if (key !== undefined && prior !== undefined && error instanceof ProtocolError && !this.#closedByUs) {
        this.#verdicts.delete(key);
        this.#options.log(
          `server "${this.name}": no longer speaks the protocol version it first negotiated (${this.#describe(error)}); asking it again`,
        );
        return this.#open();
      }
      // A refused redirect names its target, which a hostile server can make carry the token.
      if (ProxyError.isInstance(error)) throw this.#redactError(error);
      const rejected = this.#authFailure(error);
      if (rejected) throw rejected;
      if (protocol !== undefined && protocol !== 'auto' && isProtocolMismatch(protocol, error)) {
        throw protocolMismatch(this.name, protocol, error);
      }
      throw new ProxyError('downstream-unavailable', `Server "${this.name}" is unavailable: ${this.#describe(error)}`, {
        cause: error,
      });
    }
  }

  /**
   * On a 2026-07-28 connection a server's change notifications arrive only on a
   * `subscriptions/listen` stream the client opens (there is no session to push them on): open one
   * for tool list changes when the server declares them. They reach the same `list_changed`
   * handler as a 2025 server's. A stream the server cannot open is logged, not fatal: the tools
   * still work, and the list is read again at the next connection.
   */
  async #watchToolList(client: Client): Promise<void> {
    if (client.getProtocolEra() !== 'modern' || client.getServerCapabilities()?.tools?.listChanged !== true) return;
    this.#watchLost = false;
    try {
      const subscription = await client.listen({ toolsListChanged: true }, { timeout: this.#options.connectTimeoutMs });
      void subscription.closed.then((reason) => {
        // Closed by us (close(), a new connection): nothing to restore. Ended by the server, on
        // purpose (it shuts down to restart) or not (the stream was cut), it is wanted still.
        if (reason === 'local' || this.#closedByUs || this.#client !== client) return;
        this.#watchLost = true;
        this.#options.log(
          `server "${this.name}": its change stream ${reason === 'graceful' ? 'was ended by the server' : 'was cut'}; it is re-opened at the next call`,
        );
      });
    } catch (error) {
      this.#options.log(
        `server "${this.name}": could not open its change stream (${this.#describe(error)}); tool list changes are seen at the next connection`,
      );
    }
  }

  /** Re-opens a cut change stream and re-reads the tools, since changes may have gone unseen meanwhile. */
  async #rewatch(client: Client): Promise<void> {
    this.#watchLost = false;
    try {
      await this.#watchToolList(client);
      if (this.#client !== client) return;
      await this.#options.onTools(await this.#listTools(client));
      this.#options.log(`server "${this.name}": change stream re-opened, tools re-read`);
    } catch (error) {
      this.#options.log(`server "${this.name}": re-listing tools failed: ${this.#describe(error)}`);
    }
  }

  #transport(): Transport {
    const { spec } = this;
    switch (spec.kind) {
      case 'stdio': {
        const transport = new StdioClientTransport({
          command: spec.command,
          args: [...(spec.args ?? [])],
          ...(spec.env && { env: { ...spec.env } }),
          stderr: 'pipe',
        });
        transport.stderr?.on('data', (chunk: Buffer) => {
          for (const line of chunk.toString('utf8').split('\n')) {
            if (line.trim()) this.#options.log(`server "${this.name}" stderr: ${line.trimEnd()}`);
          }
        });
        return transport;
      }
      case 'http': {
        const lookup = this.#options.credentials;
        this.#agent ??= this.#options.dispatcher
          ? undefined
          : new Agent({ connect: { timeout: this.#options.connectTimeoutMs } });
        const dispatcher = this.#options.dispatcher ?? this.#agent;
        // Node's fetch takes the pool as `dispatcher`, which the RequestInit type does not declare.
        const fetchVia: typeof fetchWithoutRedirects = (input, init) =>
          fetchWithoutRedirects(input, { ...init, dispatcher } as RequestInit);
        if (!lookup) return new StreamableHTTPClientTransport(new URL(spec.url), { fetch: fetchVia });
        return new StreamableHTTPClientTransport(new URL(spec.url), {
          fetch: credentialedFetch({
            fetch: fetchVia,
            credential: lookup,
            onPresented: (credential) => {
              this.#presented = credential;
              for (const secret of secretsOf(credential)) {
                this.#secrets.delete(secret);
                this.#secrets.add(secret);
              }
              for (const stale of [...this.#secrets].slice(0, -maxRememberedSecrets)) this.#secrets.delete(stale);
            },
            onRejected: (status, credential) => this.#rejected(status, credential),
          }),
        });
      }
      case 'in-process': {
        const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
        // The server side is linked before the client starts talking.
        void spec.server.connect(serverSide);
        return clientSide;
      }
    }
  }

  async #listTools(client: Client): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, {
        timeout: this.#options.connectTimeoutMs,
      });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return this.#redactTools(tools);
  }

  /**
   * The tool list with any echoed credential removed before it is indexed: a server may quote
   * the request it was sent in a description, a title or a property name, and search shows all
   * of them to the model. A tool whose *name* carries the credential is skipped, since a
   * redacted name could not be called.
   */
  #redactTools(tools: Tool[]): Tool[] {
    const secrets = [...this.#secrets];
    if (secrets.length === 0) return tools;
    const kept: Tool[] = [];
    for (const tool of tools) {
      const redacted = redactSecrets(tool, secrets);
      if (redacted.name === tool.name) {
        kept.push(redacted);
        continue;
      }
      this.#options.log(
        `server "${this.name}": skipped a tool whose name contains its credential ("${redacted.name}")`,
      );
    }
    return kept;
  }

  /**
   * Calls `tool` with a timeout. A stdio child found dead before the call is restarted (and
   * re-indexed) first; a call interrupted by a lost connection is never replayed, since it may
   * have run (SPEC §3.2): it fails as `outcome-unknown`, and the next call restarts the child.
   * An HTTP server that refused the call for want of a session (it restarted) never ran it: the
   * session is opened afresh (and re-indexed) and the call sent once more, once (SPEC §3.11).
   * An HTTP request that never connected (refused, no route, its name not resolved, the connect
   * timed out) never ran either: it is sent once more after a pause, and if that does not connect
   * either, the server is reported unavailable.
   */
  async call(tool: string, args: Record<string, unknown>, asker?: RelayTarget): Promise<CallToolResult> {
    const client = await this.connect();
    if (this.#watchLost) void this.#rewatch(client);
    try {
      return await this.#callOnce(client, tool, args, asker);
    } catch (error) {
      if (isSessionGone(client, error)) return this.#callInNewSession(client, tool, args, asker);
      const unconnected = unconnectedCause(error);
      if (unconnected) return this.#callAfterUnconnected(client, { tool, args, asker }, unconnected);
      throw this.#callFailure(error, tool);
    }
  }

  /**
   * The call's request never reached the server (`cause` says why): sent once more after
   * {@link resendPauseMs}. A second attempt that does not connect either makes the call fail as
   * `downstream-unavailable`, never in doubt: it ran nowhere.
   */
  async #callAfterUnconnected(
    client: AskingClient,
    call: { readonly tool: string; readonly args: Record<string, unknown>; readonly asker: RelayTarget | undefined },
    cause: Error & { code: string },
  ): Promise<CallToolResult> {
    const { tool, args, asker } = call;
    this.#options.log(
      `server "${this.name}": "${tool}" never connected (${cause.code}: ${this.#describe(cause)}); sending it again in ${resendPauseMs / 1000} s`,
    );
    await new Promise((resolve) => setTimeout(resolve, resendPauseMs));
    try {
      return await this.#callOnce(client, tool, args, asker);
    } catch (error) {
      // The server came back without the session the first attempt was made in: that request never ran either.
      if (isSessionGone(client, error)) return this.#callInNewSession(client, tool, args, asker);
      throw this.#callFailure(error, tool);
    }
  }

  /**
   * How a failed call that is not sent again is reported: unavailable when it never connected,
   * in doubt when it may have run (never retried), else as what refused it.
   */
  #callFailure(error: unknown, tool: string): ProxyError {
    const unconnected = unconnectedCause(error);
    if (unconnected) {
      this.#options.log(
        `server "${this.name}": "${tool}" never connected (${unconnected.code}: ${this.#describe(unconnected)}); not sent again`,
      );
      return new ProxyError(
        'downstream-unavailable',
        `Server "${this.name}" could not be reached for "${tool}" (${unconnected.code}); the call was never sent, so it did not run. Try again later.`,
        { cause: error },
      );
    }
    if (!mayHaveRun(error)) return this.#translate(error, tool);
    this.#options.log(`server "${this.name}": connection lost during "${tool}"; not retried`);
    return new ProxyError(
      'outcome-unknown',
      `Server "${this.name}" lost its connection while running "${tool}"; the call may or may not have run, so it was not retried. Check its effect before calling again.`,
      { cause: error },
    );
  }

  /** The server lost the session `stale` held: drop it, open a new one, and send the call that never ran again, once. */
  async #callInNewSession(
    stale: Client,
    tool: string,
    args: Record<string, unknown>,
    asker: RelayTarget | undefined,
  ): Promise<CallToolResult> {
    this.#options.log(
      `server "${this.name}": its session is gone (the server restarted?); opening a new one and sending "${tool}" again`,
    );
    if (this.#client === stale) this.#client = undefined;
    void stale.close().catch(() => undefined);
    const client = await this.connect();
    try {
      return await this.#callOnce(client, tool, args, asker);
    } catch (error) {
      throw this.#callFailure(error, tool);
    }
  }

  /** One `tools/call`; with an `asker`, a 2026-07-28 server's questions go to it, never to another call's client. */
  async #callOnce(
    client: AskingClient,
    tool: string,
    args: Record<string, unknown>,
    asker: RelayTarget | undefined,
  ): Promise<CallToolResult> {
    const params = { name: tool, arguments: args };
    const options = { timeout: this.#options.callTimeoutMs };
    const { relay } = this.#options;
    const result =
      relay === undefined || asker === undefined
        ? await client.callTool(params, options)
        : await client.callToolAsking(params, options, (request, signal) =>
            relayRequest(relay, asker, request, signal),
          );
    // A server may echo its request back (a debug tool, a reflected header): the token it was
    // sent never reaches the response filters, the logs or the model.
    return redactSecrets(result as CallToolResult, [...this.#secrets]);
  }

  #rejected(status: number | undefined, credential: PresentedCredential): ProxyError {
    return credentialRejected({
      server: this.name,
      status,
      unchangedMinutes: minutesSince(credential.unchangedSince, Date.now()),
    });
  }

  /** An MCP error saying unauthorized/forbidden, from a server that was sent a token. */
  #authFailure(error: unknown): ProxyError | undefined {
    const credential = this.#presented;
    if (!credential || !(error instanceof ProtocolError) || !mentionsAuthFailure(error.message)) return undefined;
    return this.#rejected(undefined, credential);
  }

  /** Error text for the model, with any echoed credential removed. */
  #describe(error: unknown): string {
    return redactSecrets(describeRaw(error), [...this.#secrets]);
  }

  /** A ProxyError with any echoed credential removed from its message (its code kept). */
  #redactError(error: ProxyError): ProxyError {
    const redacted = redactError(error, [...this.#secrets]);
    return ProxyError.isInstance(redacted) ? redacted : error;
  }

  #translate(error: unknown, tool: string): ProxyError {
    if (ProxyError.isInstance(error)) return this.#redactError(error);
    const rejected = this.#authFailure(error);
    if (rejected) return rejected;
    if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
      const seconds = Math.round(this.#options.callTimeoutMs / 100) / 10;
      return new ProxyError(
        'downstream-timeout',
        `Server "${this.name}" did not answer "${tool}" within ${seconds} s; the call was abandoned. Try again later or use another tool.`,
        { cause: error },
      );
    }
    return new ProxyError('downstream-failed', `Server "${this.name}" failed on "${tool}": ${this.#describe(error)}`, {
      cause: error,
    });
  }

  /** Closes the connection (and stops a stdio child). */
  async close(): Promise<void> {
    this.#closedByUs = true;
    const client = this.#client;
    this.#client = undefined;
    // A connection still being made is stopped too (its child with it), not left to its timeout.
    const connecting = this.#connecting;
    const opening = this.#opening;
    await Promise.allSettled([client?.close(), opening?.client.close(), opening?.transport.close()]);
    // A connect stopped during its `server/discover` probe settles once the SDK has reaped the
    // probe's sibling process (issue 31): closed means no child of this server is left running.
    await connecting?.catch(() => undefined);
    await this.#agent?.destroy().catch(() => undefined);
  }
}
