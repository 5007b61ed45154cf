/**
 * Issue 31 (code review): host-supplied callbacks run inside the fail-closed rule. A route resolver
 * that throws while the gateway looks up a call's tool refuses that call: the client gets a clear
 * reason without the fault's text, the operator's log has the cause, an event records it, and the
 * downstream is never reached.
 */
import { afterEach, expect, it } from 'vitest';
import { connectInMemory, createRouteResolver, type ProxyEvent } from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { cleanupStack, startedGateway, waitableLogger } from '../gateway/support';
import { callTool, searchNames, textOf } from '../proxy/helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

it('a route resolver that throws refuses the call, logs the cause and records an event', async () => {
  const logger = waitableLogger();
  const events: ProxyEvent[] = [];
  const routes = createRouteResolver({ routes: [], unmapped: 'pass' });
  let broken = false;
  const gateway = await startedGateway(cleanups, {
    servers: { fixture: { kind: 'in-process', server: createFixtureServer() } },
    logger,
    onEvent: (event) => events.push(event),
    governance: {
      resolve: (server) => {
        if (broken) throw new Error('resolver bug in /srv/secret/routes.json');
        return routes(server);
      },
      bundles: {},
    },
  });
  const client = await connectInMemory(gateway, { principal: { id: 'test' } });
  cleanups.push(() => client.close());
  expect(await searchNames(client, 'echo back a message')).toContain('fixture__echo');
  broken = true;
  const result = await callTool(client, 'fixture__echo', { message: 'hi' });
  expect(result.isError).toBe(true);
  expect(textOf(result)).toMatch(/could not look up "fixture__echo", so the call was blocked \(fail closed\)/);
  expect(textOf(result)).not.toContain('/srv/secret');
  expect(await logger.waitFor('looking up tool fixture__echo failed')).toContain('resolver bug');
  expect(events.find((event) => event.filter === 'stamp')).toMatchObject({ decision: 'error', tool: 'fixture__echo' });
  expect(events.some((event) => event.filter === 'dispatch')).toBe(false);
});
