import { runAuditVerify } from './run-audit-verify';

// `npm run audit:verify`: the operator's entry. Errors are printed in words, never as a stack.
runAuditVerify(process.argv.slice(2), (line) => console.log(line)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`audit chain not verified: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
