/**
 * One process of the crash case in `single-use-settlement.test.ts`: opens the SQLite evidence
 * store at argv[2], runs single-use evidence spent on success over the call with the arguments
 * in argv[3] (JSON), and, once the evidence is in doubt and the call is being sent, prints
 * `dispatching` and never finishes the call. The parent kills it there: a crash between "in
 * doubt" and the outcome.
 *
 *   node --import tsx tests/policy/single-use-crash-worker.ts <store.sqlite> <arguments JSON>
 */
import type { CallRequest } from '../../proxy/index';
import { openSqliteEvidenceStore, singleUseFilter } from '../../proxy/policy/index';
import { EVIDENCE_FIELDS, POLICY_NOW_MS } from './governed-rail';

const [path, argumentsText] = process.argv.slice(2);
if (!path || !argumentsText) throw new Error('usage: single-use-crash-worker <store.sqlite> <arguments JSON>');

const store = openSqliteEvidenceStore({ path, capacity: 1_000 });
const filter = singleUseFilter({
  spend: 'on-success',
  // The policy is not what this process is about: it allows, as the real one does for these arguments.
  inner: async function allowAll() {
    return { decision: 'allow' };
  },
  store,
  evidenceFields: EVIDENCE_FIELDS,
  now: () => POLICY_NOW_MS,
});
// The request exactly as the gateway stamps `rail__pay` under the spend-limit bundle.
const request: CallRequest = {
  tool: 'rail__pay',
  toolName: 'pay',
  server: { name: 'rail', admission: 'in-process' },
  arguments: JSON.parse(argumentsText) as Record<string, unknown>,
  hasOutputSchema: false,
  credentialFields: [...EVIDENCE_FIELDS],
};

const verdict = await filter(request, {
  principal: { id: 'test' },
  scope: { kind: 'session' as const, id: 'crash-worker' },
});
if (verdict.decision !== 'allow' || !verdict.wrap)
  throw new Error(`expected an allow that wraps dispatch, got ${verdict.decision}`);
await verdict.wrap(
  () =>
    new Promise(() => {
      process.stdout.write('dispatching\n');
      // Never settles: the parent kills this process while the call is "on the wire".
      setInterval(() => undefined, 60_000);
    }),
);
