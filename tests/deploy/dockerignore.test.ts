import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildContextFiles } from './build-context';

// SPEC §12 and issue 16: no `.env`, tokens file, key, data folder, model cache, build output or
// node_modules in any build context, computed with a maintained implementation of Docker's
// .dockerignore rules over (a) a tree of decoys, one per rule, and (b) the real working tree.
const root = fileURLToPath(new URL('../..', import.meta.url));
const deployDir = join(root, 'deploy');

/** Why a path must never be sent to a Docker daemon, or undefined when it may be. */
function forbidden(path: string): string | undefined {
  const segments = path.split('/');
  const name = segments.at(-1) ?? '';
  if (name === '.env' || name.startsWith('.env.')) return 'an environment file';
  if (name === 'tokens') return 'a tokens file';
  if (/\.(key|pem|p12|pfx)$/.test(name)) return 'a key file';
  if (/\.(pid|log)$/.test(name)) return 'local process state';
  for (const folder of ['.data', 'node_modules', '.models', '.next', '.tools', '.git', 'coverage']) {
    if (segments.slice(0, -1).includes(folder)) return `inside ${folder}`;
  }
  return undefined;
}

/** The build contexts of every compose file, as absolute paths, with the Dockerfile each builds. */
function composeBuilds(): { service: string; context: string; dockerfile: string }[] {
  const builds: { service: string; context: string; dockerfile: string }[] = [];
  for (const file of ['docker-compose.yml', 'docker-compose.stripe.yml']) {
    const compose = parse(readFileSync(join(deployDir, file), 'utf8')) as {
      services: Record<string, { build?: { context: string; dockerfile: string } }>;
    };
    for (const [service, definition] of Object.entries(compose.services)) {
      if (definition.build === undefined) continue;
      const context = resolve(deployDir, definition.build.context);
      builds.push({ service, context, dockerfile: join(context, definition.build.dockerfile) });
    }
  }
  return builds;
}

/** The sources of a Dockerfile's `COPY` instructions that come from the build context. */
function copySources(dockerfile: string): string[] {
  const sources: string[] = [];
  for (const line of readFileSync(dockerfile, 'utf8').split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words[0] !== 'COPY' || words.some((word) => word.startsWith('--from'))) continue;
    const operands = words.slice(1).filter((word) => !word.startsWith('--'));
    // `COPY . .` sends the whole (filtered) context: nothing in particular to look for.
    sources.push(...operands.slice(0, -1).filter((source) => source !== '.'));
  }
  return sources;
}

const decoys = [
  '.env',
  '.env.production',
  'deploy/.env',
  'tokens',
  'examples/github/tokens',
  '.data/household.sqlite',
  '.data/household.key',
  '.data/shop/merchant-key.json',
  'lib/.data/stray.sqlite',
  'certs/server.pem',
  'secrets/client.key',
  'secrets/client.p12',
  'node_modules/left-pad/index.js',
  'shop-agent/node_modules/x/index.js',
  '.models/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx',
  '.next/BUILD_ID',
  '.next/cache/webpack/x.pack',
  '.tools/bin/opa',
  'coverage/lcov.info',
  'config.json.pid',
  'npm-debug.log',
  '.git/config',
];
// Files the images need: over-broad rules would break the build, so they must still be sent.
const needed = [
  'package.json',
  'package-lock.json',
  '.npmrc',
  'deploy/steps.sh',
  'deploy/healthcheck.mjs',
  'scripts/stage-model.sh',
  'app/page.tsx',
  'shop-agent/main.ts',
  // Named like a secret, but source code: the rules match whole names, not substrings.
  'proxy/credentials/tokens-file.ts',
  'identity/household-key.ts',
];

const temporary: string[] = [];
afterAll(() => {
  for (const folder of temporary) rmSync(folder, { recursive: true, force: true });
});

describe('.dockerignore', () => {
  it('keeps every decoy secret, data folder, cache and build output out of the context, and sends the sources', () => {
    const context = mkdtempSync(join(tmpdir(), 'dockerignore-'));
    temporary.push(context);
    copyFileSync(join(root, '.dockerignore'), join(context, '.dockerignore'));
    for (const path of [...decoys, ...needed]) {
      mkdirSync(dirname(join(context, path)), { recursive: true });
      writeFileSync(join(context, path), 'decoy\n');
    }
    const sent = buildContextFiles(context);
    expect(sent.filter((path) => forbidden(path) !== undefined)).toEqual([]);
    expect(decoys.filter((path) => sent.includes(path))).toEqual([]);
    expect(needed.filter((path) => !sent.includes(path))).toEqual([]);
  });

  it('each compose build context of the real tree sends no secret or cache, and every file its Dockerfile copies', () => {
    const builds = composeBuilds();
    expect(builds.map((build) => build.service).sort()).toEqual(['app', 'shop']);
    for (const build of builds) {
      // BuildKit would prefer a `<Dockerfile>.dockerignore`, Compose v1's builder would not:
      // one root file keeps both builders sending the same context.
      expect(existsSync(`${build.dockerfile}.dockerignore`), build.dockerfile).toBe(false);
      const sent = buildContextFiles(build.context);
      const leaks = sent.map((path) => ({ path, why: forbidden(path) })).filter((entry) => entry.why !== undefined);
      expect(leaks, build.service).toEqual([]);
      for (const source of copySources(build.dockerfile)) {
        const present = sent.some((path) => path === source || path.startsWith(`${source.replace(/\/$/, '')}/`));
        expect(present, `${build.service}: COPY ${source}`).toBe(true);
      }
    }
  });

  it("sends none of the deploy harness's own files and no README, so editing them never rebuilds the app's `COPY . .` layer", () => {
    const sent = buildContextFiles(root);
    const harnessFiles = sent.filter(
      (path) =>
        /^deploy\/[^/]+\.(yml|conf)$/.test(path) ||
        path.startsWith('deploy/standins/') ||
        /^scripts\/deploy-[^/]+\.sh$/.test(path) ||
        /(^|\/)README\.md$/.test(path),
    );
    expect(harnessFiles).toEqual([]);
    // Each kind is there in the tree, so the filter above looks at real files.
    for (const file of [
      'deploy/docker-compose.postgres.yml',
      'deploy/nginx-postgres.conf',
      'deploy/README.md',
      'README.md',
      'shop-agent/README.md',
      'deploy/standins/standins.Containerfile',
      'scripts/deploy-run.sh',
    ]) {
      expect(existsSync(join(root, file)), file).toBe(true);
    }
  });
});
