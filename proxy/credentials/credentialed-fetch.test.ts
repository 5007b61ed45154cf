import { describe, expect, it } from 'vitest';
import { redactCredential, redactSecrets, secretsOf } from './credentialed-fetch';

const credential = { headers: { Authorization: 'Bearer s3cret-token' }, unchangedSince: 0 };

describe('redaction of echoed credentials', () => {
  it('finds the header value and the bare token of a Bearer header, ignoring trivially short ones', () => {
    expect(secretsOf(credential)).toEqual(['Bearer s3cret-token', 's3cret-token']);
    expect(secretsOf({ headers: { Authorization: 'Bearer abc' }, unchangedSince: 0 })).toEqual(['Bearer abc']);
    expect(secretsOf(undefined)).toEqual([]);
  });

  it('removes the whole header value, not just the token, from text', () => {
    expect(redactCredential('sent Authorization: Bearer s3cret-token twice: s3cret-token', credential)).toBe(
      'sent Authorization: [redacted] twice: [redacted]',
    );
  });

  it('walks every string of a result: nested content, structured content, arrays and keys', () => {
    const result = {
      content: [{ type: 'text', text: 'token=s3cret-token' }],
      structuredContent: { headers: [{ value: 'Bearer s3cret-token' }], 's3cret-token': 1, count: 2 },
      isError: false,
    };
    expect(redactSecrets(result, secretsOf(credential))).toEqual({
      content: [{ type: 'text', text: 'token=[redacted]' }],
      structuredContent: { headers: [{ value: '[redacted]' }], '[redacted]': 1, count: 2 },
      isError: false,
    });
  });

  it('returns the value itself when there is nothing to redact', () => {
    const result = { content: [{ type: 'text', text: 'hello' }] };
    expect(redactSecrets(result, [])).toBe(result);
  });
});
