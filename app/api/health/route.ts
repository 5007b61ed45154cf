import { appRoute, jsonResponse } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET: 200 once the household runtime is up (it starts on the first call); 503 in words if it failed. */
export const GET = appRoute(async () => jsonResponse({ status: 'ok' }));
