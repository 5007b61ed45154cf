import { setTimeout as delay } from 'node:timers/promises';
import type { Client, ClientCapabilities, ElicitRequest, InputResponses, Result } from '@modelcontextprotocol/client';
import { isInputRequiredResult, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import type { SecretMarkers } from '../elicitation/match-secret-marker';
import { screenUpstreamForm } from '../elicitation/screen-upstream-form';
import type { RelayRequest } from '../gateway/types';

/** `_meta` key on the decline an upstream receives when its form asked for a secret: the reason, in English. */
export const refusedMetaKey = 'io.extensible-mcp/refused';

/** Where one server→client request goes: a client session, or nowhere and why. */
export type RelayTarget =
  | { readonly send: RelayRequest; readonly capabilities: ClientCapabilities }
  | { readonly refused: string };

/** How a connection relays its server's requests (SPEC §3.10). */
export interface ServerRequestRelay {
  /** Who is asked, decided per request (search mode: the session whose call is in flight). */
  target(method: string): RelayTarget;
  /** The secret markers a server's form is screened with; `undefined` turns the screen off. */
  readonly markers: SecretMarkers | undefined;
  /** How long the client may take to answer (a human filling a form). */
  readonly timeoutMs: number;
  /** Describes the server in log lines (`the upstream`, `server "files"`). */
  readonly label: string;
  readonly log: (line: string) => void;
  /** Told when a form is refused for asking a secret (the event hook). */
  readonly onRefused?: (reason: string) => void;
}

/** Whether a client declared an elicitation mode (an empty capability means form: the spec's reading). */
export function modeSupported(capabilities: ClientCapabilities, mode: 'form' | 'url'): boolean {
  const elicitation = capabilities.elicitation;
  if (elicitation === undefined) return false;
  // An empty elicitation capability means form mode (the spec's backwards-compatible reading).
  if (mode === 'form') return elicitation.form !== undefined || elicitation.url === undefined;
  return elicitation.url !== undefined;
}

/**
 * Installs, on the proxy's client toward a server, handlers that pass the server's requests on to
 * the client session chosen by `relay`: `elicitation/create` (after the secret screen: a form
 * asking for a secret is answered with a decline carrying the reason, and never shown),
 * `sampling/createMessage`, `roots/list` (an empty list when no session can answer) and `ping`.
 * Cancellation follows the server's `notifications/cancelled` through the handler's signal, and
 * every relayed request has a timeout. Handlers exist only for what `declared` names.
 *
 * The same handlers serve both protocol versions (issue 31): a 2025-11-25 server sends these as
 * requests on its session; a 2026-07-28 server answers its `tools/call` with `input_required`, and
 * the SDK client's auto-fulfilment runs each embedded request through these handlers (with the
 * call's signal) before it retries the call with the answers. Either way the request is asked
 * while the call is in flight, so `relay` routes it to the calling session.
 */
export function relayServerRequests(client: Client, declared: ClientCapabilities, relay: ServerRequestRelay): void {
  const handle =
    (method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list' | 'ping') =>
    (
      request: { method: string; params?: Record<string, unknown> | undefined },
      ctx: { mcpReq: { signal: AbortSignal } },
    ) =>
      relayRequest(relay, relay.target(method), request, ctx.mcpReq.signal) as never;
  if (declared.elicitation !== undefined) client.setRequestHandler('elicitation/create', handle('elicitation/create'));
  if (declared.sampling !== undefined)
    client.setRequestHandler('sampling/createMessage', handle('sampling/createMessage'));
  if (declared.roots !== undefined) client.setRequestHandler('roots/list', handle('roots/list'));
  client.setRequestHandler('ping', handle('ping'));
}

/**
 * Answers one of a server's requests through `target` (see {@link relayServerRequests}): a form
 * asking for a secret is declined with the reason, never shown; what the client did not declare
 * is refused (roots: an empty list); everything else is sent to the client and its answer
 * returned. Also for a caller that fulfils a 2026 server's `input_required` itself.
 */
export async function relayRequest(
  relay: ServerRequestRelay,
  target: RelayTarget,
  request: { readonly method: string; readonly params?: Record<string, unknown> | undefined },
  signal: AbortSignal,
): Promise<Result> {
  const { method, params } = request;
  const refuse = (reason: string): never => {
    relay.log(`${relay.label} sent ${method}; refused: ${reason}`);
    throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `Refused by the proxy: ${reason}`);
  };
  const send = (capable: boolean, refusal: string) => {
    if ('refused' in target) return refuse(target.refused);
    if (!capable) return refuse(refusal);
    return target.send({ method, ...(params !== undefined && { params }) }, { signal, timeout: relay.timeoutMs });
  };
  const capabilities = 'refused' in target ? {} : target.capabilities;
  switch (method) {
    case 'elicitation/create': {
      const form = params as ElicitRequest['params'];
      const secrets = relay.markers ? screenUpstreamForm(form, relay.markers) : [];
      if (secrets.length > 0) {
        const fields = secrets.map(({ field, marker }) => `"${field}" (looks like ${marker})`).join(', ');
        const reason = `The form asked for a secret (${fields}); secrets are never collected through a form.`;
        relay.log(`${relay.label} asked for a secret through a form; declined: ${fields}`);
        relay.onRefused?.(reason);
        return { action: 'decline', _meta: { [refusedMetaKey]: reason } };
      }
      const mode = form.mode ?? 'form';
      return send(modeSupported(capabilities, mode), `the client does not support ${mode}-mode elicitation`);
    }
    case 'sampling/createMessage':
      return send(capabilities.sampling !== undefined, 'the client does not support sampling');
    case 'roots/list':
      // No session to ask, or one without roots: the server sees no roots, never another session's.
      if ('refused' in target) {
        relay.log(`${relay.label} sent roots/list; answered with no roots: ${target.refused}`);
        return { roots: [] };
      }
      return capabilities.roots === undefined ? { roots: [] } : send(true, '');
    case 'ping':
      // Outside any session the proxy answers for itself: it is alive.
      if ('refused' in target) return {};
      await send(true, '');
      return {};
    default:
      return refuse(`${method} is not relayed`);
  }
}

/** The pause before retrying a round that carried only a request state. */
const STATE_ONLY_ROUND_PAUSE_MS = 250;

/** Rounds of a 2026-07-28 server's `input_required` one call may take, as the SDK client allows by default. */
export const MAX_INPUT_ROUNDS = 10;

/**
 * Fulfils a 2026-07-28 server's `input_required` for one call, as the calling client's own (a
 * `first` result that asks nothing is returned as it is): each
 * round's requests go through `ask` (the call's client, through {@link relayRequest}), then the
 * call is sent again through `retry` with the answers and the server's request state, until it
 * completes or has asked {@link MAX_INPUT_ROUNDS} rounds (`tooMany` says how that fails). The
 * SDK client's own fulfilment cannot do this: its handlers run outside any call, so concurrent
 * calls' questions could not be told apart.
 */
export async function fulfilInputRounds(
  first: Result,
  ask: (request: { readonly method: string; readonly params?: Record<string, unknown> | undefined }) => Promise<Result>,
  retry: (answers: { inputResponses?: InputResponses; requestState?: string }) => Promise<Result>,
  tooMany: (rounds: number) => Error,
): Promise<Result> {
  let pending: Result = first;
  for (let round = 1; isInputRequiredResult(pending); round++) {
    if (round > MAX_INPUT_ROUNDS) throw tooMany(MAX_INPUT_ROUNDS);
    const { inputRequests = {}, requestState } = pending;
    const answers = await Promise.all(
      Object.entries(inputRequests).map(async ([key, request]) => [key, await ask(request)] as const),
    );
    // A round asking nothing is the server shedding load: it is retried after a pause, as the SDK does.
    if (answers.length === 0) await delay(STATE_ONLY_ROUND_PAUSE_MS);
    pending = await retry({
      ...(answers.length > 0 && { inputResponses: Object.fromEntries(answers) as InputResponses }),
      ...(requestState !== undefined && { requestState }),
    });
  }
  return pending;
}
