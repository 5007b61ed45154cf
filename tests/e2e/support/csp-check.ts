/**
 * Vitest setup for every browser spec: after the spec file, no page it opened may have reported a
 * Content-Security-Policy violation it did not take as expected (issue 26 defect 9: the strict
 * policy holds on every page the e2e visits).
 */
import { afterAll, expect } from 'vitest';
import { untakenCspViolations } from './browser';

afterAll(() => {
  expect(untakenCspViolations(), 'Content-Security-Policy violations on the pages this spec visited').toEqual([]);
});
