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
import type { Elicit, Principal, RelayRequest } from '../gateway/types';
import { memorySpentLedger, type SpentLedger } from '../store/spent-ledger';
import { createHeldCalls, type HeldStep } from './held-calls';

/** How long an asked question's request state stays valid: as long as a person may take over a form. */
const ttlSeconds = 600;

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
}

/** How a face runs a round. */
export interface RoundOptions {
  /** The client can show forms (it declared elicitation). */
  readonly canAsk: boolean;
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
 * SDK's legacy shim pushes them over the session and re-enters the handler).
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

function refused(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** Input rounds keyed by `options.key`; see {@link InputRounds}. */
export function createInputRounds(options: InputRoundsOptions): InputRounds {
  const codec = createRequestStateCodec<RoundState>({ key: options.key, ttlSeconds });
  const now = options.now ?? Date.now;
  const replica = options.replica ?? randomUUID();
  const holds = createHeldCalls({ timeoutMs: ttlSeconds * 1000 });

  /** A held call's step as this request's answer: its result, or its questions under a new state. */
  async function render(step: HeldStep, who: string, call: string): Promise<CallToolResult | InputRequiredResult> {
    if (step.kind === 'done') return step.result;
    const held = { id: step.call.id, round: step.call.round, replica };
    const next: RoundState = { v: 1, id: randomUUID(), who, call, asked: '', answers: {}, held };
    return inputRequired({ inputRequests: step.inputRequests, requestState: await codec.mint(next) });
  }

  return {
    verify: codec.verify,
    async run(ctx, call, { canAsk, hold }, answer) {
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
        // Only the answer to the question the state says was asked counts: nothing else is taken from the client.
        const view =
          state?.asked === key ? inputResponse(ctx.mcpReq.inputResponses, key) : { kind: 'missing' as const };
        if (view.kind === 'elicit') {
          answers[key] = { action: view.action, ...(view.content !== undefined && { content: view.content as never }) };
          return answers[key];
        }
        throw new InputRequired(key, params);
      };
      const turn = { ...(canAsk && { elicit }), signal: ctx.mcpReq.signal };
      try {
        if (!hold) return await answer(turn);
        const step = await holds.start((relay, signal) => answer({ ...turn, relay, signal }), ctx.mcpReq.signal);
        return await render(step, who, fingerprint);
      } catch (error) {
        if (!isInputRequired(error)) throw error;
        const next: RoundState = { v: 1, id: randomUUID(), who, call: fingerprint, asked: error.key, answers };
        return inputRequired({
          inputRequests: {
            [error.key]: inputRequired.elicit({
              message: error.request.message,
              requestedSchema: error.request.requestedSchema as never,
            }),
          },
          requestState: await codec.mint(next),
        });
      }
    },
  };
}

/** Rounds for one process (a stdio face, a test): a random key and a memory ledger. */
export function localInputRounds(): InputRounds {
  return createInputRounds({ key: randomBytes(32), ledger: memorySpentLedger() });
}
