import { describe, expect, it } from 'vitest';
import { readHouseholdEnv } from './env';
import { householdStoreLocation } from './store';

describe('DATABASE_URL', () => {
  it('is absent by default, so the store is the SQLite file in the data folder', () => {
    const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: '/srv/household', DATABASE_URL: ' ' });
    expect(env).not.toHaveProperty('databaseUrl');
    expect(householdStoreLocation(env)).toStrictEqual({ kind: 'sqlite', path: '/srv/household/household.sqlite' });
  });

  it('takes postgres:// and postgresql://, and then the store is that database', () => {
    for (const url of [
      'postgres://app:secret@db.internal:5432/household',
      'postgresql://app@localhost/h?host=/run/pg',
    ]) {
      const env = readHouseholdEnv({ DATABASE_URL: url });
      expect(env.databaseUrl).toBe(url);
      expect(householdStoreLocation(env)).toStrictEqual({ kind: 'postgres', url });
    }
  });

  it('refuses any other scheme, a URL without a database and what is no URL, never echoing the value', () => {
    for (const url of [
      'mysql://app:hunter2-secret@db/household',
      'sqlite:hunter2-secret.sqlite',
      'postgres://app:hunter2-secret@db',
      'hunter2-secret',
    ]) {
      let message = '';
      try {
        readHouseholdEnv({ DATABASE_URL: url });
      } catch (error) {
        message = error instanceof Error ? error.message : String(error);
      }
      expect(message).toContain('DATABASE_URL');
      expect(message).toContain('must be a postgres:// or postgresql:// URL');
      expect(message).not.toContain('hunter2');
    }
  });
});
