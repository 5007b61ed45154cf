import type { CallToolResult, InputRequests, Result } from '@modelcontextprotocol/client';
import { Client, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import { fulfilInputRounds } from './relay-server-requests';

/** Asks one of a server's embedded requests (a form, sampling, roots) of the client a call belongs to. */
export type Ask = (
  request: { readonly method: string; readonly params?: Record<string, unknown> | undefined },
  signal: AbortSignal,
) => Promise<Result>;

/**
 * The proxy's client toward a downstream. A call made with {@link AskingClient.callToolAsking}
 * has a 2026-07-28 server's `input_required` fulfilled through that call's own `ask`, round by
 * round, instead of through the handlers the SDK client would run outside any call. The call
 * keeps `callTool`'s checks (output schema, the SEP-2243 headers) on its final result.
 */
export class AskingClient extends Client {
  /** Each asking call's `ask`, by the signal that call was sent with. */
  readonly #askers = new WeakMap<AbortSignal, Ask>();

  async callToolAsking(
    params: { readonly name: string; readonly arguments: Record<string, unknown> },
    options: { readonly timeout: number },
    ask: Ask,
  ): Promise<CallToolResult> {
    const call = new AbortController();
    this.#askers.set(call.signal, ask);
    try {
      return (await this.callTool(params, { ...options, signal: call.signal })) as CallToolResult;
    } finally {
      // A question still waiting for its answer (the call timed out) is withdrawn with the call.
      call.abort();
    }
  }

  /** The SDK's extension point for a non-complete result: an asking call's rounds are fulfilled here. */
  protected override _resolveNonCompleteResult(
    decoded: Parameters<Client['_resolveNonCompleteResult']>[0],
    flow: Parameters<Client['_resolveNonCompleteResult']>[1],
  ): Promise<unknown> {
    const signal = flow.options?.signal;
    const ask = signal && this.#askers.get(signal);
    if (signal === undefined || ask === undefined) return super._resolveNonCompleteResult(decoded, flow);
    const { timeout, headers } = flow.options ?? {};
    const first = {
      resultType: 'input_required' as const,
      inputRequests: decoded.inputRequests as InputRequests,
      ...(decoded.requestState !== undefined && { requestState: decoded.requestState }),
    };
    return fulfilInputRounds(
      first,
      (request) => ask(request, signal),
      (answers) =>
        flow.retry(
          { ...flow.request.params, ...answers },
          {
            ...(timeout !== undefined && { timeout }),
            ...(headers !== undefined && { headers }),
            signal,
            allowInputRequired: true,
          },
        ) as Promise<Result>,
      (rounds) =>
        new SdkError(
          SdkErrorCode.InputRequiredRoundsExceeded,
          `The server asked for input in more than ${rounds} rounds of ${flow.request.method}.`,
        ),
    );
  }
}
