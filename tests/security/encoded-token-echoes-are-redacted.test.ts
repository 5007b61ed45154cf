import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterAll, describe, expect, it } from 'vitest';
import { startHttpFixture } from '../fixtures/http-fixture-server';
import { callTool, searchNames } from '../proxy/helpers';
import { startCredentialedGateway } from './fixtures/credentialed-gateway';

// Issue 11 item 19: redaction was exact-match only, so a downstream that echoed the token it was
// sent base64-encoded, upper-cased, URL-encoded or with spaces between its characters got it
// past the proxy to the model. Each form below is computed here, independently of the proxy.

// Characters that URL- and base64-encoding treat specially, so every encoding differs from the token.
const token = 'tok/enc+0d5e=7a91';
const header = `Bearer ${token}`;

const forbidden: Record<string, string> = {
  token,
  header,
  upper: token.toUpperCase(),
  lower: token.toLowerCase(),
  base64Header: Buffer.from(header).toString('base64'),
  base64Token: Buffer.from(token).toString('base64'),
  base64urlHeader: Buffer.from(header).toString('base64url'),
  base64urlToken: Buffer.from(token).toString('base64url'),
  urlEncodedHeader: encodeURIComponent(header),
  urlEncodedToken: encodeURIComponent(token),
  spaced: [...token].join(' '),
  hex: Buffer.from(token).toString('hex'),
};

describe('a downstream that echoes its token in common encodings', async () => {
  const server = await startHttpFixture({ bearer: token, echoAuthorizationEncoded: true });
  const proxy = await startCredentialedGateway({
    servers: { notion: { kind: 'http', url: server.url } },
    tokens: { notion: token },
  });
  afterAll(async () => {
    await proxy.close();
    await server.close();
  });

  it('no encoding of the token reaches the model, and every echo is visibly redacted', async () => {
    expect(await searchNames(proxy.client, 'authorization header in several encodings')).toContain(
      'notion__encoded_headers',
    );
    const result: CallToolResult = await callTool(proxy.client, 'notion__encoded_headers');
    expect(result.isError).toBeFalsy();
    // The downstream received the real token: it is echoing what it was sent.
    expect(server.seen.at(-1)?.headers.authorization).toBe(header);

    const fields = result.structuredContent as Record<string, string>;
    expect(Object.keys(fields).sort()).toEqual(
      [
        'base64',
        'base64Json',
        'base64Token',
        'base64url',
        'hex',
        'percentEverything',
        'spaced',
        'upper',
        'urlEncoded',
      ].sort(),
    );
    const seen = JSON.stringify(result);
    for (const [name, form] of Object.entries(forbidden)) {
      expect(seen.toLowerCase(), `${name} form leaked`).not.toContain(form.toLowerCase());
    }
    for (const [name, value] of Object.entries(fields)) {
      expect(value, `${name} echo was not redacted`).toContain('[redacted]');
    }
    // Decoding what is left of the base64 echoes does not give the token back.
    for (const name of ['base64', 'base64Json', 'base64Token', 'base64url']) {
      const value = fields[name] ?? '';
      expect(Buffer.from(value, name === 'base64url' ? 'base64url' : 'base64').toString('latin1')).not.toContain(token);
    }
  });

  it('ordinary text is left alone', async () => {
    expect(await searchNames(proxy.client, 'echoes back the message')).toContain('notion__echo');
    const result = await callTool(proxy.client, 'notion__echo', { message: 'the bearer of good news' });
    expect(result.content).toEqual([{ type: 'text', text: 'echo: the bearer of good news' }]);
  });
});
