import type { Tool } from '@modelcontextprotocol/server';
import { Downstream, type DownstreamOptions, type ProtocolVerdicts } from '../downstream/downstream';
import type { RelayTarget } from '../downstream/relay-server-requests';
import { ProxyError } from '../errors';
import type { safeLoadDispatcher } from '../filters/safe-load';
import { nameProblem } from '../names';
import { DEFAULT_SECRET_MARKERS } from '../transparent/transparent-config';
import type { LocalTool, ReconfigureReport } from './create-gateway';
import { scopeDigest } from './discovery-scope';
import type { AdmitReport, CallContext, DownstreamSpec, ServerFacts, StartReport } from './types';

/** The HTTP connection pool of a runtime-loaded server, whose own lookup checks every address. */
export type LoadDispatcher = ReturnType<typeof safeLoadDispatcher>;

/** How a downstream is reached: its timeouts and its credentials (dispatch's to decide). */
export type Reach = Pick<DownstreamOptions, 'callTimeoutMs' | 'connectTimeoutMs' | 'credentials'>;

/** The index's side of a server's life: what it lists, its removal, how many of its tools are indexed. */
export interface Catalog {
  /** Checks a listing (its pins) and indexes what it admits; awaited before a connection counts as made. */
  list(server: string, tools: readonly Tool[]): void | Promise<void>;
  remove(server: string): void;
  count(server: string): number;
}

/** Options of {@link createRegistry}. */
export interface RegistryOptions {
  /** Downstream servers admitted by the operator, by name (connected by `start`). */
  readonly servers?: Readonly<Record<string, DownstreamSpec>>;
  readonly localTools?: readonly LocalTool[];
  readonly log: (line: string) => void;
  /** How long after `start()` a search waits for configured servers still connecting; default 10 s. */
  readonly startGraceMs?: number;
  /** Timeouts and credentials for a server, asked once as its connection is made. */
  readonly reach: (name: string, spec: DownstreamSpec) => Reach;
  /** Told what each server lists, and when a server leaves. */
  readonly catalog: Catalog;
}

/** What a server is admitted as, and how (SPEC §3.4): the operator's, the model's, or the host's. */
export interface ServerAdmission {
  readonly name: string;
  readonly spec: DownstreamSpec;
  readonly admission: ServerFacts['admission'];
  /** A runtime load's own connection pool. */
  readonly dispatcher?: LoadDispatcher;
}

/** The downstreams and local tools a gateway knows, and who admitted each name. */
export interface Registry {
  /** The local tools, in their configured order. */
  localTools(): readonly LocalTool[];
  localTool(name: string): LocalTool | undefined;
  /** The connection serving `name` now, if any. */
  get(name: string): Downstream | undefined;
  /** What the gateway vouches for about `name`, while it is connected. */
  facts(name: string): ServerFacts | undefined;
  /** Whether `name` is connected or being admitted. */
  taken(name: string): boolean;
  /** The names being admitted right now. */
  connecting(): readonly string[];
  /** Whether the operator admitted `name` (config or `admit`), connected or not. */
  isOperators(name: string): boolean;
  /** The URL the operator admitted `name` at: the only URL its token is ever presented to. */
  operatorUrl(name: string): string | undefined;
  /** Connects and indexes a new server; one admission per name at a time. */
  connect(admission: ServerAdmission): Promise<AdmitReport>;
  /** The operator admits a server (config, `admit`): its name and URL become the operator's. */
  admit(name: string, spec: DownstreamSpec): Promise<AdmitReport>;
  /** Connects every configured server; unreachable ones are reported, not fatal. */
  start(): Promise<StartReport>;
  /** Waits for `start()` to settle, but never past its grace period. */
  startGrace(): Promise<void>;
  /** Runs `call` on `downstream`, marked in flight for it (request routing, graceful retirement). */
  track<T>(downstream: Downstream, context: CallContext, call: () => Promise<T>): Promise<T>;
  /** Applies the operator's new servers: adds, re-points and removes (runtime loads untouched). */
  reconfigure(servers: Readonly<Record<string, DownstreamSpec>>): Promise<ReconfigureReport>;
  /** Closes every connection. */
  close(): Promise<void>;
}

/** How long a session's client may take to answer a downstream's request (a human filling a form). */
const relayTimeoutMs = 10 * 60_000;

/** Whether two server specs reach the same server the same way (command, args, env or URL). */
function sameSpec(left: DownstreamSpec, right: DownstreamSpec): boolean {
  if (left.kind === 'in-process' || right.kind === 'in-process') return left === right;
  return JSON.stringify(left) === JSON.stringify(right);
}

/** Where a downstream's request made during `context`'s call goes: that call's own client. */
export function askerOf(context: CallContext): RelayTarget {
  if (context.relay === undefined) return { refused: 'the calling session cannot receive requests' };
  return { send: context.relay, capabilities: context.clientCapabilities ?? {} };
}

