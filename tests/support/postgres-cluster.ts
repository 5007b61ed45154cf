/**
 * A throwaway PostgreSQL cluster for one test run (vitest's globalSetup, `vitest.config.ts`; see
 * `throwaway-postgres.ts`), with `fsync` off, stopped and deleted after the run.
 *
 * Tests read the cluster's admin URL with `inject('postgres')` (see `postgres.ts`, which declares it). When the
 * binaries are missing or the server does not start, the run fails under `CI=true` (CI must never
 * skip the PostgreSQL tests) and otherwise provides `undefined`, which the tests report as a skip.
 */
import type { TestProject } from 'vitest/node';
import { startThrowawayPostgres } from './throwaway-postgres';

/** Starts the cluster and provides its URL; returns the teardown that stops it. */
export default function setup(project: TestProject): () => void {
  try {
    const cluster = startThrowawayPostgres({ durable: false });
    project.provide('postgres', { url: cluster.url });
    return () => cluster.stop();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (process.env.CI === 'true')
      throw new Error(`PostgreSQL did not start, and CI must not skip its tests: ${reason}`);
    project.provide('postgres', { unavailable: reason });
    return () => {};
  }
}
