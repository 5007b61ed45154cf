import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createIdentityHandlers,
  enrollmentFailureCeiling,
  enrollmentFailureLimit,
  type IdentityHandler,
} from '../../identity/index';
import { readHouseholdEnv } from '../../lib/env';
import { type StartedIdentity, startIdentity } from '../../lib/start-identity';
import { householdStoreLocation, openHouseholdStore } from '../../lib/store';
import { createSoftwareAuthenticator } from '../identity/software-authenticator';

// Issue 26 item 12: five anonymous wrong enrollment codes locked the real member out of their
// role for 15 minutes. Wrong codes are now throttled per approval-window session (its own
// cookie), under a ceiling per role for every source together; a fresh code from the operator
// (`npm run household -- rotate-codes`, run here as the real CLI on the same data folder) resets
// that role's lock. Driven over the household's HTTP handlers, as the approval window calls them.

const root = new URL('../..', import.meta.url).pathname;
const run = promisify(execFile);
let dataDir: string;
let identity: StartedIdentity;
let handlers: ReturnType<typeof createIdentityHandlers>;
let origin: string;

beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'enrolment-lockout-'));
  const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir });
  origin = env.origin;
  identity = await startIdentity(env, { store: await openHouseholdStore(householdStoreLocation(env)) });
  handlers = createIdentityHandlers({ passkeys: identity.passkeys, origin });
});
afterEach(async () => {
  await identity.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** POSTs a code to the registration options handler from a window holding `cookie` (or none). */
async function tryCode(code: string, cookie?: string) {
  const headers = new Headers({ origin, 'content-type': 'application/json' });
  if (cookie !== undefined) headers.set('cookie', cookie);
  const handler: IdentityHandler = handlers.registrationOptions;
  const response = await handler(
    new Request(`${origin}/api/identity/registration/options`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ code }),
    }),
  );
  const json = (await response.json()) as Record<string, unknown>;
  return { status: response.status, json, cookie: response.headers.get('set-cookie')?.split(';')[0] };
}

/** The real member enrols in their own window with the code from the terminal. */
async function memberEnrols(code: string) {
  const options = await tryCode(code);
  if (options.status !== 200) return options;
  const authenticator = createSoftwareAuthenticator({ origin, rpId: new URL(origin).hostname });
  const verify = await handlers.registrationVerify(
    new Request(`${origin}/api/identity/registration/verify`, {
      method: 'POST',
      headers: { origin, 'content-type': 'application/json' },
      body: JSON.stringify({
        ceremonyId: options.json.ceremonyId,
        response: authenticator.register(options.json.options as never),
      }),
    }),
  );
  return { status: verify.status, json: (await verify.json()) as Record<string, unknown> };
}

const childCode = () => identity.codes.find((issued) => issued.role === 'child')?.code ?? '';
const wrong = (index: number) =>
  `child-ZZZZ-ZZZZ-${String(index)
    .padStart(4, '0')
    .replace(/[ILOU]/g, 'Z')}`;

describe('anonymous wrong codes cannot lock the real member out (issue 26 item 12)', () => {
  it(`${enrollmentFailureLimit} anonymous wrong codes (no window cookie) leave the member able to enrol`, async () => {
    for (let index = 0; index < enrollmentFailureLimit; index++) {
      expect((await tryCode(wrong(index))).status).toBe(403);
    }
    expect(await memberEnrols(childCode())).toMatchObject({ status: 200, json: { role: 'child' } });
  });

  it('a window that keeps guessing is throttled; the member in their own window is not', async () => {
    const first = await tryCode(wrong(0));
    const window = first.cookie ?? '';
    expect(window).toMatch(/^emcp-window=/);
    for (let index = 1; index < enrollmentFailureLimit; index++) {
      expect((await tryCode(wrong(index), window)).status).toBe(403);
    }
    // The guessing window is refused even the right code: it learns nothing from further answers.
    expect(await tryCode(childCode(), window)).toMatchObject({
      status: 429,
      json: { error: 'too many wrong codes for child from this window, wait 15 minutes and try again' },
    });
    expect(await memberEnrols(childCode())).toMatchObject({ status: 200, json: { role: 'child' } });
  });

  it(`at the ceiling (${enrollmentFailureCeiling} an hour from every window) the role locks, and a fresh code from rotate-codes lets the member through`, async () => {
    for (let index = 0; index < enrollmentFailureCeiling; index++) {
      expect((await tryCode(wrong(index))).status).toBe(403);
    }
    const locked = await memberEnrols(childCode());
    expect(locked).toMatchObject({ status: 429 });
    expect(String(locked.json.error)).toContain('npm run household -- rotate-codes');

    // The operator runs the real command on the household's data folder; it prints the new code.
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', 'lib/household-main.ts', 'rotate-codes', '--role', 'child'],
      {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', EXTENSIBLE_MCP_DATA: dataDir },
      },
    );
    const fresh = /Enrollment code for child: (child-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4})/.exec(stdout)?.[1] ?? '';
    expect(fresh).not.toBe('');
    expect(await memberEnrols(fresh)).toMatchObject({ status: 200, json: { role: 'child' } });
  });
});
