import { describe, expect, it } from 'vitest';
import { DEFAULT_SECRET_MARKERS } from '../transparent/transparent-config';
import { matchSecretMarker, splitWords } from './match-secret-marker';

const markers = { nameMarkers: DEFAULT_SECRET_MARKERS, schemaMarkers: DEFAULT_SECRET_MARKERS };

describe('matchSecretMarker', () => {
  it('splits snake, kebab, camel and Pascal case into words', () => {
    expect(splitWords('xApiKey')).toEqual(['x', 'api', 'key']);
    expect(splitWords('OAuthAccessToken')).toEqual(['o', 'auth', 'access', 'token']);
    expect(splitWords('HTTPSProxy-url_v2')).toEqual(['https', 'proxy', 'url', 'v2']);
  });

  it.each([
    'password',
    'api_key',
    'apiKey',
    'x-api-key',
    'APIKEY',
    'accessToken',
    'github_token',
    'client_secret',
    'credentials',
    'card_number',
    'cvv',
    'payment_method',
    'privateKey',
    'passphrase',
    // Issue 11 item 9: case, separators, digits, abbreviations and look-alikes.
    'passWord',
    'pass_word',
    'PASS-WORD',
    'password1',
    'pass2word',
    'passwd',
    'pwd',
    'pin',
    'pin_code',
    'otp',
    'ssh_key',
    'access_key',
    'aws_secret_access_key',
    'authorization',
    'bearer',
    'cookie',
    'session_id',
    'sessionId',
    'ssn',
    'customer_ssn',
    'mnemonic',
    'seed_phrase',
    'seedPhrase',
    'p\u0430ssword',
    '\u0440\u0430ssword',
    'pass\u200bword',
    '\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44',
    'pa\u0301ssword',
    '\u03a1assword',
  ])('treats %s as a secret', (name) => {
    expect(matchSecretMarker({ name }, markers)).toBeDefined();
  });

  it.each([
    'max_tokens',
    'maxTokens',
    'num_tokens',
    'token_count',
    'tokenLimit',
    'keyboard_layout',
    'discard',
    'cardinality',
    'message',
    'query',
    'secretary_name',
    // Look-alikes of the new markers that are not secrets.
    'pinned',
    'spinner',
    'pin_count',
    'options',
    'cookies_enabled',
    'cookie_policy',
    'token_type',
    'token_url',
    'authorization_url',
    'session',
    'password_policy',
    'bypass_word_filter',
    'seed',
    'compass_wording',
  ])('does not treat %s as a secret', (name) => {
    expect(matchSecretMarker({ name }, markers)).toBeUndefined();
  });

  it('looks at title, description and format', () => {
    expect(matchSecretMarker({ name: 'value', format: 'password' }, markers)).toBe('password');
    expect(matchSecretMarker({ name: 'auth', description: 'Your GitHub personal access token' }, markers)).toBe(
      'token',
    );
    expect(matchSecretMarker({ name: 'code', title: 'Card PIN' }, markers)).toBe('card');
    expect(matchSecretMarker({ name: 'scope', description: 'One of your personal access tokens' }, markers)).toBe(
      'access_token',
    );
    expect(matchSecretMarker({ name: 'words', description: 'The wallet seed phrase' }, markers)).toBe('seed_phrase');
    expect(matchSecretMarker({ name: 'value', title: 'P\u0430ssword' }, markers)).toBe('password');
    expect(matchSecretMarker({ name: 'code', description: 'The one-time OTP from your app' }, markers)).toBe('otp');
    expect(
      matchSecretMarker({ name: 'limit', description: 'Upper bound on tokens per reply' }, markers),
    ).toBeUndefined();
    expect(
      matchSecretMarker({ name: 'n', description: 'Maximum token count for the answer' }, markers),
    ).toBeUndefined();
  });

  it.each([
    'Pin the message to the top of the channel',
    'Whether the site accepts cookies',
    'Requires authorization from an admin',
    'Maximum number of tokens to generate',
    'A seed for the random number generator',
  ])('keeps everyday prose out: %s', (description) => {
    expect(matchSecretMarker({ name: 'value', description }, markers)).toBeUndefined();
  });

  it('uses configured markers only', () => {
    const custom = { nameMarkers: ['ssn'], schemaMarkers: [] };
    expect(matchSecretMarker({ name: 'customer_ssn' }, custom)).toBe('ssn');
    expect(matchSecretMarker({ name: 'api_key', description: 'a secret' }, custom)).toBeUndefined();
  });
});
