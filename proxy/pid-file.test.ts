import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquirePidFile, checkPidFile, pidFilePath, processStartTime } from './pid-file';

function configPath(): string {
  return join(mkdtempSync(join(tmpdir(), 'emcp-pid-unit-')), 'config.json');
}

describe('pid file', () => {
  it('records this process and is released on stop', () => {
    const config = configPath();
    const held = acquirePidFile(config);
    const record = JSON.parse(readFileSync(pidFilePath(config), 'utf8')) as Record<string, unknown>;
    expect(record).toMatchObject({ pid: process.pid, config, started: processStartTime(process.pid) });
    held.release();
    expect(checkPidFile(config)).toEqual({ live: false, reason: 'missing' });
  });

  it('takes over a stale, garbage or foreign file', () => {
    const exited = spawnSync(process.execPath, ['-e', '0']);
    for (const content of [
      JSON.stringify({ pid: exited.pid, instance: 'a'.repeat(32), config: 'x', started: 'y' }),
      'garbage',
      JSON.stringify({ pid: process.pid, instance: 'b'.repeat(32), config: '/other.json', started: 'z' }),
    ]) {
      const config = configPath();
      writeFileSync(pidFilePath(config), content);
      const held = acquirePidFile(config);
      expect(readFileSync(pidFilePath(config), 'utf8')).toContain(`"pid":${process.pid}`);
      held.release();
    }
  });

  it('does not release a file another process has since taken', () => {
    const config = configPath();
    const held = acquirePidFile(config);
    writeFileSync(pidFilePath(config), 'someone else');
    held.release();
    expect(readFileSync(pidFilePath(config), 'utf8')).toBe('someone else');
  });

  it('knows its own start time and not a dead process', () => {
    expect(processStartTime(process.pid)).toMatch(/\S/);
    const exited = spawnSync(process.execPath, ['-e', '0']);
    expect(processStartTime(exited.pid ?? 0)).toBeUndefined();
  });
});
