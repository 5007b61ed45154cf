#!/usr/bin/env node
// The `mcp-elicitation-proxy` command: transparent mode with elicitation (SPEC §3.10).
import { register } from 'tsx/esm/api';

register();
const { runTransparentCli } = await import('../proxy/cli/index.ts');
process.exit(await runTransparentCli(process.argv.slice(2)));
