import { createHash, randomBytes, randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages/messages';
import type { ElicitRequestFormParams, ElicitResult } from '@modelcontextprotocol/server';
import type { HouseholdRuntime } from '../runtime';
import { defaultClaudeModel, defaultMaxToolRounds, runClaudeTurn } from './agent-loop';
import { runAttack } from './attacks';
import { ChatError } from './chat-error';
import { createChatLog } from './chat-log';
import { type ChatStore, createMemoryChatStore } from './chat-store';
import { type McpSession, openMcpSession } from './mcp-session';
import { resumeOrder, runOfflineTurn, type TurnEnd } from './offline-planner';
import type { ChatSessionState, TurnContext } from './tool-runner';
import { createMemoryTurnLeaseStore, type ResumePoint, type TurnLeaseStore } from './turn-leases';
import type { ChatEventBody, ChatService, PlannerInfo } from './types';

/** Options of {@link createChatService}. */
export interface ChatServiceOptions {
  /** The composed household: its gateway (one MCP session per chat), approvals and event bus. */
  readonly runtime: Pick<HouseholdRuntime, 'gateway' | 'identity' | 'events' | 'merchant'>;
  /** Claude when `apiKey` is set (`ANTHROPIC_API_KEY`); otherwise the offline planner. */
  readonly anthropic?: { readonly apiKey?: string; readonly model?: string; readonly baseURL?: string };
  /** Where sessions and their events are kept; default in memory. The app passes the SQLite one. */
  readonly store?: ChatStore;
  /** Bound on model ↔ tool rounds per turn (default 12). */
  readonly maxToolRounds?: number;
  /**
   * Most chat sessions holding an open MCP session in this process (default 256). Beyond it the
   * least recently used idle one is closed (no turn running, no form waiting); its log stays in the
   * store and it reopens on its next use with a fresh discovery gate, as after a restart.
   */
  readonly maxLiveSessions?: number;
  /**
   * Who runs each turn (docs/scale-out.md, turn leases); default in memory, for one instance alone.
   * The app passes the household store's, so a turn whose instance died is finished by another.
   */
  readonly leases?: TurnLeaseStore;
  /** How long a turn's lease lasts unrenewed (default 10 s); it is renewed every third of that while the turn runs. */
  readonly turnLeaseMs?: number;
  readonly clock?: () => Date;
  /** Where unexpected faults of a background turn are reported (the chat shows a short message). */
  readonly onError?: (error: unknown) => void;
}

/** Longest message a person may send. */
const maxMessageLength = 4_000;

/** Default lease of a running turn. */
const defaultTurnLeaseMs = 10_000;

/** Most orphaned turns one sweep takes over. */
const takeoversPerSweep = 16;

/** Why a message cannot start a turn now. */
const busy = 'The agent is still working on the previous message; wait for it to finish (or answer its form).';

/** An elicitation form waiting for its human. */
interface PendingForm {
  readonly schema: ElicitRequestFormParams['requestedSchema'];
  readonly resolve: (result: ElicitResult) => void;
}

/** A session this process has opened: its MCP session, planner state and the running turn. */
interface LiveSession {
  readonly state: ChatSessionState;
  readonly history: MessageParam[];
  readonly forms: Map<string, PendingForm>;
  turn?: { readonly controller: AbortController; readonly done: Promise<void> } | undefined;
}

/**
 * The chat service (SPEC §8): one per server process. Each chat session has its own MCP session on
 * the embedded proxy (its own discovery gate) and a durable event log. `send` starts the turn in the
 * background, detached from the HTTP request that sent it; the page reads the log (stored, then
 * live), so a reload loses nothing. Sessions from the store that this process has not opened yet
 * get a new MCP session on first use (the gate starts empty, as after any restart).
 */
export function createChatService(options: ChatServiceOptions): ChatService {
  const { runtime } = options;
  const store = options.store ?? createMemoryChatStore();
  const log = createChatLog(store, options.clock);
  const maxToolRounds = options.maxToolRounds ?? defaultMaxToolRounds;
  const apiKey = options.anthropic?.apiKey;
  const model = options.anthropic?.model || defaultClaudeModel;
  const claude =
    apiKey === undefined || apiKey === ''
      ? undefined
      : new Anthropic({
          apiKey,
          ...(options.anthropic?.baseURL === undefined ? {} : { baseURL: options.anthropic.baseURL }),
        });
  const planner: PlannerInfo = claude === undefined ? { kind: 'offline' } : { kind: 'claude', model };
  const maxLiveSessions = options.maxLiveSessions ?? 256;
  const leases = options.leases ?? createMemoryTurnLeaseStore();
  const turnLeaseMs = options.turnLeaseMs ?? defaultTurnLeaseMs;
  // This instance, as lease owner: a fresh id per process, so a restart is a successor like any other.
  const owner = randomUUID();
  const now = () => (options.clock?.() ?? new Date()).getTime();
  const lease = (sessionId: string) => ({ sessionId, owner, now: now(), ttlMs: turnLeaseMs });
  // Insertion order is recency: every use moves a session to the end, so the first idle one is the least recent.
  const live = new Map<string, Promise<LiveSession>>();
  let closed = false;

  const emit = (sessionId: string) => (body: ChatEventBody) => log.append(sessionId, body);

  function open(sessionId: string): Promise<LiveSession> {
    const existing = live.get(sessionId);
    if (existing) {
      live.delete(sessionId);
      live.set(sessionId, existing);
      return existing;
    }
    const forms = new Map<string, PendingForm>();
    const opening = openMcpSession(runtime.gateway, {
      name: `chat-${sessionId}`,
      chatSession: sessionId,
      elicit: (params, signal) => askHuman(sessionId, forms, params, signal),
    }).then(
      (mcp: McpSession): LiveSession => ({
        state: {
          sessionId,
          mcp,
          approveUrls: new Map(),
          invoiceApprovals: new Map(),
          payments: new Map(),
          approvalStates: new Map(),
        },
        history: [],
        forms,
      }),
    );
    live.set(sessionId, opening);
    opening.catch(() => live.delete(sessionId));
    void evictIdle(sessionId).catch((error: unknown) => options.onError?.(error));
    return opening;
  }

  /** Closes the least recently used idle sessions' MCP sessions while more than the cap are open. */
  async function evictIdle(keep: string): Promise<void> {
    for (const [sessionId, opening] of live) {
      if (live.size <= maxLiveSessions) return;
      if (sessionId === keep) continue;
      const session = await opening.catch(() => undefined);
      // A turn running or a form waiting for its human is never cut off.
      if (session === undefined || session.turn !== undefined || session.forms.size > 0) continue;
      if (live.get(sessionId) !== opening) continue;
      live.delete(sessionId);
      await session.state.mcp.close();
    }
  }

  /** The session's elicitation handler: shows the proxy's form in the chat and waits for the answer. */
  async function askHuman(
    sessionId: string,
    forms: Map<string, PendingForm>,
    params: ElicitRequestFormParams,
    signal: AbortSignal,
  ): Promise<ElicitResult> {
    const elicitationId = randomUUID();
    const required = new Set(params.requestedSchema.required ?? []);
    const answer = new Promise<ElicitResult>((resolve) => {
      forms.set(elicitationId, { schema: params.requestedSchema, resolve });
    });
    const cancel = () => {
      const form = forms.get(elicitationId);
      if (form === undefined) return;
      forms.delete(elicitationId);
      form.resolve({ action: 'cancel' });
      void emit(sessionId)({ type: 'elicitation-closed', elicitationId, action: 'cancel' });
    };
    signal.addEventListener('abort', cancel, { once: true });
    await emit(sessionId)({
      type: 'elicitation',
      elicitationId,
      message: params.message.slice(0, 2_000),
      fields: Object.entries(params.requestedSchema.properties).map(([name, schema]) => ({
        name,
        title: (schema.title ?? schema.description ?? name).slice(0, 200),
        required: required.has(name),
      })),
    });
    try {
      return await answer;
    } finally {
      signal.removeEventListener('abort', cancel);
    }
  }

  /** What a turn does, given its context: the planner on a message, or the continuation of a dead turn's order. */
  type Plan = (context: TurnContext) => Promise<TurnEnd>;

  /** The planner's answer to a message the person sent in a session (Claude keeps its history there). */
  function planFor(text: string, live: LiveSession): Plan {
    return (context) => {
      // Attack-console moves are scripted, whichever planner is active: each runs in a fresh MCP session on the proxy.
      const attack = (move: string) =>
        runAttack(context, move, { gateway: runtime.gateway, approvals: runtime.identity.store.identity.approvals });
      return claude === undefined || /^\/attack\b/i.test(text)
        ? runOfflineTurn(context, text, { attack })
        : runClaudeTurn(context, text, { client: claude, model, maxToolRounds, history: live.history });
    };
  }

  /**
   * Starts a turn on a session whose lease this instance has just taken (docs/scale-out.md): renews
   * the lease every third of its length while the turn runs, and aborts the turn when another
   * instance took it over. At the end the lease is freed before the session is: a turn that ends
   * while it could still be resumed elsewhere (this service closing mid-order) leaves the lease to
   * expire, so a successor (another instance, or this one restarted) finishes the order.
   */
  function startTurn(
    sessionId: string,
    live: LiveSession,
    controller: AbortController,
    plan: Plan,
    how: { readonly before?: () => Promise<unknown>; readonly resume?: ResumePoint } = {},
  ): void {
    let resume = how.resume;
    let lost = false;
    const renewal = setInterval(
      () => {
        leases.renew(lease(sessionId)).then(
          (held) => {
            if (held) return;
            lost = true;
            controller.abort();
          },
          (error: unknown) => options.onError?.(error),
        );
      },
      Math.max(1, Math.floor(turnLeaseMs / 3)),
    );
    renewal.unref();
    const handedOver = () => lost || (closed && resume !== undefined);
    let released: Promise<void> | undefined;
    const release = () => {
      released ??= (async () => {
        clearInterval(renewal);
        if (!handedOver()) await leases.release(sessionId, owner).catch((error: unknown) => options.onError?.(error));
        live.turn = undefined;
      })();
      return released;
    };
    const resumable = async (point: ResumePoint | null) => {
      resume = point ?? undefined;
      if (!(await leases.mark({ sessionId, owner, resume: point }))) {
        lost = true;
        controller.abort();
        controller.signal.throwIfAborted();
      }
    };
    const started = (async () => {
      await how.before?.();
      await runTurn(sessionId, live, { plan, signal: controller.signal, release, handedOver, resumable });
    })();
    const done = started.catch((error: unknown) => options.onError?.(error)).finally(release);
    live.turn = { controller, done };
  }

  /** Runs one turn; `release` frees the session for the next message just before 'turn-ended' is logged. */
  async function runTurn(
    sessionId: string,
    live: LiveSession,
    turn: {
      readonly plan: Plan;
      readonly signal: AbortSignal;
      readonly release: () => Promise<void>;
      /** True when the turn goes on elsewhere: it logs no end of its own. */
      readonly handedOver: () => boolean;
      readonly resumable: (point: ResumePoint | null) => Promise<void>;
    },
  ): Promise<void> {
    const { signal } = turn;
    const context: TurnContext = {
      session: live.state,
      emit: emit(sessionId),
      signal,
      approvals: runtime.identity.approvals,
      callApprovals: runtime.identity.callApprovals,
      events: runtime.events,
      merchantDid: runtime.merchant?.did,
      resumable: turn.resumable,
    };
    let end: TurnEnd = 'error';
    try {
      end = await turn.plan(context);
    } catch (error) {
      if (!signal.aborted) {
        options.onError?.(error);
        await context.emit({ type: 'error', message: failureMessage(error) });
      }
    } finally {
      // Freed first: a page that sees 'turn-ended' may send the next message at once.
      await turn.release();
      if (!turn.handedOver()) {
        await context.emit({ type: 'turn-ended', reason: end }).catch((error: unknown) => options.onError?.(error));
      }
    }
  }

  /**
   * Takes over the turns whose instance died mid-order (their lease expired with a resume point):
   * each is claimed in one conditional write, so of all instances sweeping at once one finishes it.
   */
  async function sweep(): Promise<void> {
    for (const orphan of await leases.orphans(now(), takeoversPerSweep)) {
      if (closed) return;
      if (!(await store.hasSession(orphan.sessionId))) continue;
      await takeOver(orphan.sessionId, await open(orphan.sessionId));
    }
  }

  /**
   * Claims the session's lease for a turn of this instance, the local claim first (one turn at a
   * time per session, checked and set without an await in between). A lease a dead turn left with
   * a resume point is taken over: its order is finished first. Returns the controller of the new
   * turn to start, or why none may start.
   */
  async function claimTurn(
    sessionId: string,
    live: LiveSession,
  ): Promise<
    { readonly ok: true; readonly controller: AbortController } | { readonly ok: false; readonly reason: string }
  > {
    if (live.turn !== undefined) return { ok: false, reason: busy };
    const controller = new AbortController();
    live.turn = { controller, done: Promise.resolve() };
    const held = await leases.claim(lease(sessionId)).catch((error: unknown) => {
      live.turn = undefined;
      throw error;
    });
    if (held === undefined) {
      live.turn = undefined;
      return { ok: false, reason: busy };
    }
    if (held.resume !== undefined) {
      startTurn(sessionId, live, controller, (context) => resumeOrder(context, held.resume as ResumePoint), {
        resume: held.resume,
      });
      return { ok: false, reason: busy };
    }
    return { ok: true, controller };
  }

  /** Finishes the order a dead turn of this session left, when its lease is still to be had. */
  async function takeOver(sessionId: string, live: LiveSession): Promise<void> {
    const claimed = await claimTurn(sessionId, live);
    // Free, with nothing to resume (another instance finished it first): let it go again.
    if (claimed.ok) {
      live.turn = undefined;
      await leases.release(sessionId, owner);
    }
  }

  const sweeper = setInterval(
    () => {
      if (!closed) void sweep().catch((error: unknown) => options.onError?.(error));
    },
    Math.max(1, Math.floor(turnLeaseMs / 2)),
  );
  sweeper.unref();
  // A restarted instance finishes its own dead turns at once, without waiting for the first tick.
  void sweep().catch((error: unknown) => options.onError?.(error));

  return {
    planner,

    async createSession() {
      if (closed) throw new ChatError('closed', 'the chat service is closed');
      const sessionId = randomUUID();
      const secret = randomBytes(32).toString('base64url');
      await store.createSession(sessionId, (options.clock?.() ?? new Date()).toISOString());
      await store.bindSecret(sessionId, hashOfSecret(secret));
      await open(sessionId);
      return { sessionId, secret };
    },

    hasSession: (sessionId) => store.hasSession(sessionId),

    sessionOf: (secret) => store.sessionOfSecret(hashOfSecret(secret)),

    async send(sessionId, text) {
      if (closed) return { accepted: false, reason: 'The chat service is shutting down.' };
      const message = text.trim();
      if (message === '') return { accepted: false, reason: 'The message is empty.' };
      if (message.length > maxMessageLength) {
        return { accepted: false, reason: `The message is longer than ${maxMessageLength} characters.` };
      }
      if (!(await store.hasSession(sessionId))) return { accepted: false, reason: 'There is no such chat session.' };
      const live = await open(sessionId);
      const claimed = await claimTurn(sessionId, live);
      if (!claimed.ok) return { accepted: false, reason: claimed.reason };
      startTurn(sessionId, live, claimed.controller, planFor(message, live), {
        before: async () => {
          await emit(sessionId)({ type: 'user-message', text: message });
          await emit(sessionId)({ type: 'turn-started' });
        },
      });
      return { accepted: true };
    },

    async *events(sessionId, { afterId, signal }) {
      if (!(await store.hasSession(sessionId))) {
        throw new ChatError('unknown-session', 'There is no such chat session.');
      }
      yield* log.events(sessionId, { afterId, signal });
    },

    async answerElicitation(sessionId, answer) {
      const session = await (live.get(sessionId) ?? Promise.resolve(undefined));
      const form = session?.forms.get(answer.elicitationId);
      if (session === undefined || form === undefined) {
        return {
          accepted: false,
          reason: 'That form is not waiting for an answer (it may have been answered or cancelled).',
        };
      }
      let result: ElicitResult;
      if (answer.action === 'accept') {
        const content = formContent(form.schema, answer.content ?? {});
        if (!content.ok) return { accepted: false, reason: content.reason };
        result = { action: 'accept', content: content.value };
      } else {
        result = { action: answer.action };
      }
      session.forms.delete(answer.elicitationId);
      await emit(sessionId)({ type: 'elicitation-closed', elicitationId: answer.elicitationId, action: answer.action });
      form.resolve(result);
      return { accepted: true };
    },

    async close() {
      if (closed) return;
      closed = true;
      clearInterval(sweeper);
      const sessions = await Promise.allSettled(live.values());
      for (const settled of sessions) {
        if (settled.status !== 'fulfilled') continue;
        const session = settled.value;
        session.turn?.controller.abort();
        for (const form of session.forms.values()) form.resolve({ action: 'cancel' });
        session.forms.clear();
        await session.turn?.done;
        await session.state.mcp.close();
      }
      live.clear();
    },
  };
}

/** Validates a form answer against the form's fields: required ones present, numbers and booleans converted. */
function formContent(
  schema: ElicitRequestFormParams['requestedSchema'],
  content: Readonly<Record<string, string>>,
): { ok: true; value: Record<string, string | number | boolean> } | { ok: false; reason: string } {
  const value: Record<string, string | number | boolean> = {};
  for (const [name, field] of Object.entries(schema.properties)) {
    const raw = content[name]?.trim();
    if (raw === undefined || raw === '') {
      if (schema.required?.includes(name)) return { ok: false, reason: `"${field.title ?? name}" is required.` };
      continue;
    }
    if (field.type === 'number' || field.type === 'integer') {
      const number = Number(raw);
      if (!Number.isFinite(number) || (field.type === 'integer' && !Number.isInteger(number))) {
        return { ok: false, reason: `"${field.title ?? name}" must be a number.` };
      }
      value[name] = number;
    } else if (field.type === 'boolean') {
      value[name] = raw === 'true';
    } else {
      value[name] = raw.slice(0, 2_000);
    }
  }
  return { ok: true, value };
}

/** A failed turn in words: the cause's message, never a stack. */
function failureMessage(error: unknown): string {
  if (error instanceof Anthropic.APIError) {
    return `Claude could not answer (${error.status ?? 'no status'}): ${error.message}`.slice(0, 500);
  }
  return `The turn failed: ${error instanceof Error ? error.message : 'unknown error'}`.slice(0, 500);
}

/** What the store keeps of a chat secret: its SHA-256 (the secret has 256 bits; no salt or stretching is needed). */
function hashOfSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}
