import { z } from 'zod';
import { type CredentialVerifier, createCredentialVerifier, householdKeys } from '../../identity/index';

/** A checkpoint whose signature verified against the household admin's pinned key. */
export interface VerifiedCheckpoint {
  readonly rowId: number;
  readonly hash: string;
  readonly signedBy: string;
  readonly signedAt: Date;
  /** The admin-signed `AuditCheckpoint` JWT-VC itself, as it can be handed to a witness. */
  readonly credential: string;
}

/** The verdict on one checkpoint: verified, or why not, naming the row it claims. */
export type CheckpointVerdict =
  | { readonly ok: true; readonly checkpoint: VerifiedCheckpoint }
  | { readonly ok: false; readonly rowId: number; readonly reason: string };

/** Verifies checkpoint entries of one household: {@link createCheckpointVerifier}. */
export type CheckpointVerifier = (entry: unknown, where: string) => Promise<CheckpointVerdict>;

const Entry = z.object({ rowId: z.number(), hash: z.string(), credential: z.string().max(16_384) });
const Claims = z.object({ rowId: z.number().int().min(0), hash: z.string().regex(/^[0-9a-f]{64}$/) });

/**
 * Verifies a stored checkpoint (a line of the checkpoints file, or what a witness holds) against the
 * household admin's pinned key only (SPEC §8): the `AuditCheckpoint` credential's signature, that it
 * names this household's admin as subject, and that the plain `rowId`/`hash` beside it are exactly
 * what is signed (only the signed claims count). `where` names the entry in the reason.
 */
export function createCheckpointVerifier(options: {
  readonly adminDid: string;
  readonly adminJwk: Readonly<Record<string, string>>;
  readonly now?: () => Date;
}): CheckpointVerifier {
  const verify: CredentialVerifier = createCredentialVerifier(
    householdKeys({ adminDid: options.adminDid, adminJwk: options.adminJwk }),
  );
  const now = options.now ?? (() => new Date());
  return async (value, where) => {
    const entry = Entry.safeParse(value);
    if (!entry.success) return broken(0, `${where} is not a checkpoint (it was damaged or edited)`);
    const claimed = Number.isSafeInteger(entry.data.rowId) && entry.data.rowId >= 0 ? entry.data.rowId : 0;
    // 1. The signature and the claim layout, against the pinned admin key only.
    const verdict = await verify(entry.data.credential, {
      type: 'AuditCheckpoint',
      issuer: options.adminDid,
      now: now(),
    });
    if (!verdict.verified) {
      return broken(claimed, `${where} is not signed by the household admin ${options.adminDid}: ${verdict.reason}`);
    }
    // 2. A head of this household's chain.
    const claims = Claims.safeParse(verdict.credential.subject);
    if (!claims.success || verdict.credential.sub !== options.adminDid) {
      return broken(claimed, `${where} is signed by the admin but does not name a chain head of this household`);
    }
    // 3. Plain fields that disagree with the signed claims mean the entry was edited.
    if (claims.data.rowId !== entry.data.rowId || claims.data.hash !== entry.data.hash) {
      return broken(
        claimed,
        `${where} says row ${entry.data.rowId}, but its signature covers row ${claims.data.rowId}`,
      );
    }
    return {
      ok: true,
      checkpoint: {
        rowId: claims.data.rowId,
        hash: claims.data.hash,
        signedBy: verdict.credential.iss,
        signedAt: new Date(verdict.credential.iat * 1000),
        credential: entry.data.credential,
      },
    };
  };
}

function broken(rowId: number, reason: string): { ok: false; rowId: number; reason: string } {
  return { ok: false, rowId, reason };
}
