import { describe, expect, it } from 'vitest';
import { credentialRejected, isSendableToken, mentionsAuthFailure, minutesSince } from './credential-rejected';

describe('credential wording', () => {
  it('names the server and the age, and points at the tokens file, not the chat', () => {
    const error = credentialRejected({ server: 'notion', status: 403, unchangedMinutes: 1 });
    expect(error.code).toBe('credential-rejected');
    expect(error.message).toBe(
      'Server "notion" rejected its token (HTTP 403). The token for "notion" has been unchanged for at least 1 minute. Ask the user to update the "notion" line in the extensible-mcp tokens file, then retry. Never ask the user to paste a token in chat.',
    );
    expect(credentialRejected({ server: 'x', status: undefined, unchangedMinutes: 5 }).message).toMatch(
      /^Server "x" rejected its token\. .* 5 minutes\./,
    );
  });

  it('counts whole minutes, never negative', () => {
    expect(minutesSince(0, 59_999)).toBe(0);
    expect(minutesSince(0, 120_000)).toBe(2);
    expect(minutesSince(10_000, 0)).toBe(0);
  });

  it.each([
    ['Unauthorized', true],
    ['Forbidden: token revoked', true],
    ['invalid_token', true],
    ['Bad credentials', true],
    ['Tool not found', false],
    ['unauthorizedly long', false],
  ])('mentionsAuthFailure(%s) is %s', (message, expected) => {
    expect(mentionsAuthFailure(message)).toBe(expected);
  });

  it.each([
    ['ghp_abcDEF123', true],
    ['eyJhbGciOi.eyJzdWIi.sig-_=', true],
    ['with space', false],
    ['line\nbreak', false],
    ['look\u0430like', false],
    ['', false],
  ])('isSendableToken(%j) is %s', (token, expected) => {
    expect(isSendableToken(token)).toBe(expected);
  });
});
