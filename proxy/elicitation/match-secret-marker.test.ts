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
  ])('does not treat %s as a secret', (name) => {
    expect(matchSecretMarker({ name }, markers)).toBeUndefined();
  });

  it('looks at title, description and format', () => {
    expect(matchSecretMarker({ name: 'value', format: 'password' }, markers)).toBe('password');
    expect(matchSecretMarker({ name: 'auth', description: 'Your GitHub personal access token' }, markers)).toBe(
      'token',
    );
    expect(matchSecretMarker({ name: 'pin', title: 'Card PIN' }, markers)).toBe('card');
    expect(
      matchSecretMarker({ name: 'limit', description: 'Upper bound on tokens per reply' }, markers),
    ).toBeUndefined();
    expect(
      matchSecretMarker({ name: 'n', description: 'Maximum token count for the answer' }, markers),
    ).toBeUndefined();
  });

  it('uses configured markers only', () => {
    const custom = { nameMarkers: ['ssn'], schemaMarkers: [] };
    expect(matchSecretMarker({ name: 'customer_ssn' }, custom)).toBe('ssn');
    expect(matchSecretMarker({ name: 'api_key', description: 'a secret' }, custom)).toBeUndefined();
  });
});
