import type { Client, ClientCapabilities, Result } from '@modelcontextprotocol/client';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
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
  const refuse = (method: string, reason: string): never => {
    relay.log(`${relay.label} sent ${method}; refused: ${reason}`);
    throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `Refused by the proxy: ${reason}`);
  };
  const options = (signal: AbortSignal) => ({ signal, timeout: relay.timeoutMs });

  if (declared.elicitation !== undefined) {
    client.setRequestHandler('elicitation/create', async (request, ctx) => {
      const secrets = relay.markers ? screenUpstreamForm(request.params, relay.markers) : [];
      if (secrets.length > 0) {
        const fields = secrets.map(({ field, marker }) => `"${field}" (looks like ${marker})`).join(', ');
        const reason = `The form asked for a secret (${fields}); secrets are never collected through a form.`;
        relay.log(`${relay.label} asked for a secret through a form; declined: ${fields}`);
        relay.onRefused?.(reason);
        return { action: 'decline', _meta: { [refusedMetaKey]: reason } };
      }
      const target = relay.target(request.method);
      if ('refused' in target) return refuse(request.method, target.refused);
      const mode = request.params.mode ?? 'form';
      if (!modeSupported(target.capabilities, mode)) {
        return refuse(request.method, `the client does not support ${mode}-mode elicitation`);
      }
      return (await target.send(
        { method: request.method, params: request.params },
        options(ctx.mcpReq.signal),
      )) as never;
    });
  }

  if (declared.sampling !== undefined) {
    client.setRequestHandler('sampling/createMessage', async (request, ctx) => {
      const target = relay.target(request.method);
      if ('refused' in target) return refuse(request.method, target.refused);
      if (target.capabilities.sampling === undefined)
        return refuse(request.method, 'the client does not support sampling');
      return (await target.send(
        { method: request.method, params: request.params },
        options(ctx.mcpReq.signal),
      )) as never;
    });
  }

  if (declared.roots !== undefined) {
    client.setRequestHandler('roots/list', async (request, ctx) => {
      const target = relay.target(request.method);
      // No session to ask, or one without roots: the server sees no roots, never another session's.
      if ('refused' in target) {
        relay.log(`${relay.label} sent roots/list; answered with no roots: ${target.refused}`);
        return { roots: [] };
      }
      if (target.capabilities.roots === undefined) return { roots: [] };
      return (await target.send(
        { method: request.method, ...(request.params !== undefined && { params: request.params }) },
        options(ctx.mcpReq.signal),
      )) as never;
    });
  }

  client.setRequestHandler('ping', async (_request, ctx): Promise<Result> => {
    const target = relay.target('ping');
    // Outside any session the proxy answers for itself: it is alive.
    if ('refused' in target) return {};
    await target.send({ method: 'ping' }, options(ctx.mcpReq.signal));
    return {};
  });
}
