import type { ElicitRequestFormParams } from '@modelcontextprotocol/server';
import type { UrlElicitation } from './types';

/**
 * Not a fault: a filter needs a person's answer that the face cannot fetch in the middle of this
 * request (SPEC §3.12). The face that asked for it turns it into an `input_required` result; the
 * client's retry brings the answer, and the filter finds it the second time round. Every layer
 * between the filter and the face lets it through untouched.
 */
export class InputRequired extends Error {
  constructor(
    /** The key the answer comes back under (`inputResponses[key]`; a URL ask's pages under `key:page`). */
    readonly key: string,
    readonly request: ElicitRequestFormParams | UrlElicitation,
  ) {
    super(`input required (${key})`);
    this.name = 'InputRequired';
  }
}

/** Whether `error` is a filter's or a tool's question for the person ({@link InputRequired}). */
export function isInputRequired(error: unknown): error is InputRequired {
  return error instanceof InputRequired;
}
