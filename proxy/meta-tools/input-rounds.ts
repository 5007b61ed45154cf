import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  type CallToolResult,
  createRequestStateCodec,
  type ElicitResult,
  type InputRequiredResult,
  inputRequired,
  inputResponse,
  type RequestStateCodec,
  type ServerContext,
} from '@modelcontextprotocol/server';
import canonicalize from 'canonicalize';
import { InputRequired, isInputRequired } from '../gateway/input-required';
import type { CallContext, Elicit, Principal, RelayRequest, UrlElicitation } from '../gateway/types';
import { memorySpentLedger, type SpentLedger } from '../store/spent-ledger';
import { createHeldCalls, type HeldStep } from './held-calls';

/** How long an asked question's request state stays valid: as long as a person may take over a form. */
const ttlSeconds = 600;

/**
 * How long a retry of a URL ask waits for the person before asking again (a long-poll, like
 * `await_approval`). Under the SDK clients' default 60 s per request, so the retry is answered
 * before the client gives up on it; with the v2 client's 10 rounds that is 7.5 minutes of waiting,
 * longer than a five-minute invoice lives, so an approval expires before a client's round cap.
 */
export const urlWaitMs = 45_000;

/**
 * What a request state says (signed, not encrypted: nothing secret in it). `who` and `call` bind it
 * to one principal and one call; `asked` is the question whose answer the retry must carry;
 * `answers` are the questions of earlier rounds of the same call, already answered. `held` names
 * a call in flight on `replica` that waits for the answers to its downstream's questions.
 */
interface RoundState {
  readonly v: 1;
  readonly id: string;
  readonly who: string;
  readonly call: string;
  readonly asked: string;
  /** For a URL ask: what it is about (`approval/<id>`); its retry counts only for the same ask. */
  readonly about?: string;
  readonly answers: Readonly<Record<string, ElicitResult>>;
  readonly held?: { readonly id: string; readonly round: number; readonly replica: string };
}

/** Options of {@link createInputRounds}. */
export interface InputRoundsOptions {
  /** The HMAC key (≥ 32 bytes), shared by every replica that may see a retry. */
  readonly key: Uint8Array;
  /** Where spent states are kept, shared by those replicas too. */
  readonly ledger: SpentLedger;
  readonly now?: () => number;
  /** Names this process in the states of the calls it holds; default a random id. */
  readonly replica?: string;
  /** How long a URL ask's retry (or a 2025 client's open call) waits per turn; default {@link urlWaitMs}. */
  readonly urlWaitMs?: number;
}

/** The call a round belongs to: who makes it, with which meta-tool and arguments. */
export interface RoundCall {
  readonly principal: Principal;
  readonly method: string;
  readonly name: string;
  readonly arguments: Record<string, unknown> | undefined;
}

/** What a round's call runs with: the filters' `elicit`, and, for a held call, its relay and signal. */
export interface Turn {
  /** Present when the client can show forms. */
  readonly elicit?: Elicit;
  /** Holds a downstream's requests for the client (a 2026-07-28 client that cannot be sent them). */
  readonly relay?: RelayRequest;
  /** Aborts the call: the client cancelled, or gave up answering. */
  readonly signal: AbortSignal;
  /** On the retry of a URL ask, what that ask was about ({@link CallContext.retryOf}). */
  readonly retryOf?: string;
}

/** How a face runs a round. */
export interface RoundOptions {
  /** The client can show forms (it declared elicitation). */
  readonly canAsk: boolean;
  /** The client can open URLs for the person (it declared URL elicitation); default false. */
  readonly canAskUrl?: boolean;
  /**
   * The client cannot be sent requests (2026-07-28): a downstream's own request during the call
   * holds the call in this process and is asked as `input_required` instead.
   */
  readonly hold: boolean;
}

/**
 * The one input primitive on a face (SPEC §3.12): a filter asks a person through `elicit`; the
 * face answers the client with `input_required` and a signed request state, and the retry brings
 * the answer back to the filter. A 2025 client gets the same rounds as server→client requests (the
 * SDK's legacy shim pushes them over the session and re-enters the handler). A URL ask (the
 * approval windows) is `input_required` with one URL elicitation per page to a 2026 client, each
 * retry waiting a bounded while for the person before asking again; a 2025 client gets
 * `elicitation/create` in URL mode over its session while the call stays open, then
 * `notifications/elicitation/complete` once it is settled.
 */
