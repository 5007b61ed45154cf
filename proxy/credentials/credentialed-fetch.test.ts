import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors';
import { credentialedFetch, redactCredential, redactError, redactSecrets, secretsOf } from './credentialed-fetch';

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

describe('redaction of encoded echoes', () => {
  const token = 'tok/enc+0d5e=7a91';
  const header = { headers: { Authorization: `Bearer ${token}` }, unchangedSince: 0 };
  const secrets = secretsOf(header);

  it.each([
    ['upper case', token.toUpperCase()],
    ['mixed case', 'TOK/Enc+0D5E=7A91'],
    ['base64 of the token', Buffer.from(token).toString('base64')],
    ['base64 of the header', Buffer.from(`Bearer ${token}`).toString('base64')],
    ['base64url', Buffer.from(token).toString('base64url')],
    [
      'base64, wrapped',
      Buffer.from(token)
        .toString('base64')
        .replace(/(.{8})/, '$1\r\n'),
    ],
    ['URL-encoded', encodeURIComponent(`Bearer ${token}`)],
    ['form-encoded', new URLSearchParams({ a: `Bearer ${token}` }).toString().slice(2)],
    ['every byte percent-encoded', [...Buffer.from(token)].map((byte) => `%${byte.toString(16)}`).join('')],
    ['double percent-encoded', encodeURIComponent(encodeURIComponent(token))],
    ['spaced', [...token].join(' ')],
    ['zero-width spaced', [...token].join('\u200b')],
    ['hex', Buffer.from(token).toString('hex')],
    ['JSON unicode escapes', [...token].map((character) => `\\u00${character.charCodeAt(0).toString(16)}`).join('')],
    ['JSON-escaped slash', token.replace('/', '\\/')],
    ['HTML character references', [...token].map((character) => `&#${character.charCodeAt(0)};`).join('')],
    ['fullwidth', [...token].map((character) => String.fromCodePoint(character.charCodeAt(0) + 0xfee0)).join('')],
  ])('removes the token %s', (_, form) => {
    expect(redactSecrets(`before ${form} after`, secrets)).toBe('before [redacted] after');
  });

  it('removes base64 of the token at every alignment inside a longer base64 text', () => {
    for (const prefix of ['', 'x', 'xy', '{"authorization":"']) {
      const encoded = Buffer.from(`${prefix}${token}"}`).toString('base64');
      const redacted = redactSecrets(encoded, secrets);
      expect(redacted).toContain('[redacted]');
      expect(Buffer.from(redacted, 'base64').toString('latin1')).not.toContain(token);
    }
  });

  it('leaves ordinary text alone, short encodings included', () => {
    const text = 'the bearer of good news; Bearer tokens expire; tok enc 0d5e; deadbeef; dG9r';
    expect(redactSecrets(text, secrets)).toBe(text);
    expect(redactSecrets('ABCD abcd YWJjZA', ['abcd'])).toBe('[redacted] [redacted] YWJjZA');
  });

  it('redactError keeps the ProxyError code, drops the cause of a changed error, and keeps an untouched one', () => {
    const error = new ProxyError('downstream-redirect', `redirect to /x?t=${token}`, { cause: new Error(token) });
    const redacted = redactError(error, secrets);
    expect(ProxyError.isInstance(redacted) && redacted.code).toBe('downstream-redirect');
    expect((redacted as ProxyError).message).toBe('redirect to /x?t=[redacted]');
    expect((redacted as ProxyError).cause).toBeUndefined();
    const clean = new ProxyError('downstream-failed', 'nothing here');
    expect(redactError(clean, secrets)).toBe(clean);
    expect(redactError('a string', secrets)).toBe('a string');
  });

  it('credentialedFetch removes the token it sent from an error its fetch throws', async () => {
    const fetch = credentialedFetch({
      fetch: async () => {
        throw new ProxyError('downstream-redirect', `redirect to https://elsewhere.test/${encodeURIComponent(token)}`);
      },
      credential: () => header,
      onRejected: () => new Error('rejected'),
    });
    await expect(fetch('https://server.test/mcp')).rejects.toThrow('redirect to https://elsewhere.test/[redacted]');
  });
});
