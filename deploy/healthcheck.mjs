// The containers' HEALTHCHECK (run through deploy/steps.sh). Node's own fetch: the slim images
// have no curl. `app`: healthy only when the household is up AND tool search is hybrid (the staged
// MiniLM model loaded); keyword-only search means the image is broken, so it stays unhealthy and
// the shop, which waits on this check, never starts against it. `shop`: its /healthz answers.
const [kind, base] = process.argv.slice(2);
const paths = { app: '/api/health', shop: '/healthz' };

/** Why the answer is unhealthy, or undefined when it is healthy. */
function problem(body) {
  if (kind === 'shop') return body?.ok === true ? undefined : 'the shop did not say ok';
  if (body?.status !== 'ok') return `the household is not up (${String(JSON.stringify(body)).slice(0, 200)})`;
  if (body.searchMode !== 'hybrid')
    return `tool search is ${body.searchMode}, not hybrid: the embedding model is not loaded`;
  return undefined;
}

if (!(kind in paths) || base === undefined) {
  console.error('usage: node deploy/healthcheck.mjs app|shop BASE_URL');
  process.exit(2);
}
try {
  const response = await fetch(new URL(paths[kind], base), { redirect: 'error', signal: AbortSignal.timeout(4000) });
  const body = await response.json().catch(() => undefined);
  const why = response.ok ? problem(body) : `HTTP ${response.status}`;
  if (why !== undefined) {
    console.error(`unhealthy: ${why}`);
    process.exit(1);
  }
  console.log(`healthy: ${kind}`);
} catch (error) {
  console.error(`unhealthy: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