export interface InputRounds {
  /** For `ServerOptions.requestState.verify`: a tampered or expired state never reaches a handler. */
  readonly verify: RequestStateCodec<RoundState>['verify'];
  /**
   * Runs one round of `call`: `answer` gets an `elicit` (when the client can show forms) that
   * returns this call's answers from earlier rounds and otherwise asks. A state that belongs to
   * another principal or another call, or that was used before, is refused and nothing runs. With
   * `hold`, a downstream's question during the call is asked the same way while the call waits
   * here; a retry that reaches another process is refused with a clear error.
   */
  run(
    ctx: ServerContext,
    call: RoundCall,
    options: RoundOptions,
    answer: (turn: Turn) => Promise<CallToolResult>,
  ): Promise<CallToolResult | InputRequiredResult>;
}

function digest(...parts: string[]): string {
  return createHash('sha256')
    .update(['extensible-mcp/input-round/v1', ...parts].join('\u0000'))
    .digest('base64url')
    .slice(0, 22);
}

/** What a URL ask's answer is once the person acted on its pages. */
const settledAnswer: ElicitResult = { action: 'accept' };

/** The input request keys of a URL ask's pages: `<ask key>:<page>`. */
function pageKeys(key: string, ask: UrlElicitation): [string, { message: string; url: string }][] {
  return Object.entries(ask.pages).map(([page, visit]) => [`${key}:${page}`, visit]);
}

/** The client's answers to a URL ask's pages: the first that is not `accept`, else `accept`. */
function pagesAnswer(responses: ServerContext['mcpReq']['inputResponses'], key: string, ask: UrlElicitation) {
  for (const [pageKey] of pageKeys(key, ask)) {
    const view = inputResponse(responses, pageKey);
    if (view.kind === 'elicit' && view.action !== 'accept') return { action: view.action } satisfies ElicitResult;
  }
  return settledAnswer;
}

