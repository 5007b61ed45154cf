import { appRoute, liveLogStream, logFilterOf, logResumePoint } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET: the live log as SSE, filtered by `?session=&order=&kind=&outcome=`, resuming after `Last-Event-ID`. */
export const GET = appRoute(async (request, app) =>
  liveLogStream(app.log, {
    afterId: await logResumePoint(request, app.log),
    filter: logFilterOf(request),
    signal: request.signal,
  }),
);
