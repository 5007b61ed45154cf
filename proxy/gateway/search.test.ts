import type { Tool } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { memoryDiscoveryStore } from './discovery-store';
import { createSearch } from './search';

const structured: Tool = {
  name: 'forecast',
  description: 'Weather forecast for a city',
  inputSchema: { type: 'object' },
  outputSchema: { type: 'object', properties: { celsius: { type: 'number' } } },
};

function search() {
  return createSearch({
    localTools: [],
    servers: { facts: () => undefined, connecting: () => [], startGrace: async () => undefined },
    store: memoryDiscoveryStore(),
    reporter: { emit: () => undefined, onFilterError: () => undefined },
    filters: () => [],
    log: () => undefined,
    embeddings: false,
  });
}

describe('what search knows of a tool (stamping reads it)', () => {
  it("forgets a removed server's output schemas: a tool of the same name listed later without one has none", () => {
    const tools = search();
    tools.list('weather', [structured]);
    expect(tools.find('weather__forecast')?.hasOutputSchema).toBe(true);
    tools.remove('weather');
    expect(tools.find('weather__forecast')).toBeUndefined();
    const { outputSchema: _, ...plain } = structured;
    tools.list('weather', [plain]);
    expect(tools.find('weather__forecast')?.hasOutputSchema).toBe(false);
  });
});
