import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { addressProblem, type LoadResolver, loadUrlProblem, safeLoad, safeLoadDispatcher } from './safe-load';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

describe('addressProblem', () => {
  it.each([
    '0.0.0.0',
    '10.0.0.1',
    '100.64.0.1',
    '127.0.0.1',
    '127.255.0.9',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '198.18.0.1',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    '2001:db8::1',
    '2002:7f00:1::1',
    'not-an-address',
  ])('refuses %s', (address) => {
    expect(addressProblem(address)).toBeDefined();
  });

  it.each(['93.184.215.14', '8.8.8.8', '172.32.0.1', '::ffff:8.8.8.8', '2606:4700::1111'])('allows %s', (address) => {
    expect(addressProblem(address)).toBeUndefined();
  });

  it('allows only loopback with the localhost opt-in', () => {
    for (const address of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) {
      expect(addressProblem(address, { allowLocalhost: true })).toBeUndefined();
    }
    for (const address of ['10.0.0.1', '0.0.0.0', '169.254.169.254', 'fd00::1']) {
      expect(addressProblem(address, { allowLocalhost: true })).toBeDefined();
    }
  });
});

describe('loadUrlProblem', () => {
  it.each([
    'http://example.com/mcp',
    'https://127.1/mcp',
    'https://2130706433/mcp',
    'https://0x7f000001/mcp',
    'https://[::ffff:127.0.0.1]/mcp',
    'https://8.8.8.8/mcp',
    'https://localhost/mcp',
    'https://user:secret@example.com/mcp',
    'data:text/plain,hi',
    'file:///etc/passwd',
    'ftp://example.com/',
    'not a url',
  ])('refuses %s by default', (url) => {
    expect(loadUrlProblem(url)).toBeDefined();
  });

  it('allows https host names, and http to localhost only with the opt-in', () => {
    expect(loadUrlProblem('https://mcp.example.com/mcp')).toBeUndefined();
    expect(loadUrlProblem('http://localhost:8080/mcp', { allowLocalhost: true })).toBeUndefined();
    expect(loadUrlProblem('http://127.0.0.1:8080/mcp', { allowLocalhost: true })).toBeUndefined();
    expect(loadUrlProblem('http://10.0.0.1/mcp', { allowLocalhost: true })).toBeDefined();
    expect(loadUrlProblem('http://example.com/mcp', { allowLocalhost: true })).toBeDefined();
  });
});

describe('safeLoad', () => {
  it('refuses a host that resolves to a private address, and one that does not resolve', async () => {
    const resolve: LoadResolver = async (hostname) => {
      if (hostname === 'private.example') return [{ address: '10.0.0.1', family: 4 }];
      throw new Error('ENOTFOUND');
    };
    const filter = safeLoad({ resolve });
    const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 's' } };
    expect(await filter({ serverName: 'x', url: 'https://private.example/mcp' }, context)).toMatchObject({
      decision: 'deny',
    });
    expect(await filter({ serverName: 'x', url: 'https://nowhere.example/mcp' }, context)).toMatchObject({
      decision: 'deny',
      reason: 'Refused to load "x": The host "nowhere.example" could not be resolved.',
    });
  });
});

describe('safeLoadDispatcher', () => {
  it('checks the address in the connection’s own lookup: a name mapped to loopback never connects', async () => {
    let connections = 0;
    const server = createServer((_request, response) => response.end('internal'));
    server.on('connection', () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    const { port } = server.address() as AddressInfo;
    const refused: string[] = [];
    const dispatcher = safeLoadDispatcher({
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
      onRefused: (reason) => refused.push(reason),
    });
    cleanups.push(() => dispatcher.close());
    const init = { dispatcher } as RequestInit;
    await expect(fetch(`http://attacker.example:${port}/`, init)).rejects.toThrow();
    await expect(fetch(`http://127.0.0.1:${port}/`, init)).rejects.toThrow();
    expect(connections).toBe(0);
    expect(refused).toHaveLength(2);

    // The same pool with the opt-in connects: the refusal above was the check, not the network.
    const allowed = safeLoadDispatcher({
      allowLocalhost: true,
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    cleanups.push(() => allowed.close());
    const response = await fetch(`http://attacker.example:${port}/`, { dispatcher: allowed } as RequestInit);
    expect(await response.text()).toBe('internal');
    expect(connections).toBe(1);
  });
});
