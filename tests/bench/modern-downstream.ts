import { startModernHttpFixture } from '../fixtures/modern-http-fixture-server';

// The transport bench's 2026-07-28 downstream (issue 31): the modern fixture (echo, stateless,
// 2025 requests refused) over Streamable HTTP as its own process, so its CPU time is its own.
const fixture = await startModernHttpFixture({ name: 'bench-modern' });
process.stderr.write(`fixture MCP server at ${fixture.url}\n`);
