import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { type AppLaunch, type AppServer, startAppServer } from '../e2e/support/app-server';

// Issue 26 defect 7: `npm run demo` and `next start` listened on every interface (`*:3000`),
// putting the chat, the log and enrolment on the LAN. Both real start commands are run here and the
// bound address is checked from outside: reachable on 127.0.0.1, refused on every other address
// of this machine, and (where Linux says so) the listening socket itself is 127.0.0.1's.
let app: AppServer | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const launches: ReadonlyArray<readonly [string, AppLaunch]> = [
  ['npm run demo', { command: npm, args: (port) => ['run', 'demo', '--', '--port', String(port)] }],
  ['npm start (next start)', { command: npm, args: (port) => ['start', '--', '--port', String(port)] }],
];

/** Whether a TCP connection to `host:port` is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** This machine's addresses other than loopback. */
function otherAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((address) => address !== undefined && !address.internal && !address.address.startsWith('fe80:'))
    .map((address) => (address as { address: string }).address);
}

/** Linux's listening sockets on `port` as `address` strings (`0100007F` is 127.0.0.1), or undefined elsewhere. */
function listeningSockets(port: number): string[] | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  try {
    return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .slice(1)
        .map((line) => line.trim().split(/\s+/))
        // Columns: sl, local address:port, remote address:port, state (0A = LISTEN).
        .filter((columns) => columns[3] === '0A' && columns[1]?.endsWith(`:${hexPort}`))
        .map((columns) => (columns[1] as string).split(':')[0] as string),
    );
  } catch {
    return undefined;
  }
}

describe('the app listens on 127.0.0.1 unless told otherwise', () => {
  it.each(launches)('%s binds 127.0.0.1 only', async (_name, launch) => {
    app = await startAppServer({}, launch);
    const port = Number(new URL(app.origin).port);
    expect(await accepts('127.0.0.1', port)).toBe(true);
    const others = otherAddresses();
    expect(others.length, 'this check needs a network interface besides loopback').toBeGreaterThan(0);
    for (const address of others) expect(await accepts(address, port), `${address}:${port}`).toBe(false);
    const sockets = listeningSockets(port);
    if (sockets !== undefined) expect(sockets).toEqual(['0100007F']);
  });
});