/**
 * The gateway's registry (SPEC §3.12): the downstream connections and local tools it knows, the
 * names the operator admitted, admission (serialised per name), the calls in flight on each
 * connection, whom a downstream's own requests belong to, and the retirement of a connection
 * once its calls in flight have ended. A bad local tool name throws here, before anything runs.
 */
export function createRegistry(options: RegistryOptions): Registry {
  const { log, catalog } = options;
  const downstreams = new Map<string, Downstream>();
  /** Names being admitted right now: admission is serialised per name (SPEC §3.4). */
  const admitting = new Set<string>();
  /** Calls in flight per downstream, by server name: whom a downstream's own request belongs to. */
  const inFlight = new Map<Downstream, Set<{ readonly context: CallContext }>>();
  const retiring = new Map<Downstream, () => void>();
  const localTools = new Map<string, LocalTool>();
  /** How each stdio command answered its one protocol probe, for the life of the gateway (issue 31). */
  const verdicts: ProtocolVerdicts = new Map();
  /**
   * The URL the operator admitted each HTTP server name at (config or `admit`): the only URL its
   * token is ever presented to (SPEC §3.9). A runtime load never adds to it.
   */
  const operatorUrls = new Map<string, string>();
  for (const [name, spec] of Object.entries(options.servers ?? {}))
    if (spec.kind === 'http') operatorUrls.set(name, spec.url);
  /**
   * Every name the operator admitted (config or `admit`): the operator's, connected or not, so a
   * runtime load can never re-point it while it is down (SPEC §3.4).
   */
  const operatorNames = new Set(Object.keys(options.servers ?? {}));
  /** The configured servers' connections while `start()` runs, and until when a search waits for them. */
  let starting: { settled: Promise<unknown>; until: number } | undefined;

  for (const tool of options.localTools ?? []) {
    const problem = nameProblem(tool.name);
    if (problem) throw new ProxyError('invalid-name', `Invalid local tool name: ${problem}.`);
    if (localTools.has(tool.name)) throw new ProxyError('invalid-name', `Duplicate local tool "${tool.name}".`);
    localTools.set(tool.name, tool);
  }

  /**
   * The session a shared downstream's request belongs to (SPEC §3.10): the one whose call to it is
   * in flight. None in flight, or calls from several sessions at once (stdio carries no related
   * request id, so the asker cannot be told apart), and the request is refused: never guessed.
   */
  function routeServerRequest(name: string, downstream: Downstream): RelayTarget {
    const calls = [...(inFlight.get(downstream) ?? [])];
    const latest = calls.at(-1)?.context;
    if (latest === undefined) return { refused: `no call to server "${name}" is in progress` };
    const asking = new Set(calls.map((call) => scopeDigest(call.context.principal, call.context.scope)));
    if (asking.size > 1) {
      return {
        refused: `calls from ${asking.size} sessions to server "${name}" are in progress; the proxy cannot tell which one asked`,
      };
    }
    return askerOf(latest);
  }

  /** Closes `downstream` now, or once the calls in flight on it have ended. */
  function retire(downstream: Downstream): Promise<void> {
    if (!inFlight.has(downstream)) return downstream.close();
    return new Promise((resolve) => {
      retiring.set(downstream, () => {
        retiring.delete(downstream);
        void downstream.close().finally(resolve);
      });
    });
  }

  /** Forgets `name`'s connection and its tools; the connection retires once its calls have ended. */
  function drop(name: string, downstream: Downstream): void {
    downstreams.delete(name);
    catalog.remove(name);
    void retire(downstream);
  }

  function register({ name, spec, admission, dispatcher }: ServerAdmission): Downstream {
    const problem = nameProblem(name);
    if (problem) throw new ProxyError('invalid-name', `Invalid server name: ${problem}.`);
    const downstream: Downstream = new Downstream({
      name,
      spec,
      admission,
      ...options.reach(name, spec),
      log,
      verdicts,
      ...(dispatcher && { dispatcher }),
      // The operator's servers may ask the calling session (form, sampling, roots); a server the
      // model loaded at runtime is untrusted and is declared nothing, so it can ask nobody.
      ...(admission !== 'runtime' && {
        relay: {
          label: `server "${name}"`,
          markers: { nameMarkers: DEFAULT_SECRET_MARKERS, schemaMarkers: DEFAULT_SECRET_MARKERS },
          timeoutMs: relayTimeoutMs,
          log,
          target: () => routeServerRequest(name, downstream),
        },
      }),
      onTools: (listed) => catalog.list(name, listed),
    });
    downstreams.set(name, downstream);
    return downstream;
  }

  const registry: Registry = {
    localTools: () => [...localTools.values()],
    localTool: (name) => localTools.get(name),
    get: (name) => downstreams.get(name),
    facts: (name) => downstreams.get(name)?.facts,
    taken: (name) => downstreams.has(name) || admitting.has(name),
    connecting: () => [...admitting],
    isOperators: (name) => operatorNames.has(name),
    operatorUrl: (name) => operatorUrls.get(name),

    async connect(admission) {
      const { name } = admission;
      if (admitting.has(name) || downstreams.has(name)) {
        throw new ProxyError('already-admitted', `A server named "${name}" is already admitted; choose another name.`);
      }
      admitting.add(name);
      try {
        const downstream = register(admission);
        try {
          await downstream.connect();
        } catch (error) {
          downstreams.delete(name);
          catalog.remove(name);
          throw error;
        }
        const { protocolVersion } = downstream;
        return { server: name, tools: catalog.count(name), ...(protocolVersion && { protocolVersion }) };
      } finally {
        admitting.delete(name);
      }
    },

    admit(name, spec) {
      // Bind before connecting: the credential lookup needs the operator's URL for this name.
      if (!downstreams.has(name) && !admitting.has(name)) {
        if (spec.kind === 'http') operatorUrls.set(name, spec.url);
        operatorNames.add(name);
      }
      return registry.connect({ name, spec, admission: spec.kind === 'in-process' ? 'in-process' : 'config' });
    },

    async start() {
      const entries = Object.entries(options.servers ?? {});
      if (entries.length > 0) log(`connecting ${entries.length} servers: ${entries.map(([name]) => name).join(', ')}`);
      const settling = Promise.allSettled(entries.map(([name, spec]) => registry.admit(name, spec)));
      starting = { settled: settling, until: Date.now() + (options.startGraceMs ?? 10_000) };
      const outcomes = await settling;
      starting = undefined;
      const connected: string[] = [];
      const failed: { name: string; reason: string }[] = [];
      outcomes.forEach((outcome, position) => {
        const name = entries[position]?.[0] ?? '';
        if (outcome.status === 'fulfilled') connected.push(name);
        else
          failed.push({
            name,
            reason: outcome.reason instanceof Error ? outcome.reason.message : String(outcome.reason),
          });
      });
      log(
        `connected ${connected.length} of ${entries.length} servers${connected.length ? `: ${connected.join(', ')}` : ''}`,
      );
      for (const failure of failed) log(`server "${failure.name}" failed to start: ${failure.reason}`);
      return { connected, failed };
    },

    async startGrace() {
      const remaining = starting ? starting.until - Date.now() : 0;
      if (!starting || remaining <= 0) return;
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, remaining);
        timer.unref();
      });
      await Promise.race([starting.settled, expired]);
      clearTimeout(timer);
    },

    async track(downstream, context, call) {
      const entry = { context };
      const calls = inFlight.get(downstream) ?? new Set();
      inFlight.set(downstream, calls);
      calls.add(entry);
      try {
        return await call();
      } finally {
        calls.delete(entry);
        if (calls.size === 0) {
          inFlight.delete(downstream);
          retiring.get(downstream)?.();
        }
      }
    },

    async reconfigure(servers) {
      const added: string[] = [];
      const repointed: string[] = [];
      const removed: string[] = [];
      const failed: { name: string; reason: string }[] = [];
      const tools: Record<string, number> = {};
      const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));
      // Removed: configured names the new config no longer holds (runtime loads are not the config's).
      for (const name of [...operatorNames]) {
        if (Object.hasOwn(servers, name)) continue;
        const downstream = downstreams.get(name);
        // A host's in-process server is not the config file's to remove.
        if (downstream?.admission === 'in-process') continue;
        operatorNames.delete(name);
        operatorUrls.delete(name);
        if (downstream) drop(name, downstream);
        removed.push(name);
      }
      for (const [name, spec] of Object.entries(servers)) {
        const current = downstreams.get(name);
        if (current && sameSpec(current.spec, spec)) continue;
        // Re-pointed: the old connection serves its calls in flight, new calls go to the new one.
        if (current) drop(name, current);
        operatorNames.add(name);
        if (spec.kind === 'http') operatorUrls.set(name, spec.url);
        else operatorUrls.delete(name);
        try {
          const admitted = await registry.connect({
            name,
            spec,
            admission: spec.kind === 'in-process' ? 'in-process' : 'config',
          });
          tools[name] = admitted.tools;
          (current ? repointed : added).push(name);
        } catch (error) {
          failed.push({ name, reason: reason(error) });
        }
      }
      return { added, repointed, removed, failed, tools };
    },

    async close() {
      await Promise.allSettled([...downstreams.values()].map((downstream) => downstream.close()));
    },
  };
  return registry;
}
