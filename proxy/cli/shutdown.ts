/**
 * How long the CLI's faces, stdio and HTTP, search and transparent mode, let the calls in flight
 * at shutdown finish and be answered before their servers are closed.
 */
export const shutdownDrainMs = 5_000;