function refused(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/**
 * A URL ask to a 2025 client, in the call (any face's): `elicitation/create` in URL mode per page
 * over the session, then the call stays open until the ask is settled, waiting `waitMs` per turn
 * (progress every turn, when the client asked for it, so its timeout restarts), then
 * `notifications/elicitation/complete` per page.
 */
export async function pushUrlAsk(
  ctx: ServerContext,
  ask: UrlElicitation,
  waitMs: number = urlWaitMs,
): Promise<ElicitResult> {
  const { signal } = ctx.mcpReq;
  const pages = Object.values(ask.pages).map((visit) => ({ ...visit, elicitationId: randomUUID() }));
  const answers = await Promise.all(
    pages.map(({ message, url, elicitationId }) =>
      ctx.mcpReq.elicitInput({ mode: 'url', message, url, elicitationId }, { signal, timeout: ttlSeconds * 1000 }),
    ),
  );
  const refusal = answers.find((answer) => answer.action !== 'accept');
  if (refusal !== undefined) return { action: refusal.action };
  const progressToken = ctx.mcpReq._meta?.progressToken;
  for (let turn = 1; !(await ask.settled({ timeoutMs: waitMs, signal })); turn++) {
    if (signal.aborted) return { action: 'cancel' };
    if (progressToken !== undefined) {
      await ctx.mcpReq.notify({
        method: 'notifications/progress',
        params: { progressToken, progress: turn, message: 'Waiting for the household in the approval windows' },
      });
    }
  }
  for (const { elicitationId } of pages) {
    await ctx.mcpReq.notify({ method: 'notifications/elicitation/complete', params: { elicitationId } });
  }
  return settledAnswer;
}

/** Input rounds keyed by `options.key`; see {@link InputRounds}. */
export function createInputRounds(options: InputRoundsOptions): InputRounds {
  const codec = createRequestStateCodec<RoundState>({ key: options.key, ttlSeconds });
  const now = options.now ?? Date.now;
  const replica = options.replica ?? randomUUID();
  const holds = createHeldCalls({ timeoutMs: ttlSeconds * 1000 });
  const waitMs = options.urlWaitMs ?? urlWaitMs;

  /** A held call's step as this request's answer: its result, or its questions under a new state. */
  async function render(step: HeldStep, who: string, call: string): Promise<CallToolResult | InputRequiredResult> {
    if (step.kind === 'done') return step.result;
    const held = { id: step.call.id, round: step.call.round, replica };
    const next: RoundState = { v: 1, id: randomUUID(), who, call, asked: '', answers: {}, held };
    return inputRequired({ inputRequests: step.inputRequests, requestState: await codec.mint(next) });
  }

  return {
    verify: codec.verify,
    async run(ctx, call, { canAsk, canAskUrl = false, hold }, answer) {
      const who = digest(call.principal.id);
      const fingerprint = digest(call.method, call.name, canonicalize(call.arguments ?? {}) ?? '{}');
      const state = ctx.mcpReq.requestState<RoundState>();
      if (state !== undefined) {
        if (typeof state !== 'object' || state.v !== 1 || state.who !== who || state.call !== fingerprint) {
          return refused('Refused: this request state belongs to another request or another client; nothing was run.');
        }
        // Another process holds the call: the state is left unspent, so a retry there still counts.
        const held = state.held && holds.get(state.held.id);
        if (state.held !== undefined && held === undefined && state.held.replica !== replica) {
          return refused(
            'Refused: the input this call was waiting for belongs to another proxy instance (or one that has restarted). Retries of this call must reach the instance that asked; nothing was run.',
          );
        }
        if (held !== undefined && held.round !== state.held?.round) {
          return refused('Refused: this request state is from an earlier round of the call; answer the latest one.');
        }
        if (!(await options.ledger.spend(state.id, now() + ttlSeconds * 1000))) {
          return refused('Refused: this request state was already used; call the tool again to be asked afresh.');
        }
        if (state.held !== undefined && held === undefined) {
          return refused(
            'Refused: the call this answer was for has ended (it waited too long, or was cancelled); call the tool again.',
          );
        }
        if (held !== undefined)
          return render(await held.resume(ctx.mcpReq.inputResponses, ctx.mcpReq.signal), who, fingerprint);
      }
      const answers: Record<string, ElicitResult> = { ...state?.answers };
      let asked = 0;
      const elicit: Elicit = async (params) => {
        const key = `ask-${++asked}`;
        const earlier = answers[key];
        if (earlier !== undefined) return earlier;
        if (params.mode === 'url') {
          // A client that cannot open URLs is not asked: the asker falls back (`await_approval`).
          if (!canAskUrl) return { action: 'cancel' };
          const { signal } = ctx.mcpReq;
          if (await params.settled({ timeoutMs: 0, signal })) return settledAnswer;
          if (!hold) return pushUrlAsk(ctx, params, waitMs);
          // The retry of this very ask: the client opened the pages (or would not); wait a bounded
          // while for the person, then answer, or ask again under a new state.
          if (state?.asked === key && state.about === params.id) {
            const opened = pagesAnswer(ctx.mcpReq.inputResponses, key, params);
            if (opened.action !== 'accept') return opened;
            if (await params.settled({ timeoutMs: waitMs, signal })) {
              answers[key] = settledAnswer;
              return settledAnswer;
            }
          }
          throw new InputRequired(key, params);
        }
        // Only the answer to the question the state says was asked counts: nothing else is taken from the client.
        const view =
          state?.asked === key ? inputResponse(ctx.mcpReq.inputResponses, key) : { kind: 'missing' as const };
        if (view.kind === 'elicit') {
          answers[key] = { action: view.action, ...(view.content !== undefined && { content: view.content as never }) };
          return answers[key];
        }
        throw new InputRequired(key, params);
      };
      // The retry's signed, spent state names the URL ask it answers: an asker whose request was
      // decided since can say how it ended instead of asking afresh.
      const retryOf = state?.about;
      const turn = { ...(canAsk && { elicit }), signal: ctx.mcpReq.signal, ...(retryOf !== undefined && { retryOf }) };
      try {
        if (!hold) return await answer(turn);
        const step = await holds.start((relay, signal) => answer({ ...turn, relay, signal }), ctx.mcpReq.signal);
        return await render(step, who, fingerprint);
      } catch (error) {
        if (!isInputRequired(error)) throw error;
        const { key, request } = error;
        const next: RoundState = {
          v: 1,
          id: randomUUID(),
          who,
          call: fingerprint,
          asked: key,
          ...(request.mode === 'url' && { about: request.id }),
          answers,
        };
        const inputRequests =
          request.mode === 'url'
            ? Object.fromEntries(
                pageKeys(key, request).map(([pageKey, visit]) => [pageKey, inputRequired.elicitUrl(visit)]),
              )
            : {
                [key]: inputRequired.elicit({
                  message: request.message,
                  requestedSchema: request.requestedSchema as never,
                }),
              };
        return inputRequired({ inputRequests, requestState: await codec.mint(next) });
      }
    },
  };
}

/** Rounds for one process (a stdio face, a test): a random key and a memory ledger. */
export function localInputRounds(): InputRounds {
  return createInputRounds({ key: randomBytes(32), ledger: memorySpentLedger() });
}
