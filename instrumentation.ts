/**
 * Next.js start hook: the household starts with the server, not with the first request, so the
 * terminal shows the URLs, the agent and the enrollment codes as soon as `next start` is up.
 * `NEXT_RUNTIME` is Next's own switch (the edge runtime has no household to start).
 */
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== 'nodejs') return;
  const { closeHouseholdAppOnSignals, getHouseholdApp } = await import('./lib/index');
  // At SIGTERM the household closes (its closing audit checkpoint) before Next's own handler exits.
  closeHouseholdAppOnSignals();
  try {
    await getHouseholdApp();
  } catch (error) {
    // The routes retry and /api/health says why; the server stays up to say so.
    console.error('The household did not start:', error instanceof Error ? error.message : error);
  }
}
