#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so a clean checkout works after `npm install`.
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../proxy/cli/index.ts');
process.exitCode = await runCli(process.argv.slice(2));
