import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterEach, describe, expect, it } from 'vitest';
import * as entry from '../../proxy/index';
import { cleanupStack, startedGateway } from './support';

// SPEC §3.12: the public entry hands out the gateway, its faces and filters; never a downstream
// connection, the index or CLI plumbing (the CLI is a host of the library, not part of it).
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const root = fileURLToPath(new URL('../..', import.meta.url));
const entryFile = fileURLToPath(new URL('../../proxy/index.ts', import.meta.url));
const compilerOptions: ts.CompilerOptions = {
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  allowImportingTsExtensions: true,
};

/**
 * Every project file reachable from `start` through static imports and re-exports (type-only ones
 * included: a CLI type in the entry would still tie the library to the CLI). Packages are not followed.
 */
function importGraph(start: string): Set<string> {
  const reached = new Set<string>();
  const pending = [start];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (reached.has(file)) continue;
    reached.add(file);
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName: specifier } of importedFiles) {
      if (!specifier.startsWith('.')) continue;
      const resolved = ts.resolveModuleName(specifier, file, compilerOptions, ts.sys).resolvedModule;
      if (!resolved) throw new Error(`cannot resolve ${specifier} from ${relative(root, file)}`);
      if (!resolved.isExternalLibraryImport) pending.push(resolved.resolvedFileName);
    }
  }
  return new Set([...reached].map((file) => relative(root, file).split('\\').join('/')));
}

describe('the public entry proxy/index.ts', () => {
  it('reaches no CLI module through its static import graph', () => {
    const graph = importGraph(entryFile);
    // The walk is real: it reaches the gateway and the faces.
    expect(graph).toContain('proxy/gateway/create-gateway.ts');
    expect(graph).toContain('proxy/http/http-handler.ts');
    expect(graph).toContain('proxy/meta-tools/search-mode-server.ts');
    expect([...graph].filter((file) => file.startsWith('proxy/cli/'))).toEqual([]);
  });

  it('exports no downstream connection, index or CLI entry point', () => {
    const exported = Object.keys(entry);
    expect(exported).toContain('createGateway');
    for (const name of ['Downstream', 'ToolIndex', 'runCli', 'runAddServer']) {
      expect(exported).not.toContain(name);
    }
  });

  it('a gateway offers exactly search, call, load, admit, reconfigure, readmitPins, start, close, ready and searchMode', async () => {
    const gateway = await startedGateway(cleanups, {});
    expect(Reflect.ownKeys(gateway).map(String).sort()).toEqual(
      ['admit', 'call', 'close', 'load', 'ready', 'readmitPins', 'reconfigure', 'search', 'searchMode', 'start'].sort(),
    );
    expect(Object.getPrototypeOf(gateway)).toBe(Object.prototype);
  });
});
