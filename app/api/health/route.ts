import { appRoute, jsonResponse } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET: 200 once the household runtime is up, with how search ranks now; 503 in words if it failed to start. */
export const GET = appRoute(async (_request, app) => jsonResponse({ status: 'ok', searchMode: app.searchMode() }));
