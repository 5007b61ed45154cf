import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { InMemoryTransport, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { InitializeGate, type InitializeMessage } from './initialize-gate';

const INITIALIZE: JSONRPCMessage = {
  jsonrpc: '2.0',
  id: 7,
  method: 'initialize',
  params: {
    protocolVersion: LATEST_PROTOCOL_VERSION,
    capabilities: { sampling: {} },
    clientInfo: { name: 'gate-test', version: '1' },
  },
};

/** A linked pair whose client side records what the gate sends back. */
async function linked() {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const answers: JSONRPCMessage[] = [];
  let next: (message: JSONRPCMessage) => void = () => undefined;
  clientSide.onmessage = (message) => {
    answers.push(message);
    next(message);
  };
  await clientSide.start();
  const answered = () =>
    new Promise<JSONRPCMessage>((resolve) => {
      next = resolve;
    });
  return { clientSide, serverSide, answers, answered };
}

describe('InitializeGate', () => {
  it('answers a request sent before initialize with an error and reports nothing', async () => {
    const { clientSide, serverSide, answered } = await linked();
    const gate = new InitializeGate(serverSide);
    const seen: InitializeMessage[] = [];
    await gate.listen((message) => seen.push(message));
    const answer = answered();
    await clientSide.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    await expect(answer).resolves.toMatchObject({ id: 1, error: { message: 'Send initialize first.' } });
    expect(seen).toEqual([]);
  });

  it('reports the initialize once and hands everything over in order after release', async () => {
    const { clientSide, serverSide } = await linked();
    const gate = new InitializeGate(serverSide);
    const seen: InitializeMessage[] = [];
    await gate.listen((message) => seen.push(message));
    await clientSide.send(INITIALIZE);
    await clientSide.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(seen.map((message) => message.params.capabilities)).toEqual([{ sampling: {} }]);
    const delivered: JSONRPCMessage[] = [];
    gate.onmessage = (message) => delivered.push(message);
    gate.release();
    expect(delivered).toEqual([INITIALIZE, { jsonrpc: '2.0', method: 'notifications/initialized' }]);
    // After release, messages go straight through.
    await clientSide.send({ jsonrpc: '2.0', id: 2, method: 'ping' });
    expect(delivered.at(-1)).toEqual({ jsonrpc: '2.0', id: 2, method: 'ping' });
  });

  it("keeps the owner's close listener and adds its own", async () => {
    const { clientSide, serverSide } = await linked();
    const closes: string[] = [];
    serverSide.onclose = () => closes.push('owner');
    const gate = new InitializeGate(serverSide);
    gate.onclose = () => closes.push('gate');
    await gate.listen(() => undefined);
    await clientSide.close();
    expect(closes).toEqual(['owner', 'gate']);
  });
});
