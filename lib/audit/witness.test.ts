import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditError } from './audit-error';
import { createFileWitness } from './witness';

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function witnessFile(): string {
  const folder = mkdtempSync(join(tmpdir(), 'file-witness-'));
  folders.push(folder);
  return join(folder, 'witness.jsonl');
}

const checkpoint = (rowId: number, hash = rowId.toString(16).padStart(64, '0'), householdDid = 'did:web:home') => ({
  householdDid,
  rowId,
  hash,
  credential: `credential-${rowId}`,
});

describe('an append-only witness file', () => {
  it('appends each new checkpoint, keeps the latest per household, and writes a held one only once', async () => {
    const path = witnessFile();
    const witness = createFileWitness(path);
    expect(await witness.latest('did:web:home')).toBeUndefined();
    expect(await witness.submit(checkpoint(3))).toEqual({ accepted: true });
    expect(await witness.submit(checkpoint(5, undefined, 'did:web:other'))).toEqual({ accepted: true });
    expect(await witness.submit(checkpoint(7))).toEqual({ accepted: true });
    expect(await witness.submit(checkpoint(7))).toEqual({ accepted: true });
    expect(await witness.latest('did:web:home')).toEqual(checkpoint(7));
    expect(await witness.latest('did:web:other')).toEqual(checkpoint(5, undefined, 'did:web:other'));
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(3);
  });

  it('refuses a checkpoint that goes backwards or forks a row it holds, and writes nothing for it', async () => {
    const path = witnessFile();
    const witness = createFileWitness(path);
    await witness.submit(checkpoint(9));
    expect(await witness.submit(checkpoint(4))).toMatchObject({
      accepted: false,
      reason: expect.stringContaining('a checkpoint at row 4 goes backwards'),
    });
    expect(await witness.submit(checkpoint(9, 'f'.repeat(64)))).toMatchObject({
      accepted: false,
      reason: expect.stringContaining('another hash for row 9'),
    });
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(1);
  });

  it('fails closed on a damaged line: what it holds can no longer be read with confidence', async () => {
    const path = witnessFile();
    writeFileSync(path, `${JSON.stringify(checkpoint(2))}\nnot a checkpoint\n`);
    const witness = createFileWitness(path);
    await expect(witness.latest('did:web:home')).rejects.toMatchObject({ code: 'witness-damaged' });
    await expect(witness.latest('did:web:home')).rejects.toBeInstanceOf(AuditError);
  });
});
