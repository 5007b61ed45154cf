import { startHttpFixture } from '../tests/fixtures/http-fixture-server';

// A small Streamable HTTP MCP server (echo, add, whoami, account_summary, hang) for trying the
// proxy against an HTTP downstream: `npx tsx examples/http-fixture-server.ts [port]`, then
// `npx extensible-mcp --config examples/http-fixture.json`.
const port = Number(process.argv[2] ?? 3334);
const fixture = await startHttpFixture({ name: 'http-example', port });
process.stderr.write(`fixture MCP server at ${fixture.url}\n`);
process.once('SIGINT', () => void fixture.close().then(() => process.exit(0)));
