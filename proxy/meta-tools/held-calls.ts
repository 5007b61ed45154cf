import { randomUUID } from 'node:crypto';
import {
  type CallToolResult,
  type InputRequest,
  inputRequired,
  inputResponse,
  ProtocolError,
  ProtocolErrorCode,
  type Result,
} from '@modelcontextprotocol/server';
import type { RelayRequest } from '../gateway/types';

/** A downstream's request waiting for the client's answer, under the key the answer comes back as. */
interface Waiting {
  readonly request: Parameters<RelayRequest>[0];
  readonly resolve: (result: Result) => void;
  readonly reject: (error: Error) => void;
}

/** Where a held call stands: finished (its result, or its fault), or waiting for answers. */
export type HeldStep =
  | { readonly kind: 'done'; readonly result: CallToolResult }
  | { readonly kind: 'asking'; readonly call: HeldCall; readonly inputRequests: Record<string, InputRequest> };

/**
 * A call that runs on while its client answers the downstream's questions (SPEC §3.12): a
 * 2026-07-28 client cannot be sent a request in the middle of its call, so each question the
 * downstream asks ends the client's request with `input_required`, and the client's retry brings
 * the answer to the call, still in flight in this process.
 */
export interface HeldCall {
  readonly id: string;
  /** Which round the next retry must be: an older request state is stale. */
  readonly round: number;
  /** Hands the downstream the answers `responses` carries, then waits for the call's next step. */
  resume(responses: Record<string, unknown> | undefined, signal: AbortSignal): Promise<HeldStep>;
}

/** Options of {@link createHeldCalls}. */
export interface HeldCallsOptions {
  /** How long a question waits for the client's retry before the call is cancelled. */
  readonly timeoutMs: number;
  /** Calls waiting for answers at once; a downstream's question beyond it is refused. */
  readonly limit?: number;
}

/** The calls of one process that wait for their clients' answers. */
export interface HeldCalls {
  /**
   * Runs `call` with a relay that holds the downstream's requests for the client, and a signal
   * that aborts when the client gives up. Resolves with the first step; a fault of `call` before
   * any question rejects, as the call itself would.
   */
  start(
    call: (relay: RelayRequest, signal: AbortSignal) => Promise<CallToolResult>,
    signal: AbortSignal,
  ): Promise<HeldStep>;
  /** The call held under `id`, if this process holds it. */
  get(id: string): HeldCall | undefined;
}

/** The embedded request a 2026 client is asked, for a downstream's request; `undefined` when it has none. */
function embed(request: Parameters<RelayRequest>[0]): InputRequest | undefined {
  // The SDK client validated these params against the method's schema before the relay saw them.
  const params: Record<string, unknown> = request.params ?? {};
  switch (request.method) {
    case 'elicitation/create': {
      if (params.mode === 'url') {
        const { mode: _mode, elicitationId: _id, ...rest } = params;
        return inputRequired.elicitUrl(rest as never);
      }
      const { mode: _mode, ...rest } = params;
      return inputRequired.elicit(rest as never);
    }
    case 'sampling/createMessage':
      return inputRequired.createMessage(params as never);
    case 'roots/list':
      return inputRequired.listRoots();
    default:
      return undefined;
  }
}

/** The client's answer to `method`, as the downstream expects it; `undefined` when `responses` has none. */
function answerTo(method: string, responses: Record<string, unknown> | undefined, key: string): Result | undefined {
  const view = inputResponse(responses, key);
  if (method === 'elicitation/create' && view.kind === 'elicit') {
    return { action: view.action, ...(view.content !== undefined && { content: view.content }) };
  }
  if (method === 'sampling/createMessage' && view.kind === 'sampling') return view.result;
  if (method === 'roots/list' && view.kind === 'roots') return { roots: view.roots };
  return undefined;
}

/** Held calls of this process; see {@link HeldCalls}. */
export function createHeldCalls(options: HeldCallsOptions): HeldCalls {
  const limit = options.limit ?? 256;
  const held = new Map<string, HeldCall>();

  return {
    get: (id) => held.get(id),
    start(call, signal) {
      const id = randomUUID();
      const aborter = new AbortController();
      const waiting = new Map<string, Waiting>();
      let asked = 0;
      let round = 0;
      let finished: { result: CallToolResult } | { error: unknown } | undefined;
      let wake: (() => void) | undefined;
      let expiry: NodeJS.Timeout | undefined;

      const forget = () => {
        clearTimeout(expiry);
        held.delete(id);
      };
      // Nobody answers within the time a person may take: the call is cancelled.
      const expire = () => {
        forget();
        aborter.abort(new Error('the client did not answer in time'));
        for (const question of waiting.values()) question.reject(new Error('The client did not answer in time.'));
        waiting.clear();
      };

      const relay: RelayRequest = (request, relayOptions) => {
        // A ping is answered by the proxy: the client is there as long as it keeps retrying.
        if (request.method === 'ping') return Promise.resolve({});
        // A cancelled call asks nothing more; nor does one beyond the limit of calls held at once.
        if (embed(request) === undefined || aborter.signal.aborted || (!held.has(id) && held.size >= limit)) {
          return Promise.reject(
            new ProtocolError(
              ProtocolErrorCode.InvalidRequest,
              `Refused by the proxy: cannot ask the client ${request.method}`,
            ),
          );
        }
        return new Promise<Result>((resolve, reject) => {
          const key = `relay-${++asked}`;
          waiting.set(key, { request, resolve, reject });
          relayOptions.signal?.addEventListener(
            'abort',
            () => {
              waiting.delete(key);
              reject(relayOptions.signal?.reason);
            },
            { once: true },
          );
          wake?.();
        });
      };

      /** The call's next step, as soon as it finishes or asks; the client giving up on `during` cancels it. */
      const next = async (during: AbortSignal): Promise<HeldStep> => {
        clearTimeout(expiry);
        const cancel = () => {
          forget();
          aborter.abort(during.reason);
        };
        during.addEventListener('abort', cancel);
        try {
          if (finished === undefined && waiting.size === 0) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
          }
        } finally {
          during.removeEventListener('abort', cancel);
        }
        // Cancelled while it waited: whatever the call does next, nobody is asked or answered.
        if (finished === undefined && aborter.signal.aborted) throw aborter.signal.reason;
        if (finished !== undefined) {
          forget();
          if ('error' in finished) throw finished.error;
          return { kind: 'done', result: finished.result };
        }
        held.set(id, entry);
        round += 1;
        expiry = setTimeout(expire, options.timeoutMs).unref();
        const inputRequests = Object.fromEntries(
          [...waiting].map(([key, question]) => [key, embed(question.request) as InputRequest]),
        );
        return { kind: 'asking', call: entry, inputRequests };
      };

      const entry: HeldCall = {
        id,
        get round() {
          return round;
        },
        resume(responses, during) {
          for (const [key, question] of waiting) {
            const answer = answerTo(question.request.method, responses, key);
            if (answer === undefined) continue;
            waiting.delete(key);
            question.resolve(answer);
          }
          return next(during);
        },
      };

      call(relay, aborter.signal).then(
        (result) => {
          finished = { result };
          wake?.();
        },
        (error: unknown) => {
          finished = { error };
          wake?.();
        },
      );
      return next(signal);
    },
  };
}
