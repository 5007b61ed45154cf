/**
 * One process of `crash.test.ts`: a household on the data folder at argv[2] orders a $4 slice, the
 * child approves, and the charge goes through the proxy — and the process dies right after the
 * rail charged and before the receipt is recorded (exit 137, as a kill would). Before charging it
 * prints the call it is about to make, so the parent can make the same call after the restart.
 *
 *   node --import tsx tests/payments/crash-child.ts <data folder>
 */
import { startTestHousehold } from './household';

const [dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error('usage: crash-child <data folder>');
const household = await startTestHousehold({
  dataDir,
  afterRailCharge: () => {
    process.exit(137);
  },
});
const { approvalId, args } = await household.approvedSlice();
process.stdout.write(`${JSON.stringify({ args, approvalId })}\n`);
await household.call('payments__charge_invoice', args, 'pay charge invoice');
// Never reached: the rail charged and the process died before the receipt.
process.exit(1);
