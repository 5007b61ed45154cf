/**
 * One process of `store-durability.test.ts`: opens the household store at argv[2], prints `ready`,
 * then answers each JSON command line on stdin with one JSON line on stdout. Closing stdin closes
 * the store and ends the process, so the parent can wait for a clean exit before reopening the file.
 *
 *   node --import tsx tests/identity/store-child.ts <household.sqlite>
 */
import { createInterface } from 'node:readline';
import { z } from 'zod';
import type {
  ApprovalRecord,
  EnrollmentCodeRecord,
  PasskeyRecord,
  RecordKind,
  SessionRecord,
} from '../../identity/index';
import { openSqliteHouseholdStore } from '../../lib/store';

/** What the parent asks this process to write in one go. */
export interface WriteSet {
  readonly records: ReadonlyArray<{ readonly kind: RecordKind; readonly id: string; readonly value: string }>;
  readonly passkey: PasskeyRecord;
  readonly code: EnrollmentCodeRecord;
  readonly approval: ApprovalRecord;
  readonly childApproval: string;
  readonly session: SessionRecord;
}

const commandSchema = z.discriminatedUnion('op', [
  // The write set comes from the test itself, so its shape is trusted here.
  z.object({ op: z.literal('write'), set: z.custom<WriteSet>((value) => typeof value === 'object' && value !== null) }),
  z.object({ op: z.literal('consume'), role: z.enum(['child', 'parent']), codeHash: z.string(), now: z.number() }),
  z.object({ op: z.literal('counter'), credentialId: z.string(), expected: z.number(), next: z.number() }),
]);
type Command = z.infer<typeof commandSchema>;

const [path] = process.argv.slice(2);
if (!path) throw new Error('usage: store-child <household.sqlite>');
const store = openSqliteHouseholdStore({ path });
const { identity } = store;

async function run(command: Command): Promise<unknown> {
  switch (command.op) {
    case 'write': {
      const { set } = command;
      for (const record of set.records) await identity.records.put(record.kind, record.id, record.value);
      await identity.passkeys.add(set.passkey);
      await identity.enrollment.replaceCode(set.code);
      await identity.approvals.create(set.approval);
      await identity.approvals.addApproval(set.approval.approvalId, 'child', set.childApproval, set.approval.createdAt);
      await identity.sessions.create(set.session);
      return true;
    }
    case 'consume':
      return identity.enrollment.consumeCode(command.role, command.codeHash, command.now);
    case 'counter':
      return identity.passkeys.updateCounter(command.credentialId, command.expected, command.next);
  }
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  void run(commandSchema.parse(JSON.parse(line)))
    .then((result) => ({ result }))
    .catch((error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }))
    .then((reply) => process.stdout.write(`${JSON.stringify(reply)}\n`));
});
lines.once('close', () => {
  store.close();
});
process.stdout.write('ready\n');
