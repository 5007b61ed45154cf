import { appRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET: the household admin's `did:web` document (SPEC §5.1). Verifiers pin it; this serves it to others. */
export const GET = appRoute(async (_request, app) =>
  Response.json(app.adminDidDocument, { headers: { 'cache-control': 'no-cache' } }),
);
