import { runHouseholdCli } from './household-cli';

// `npm run household -- <command>`: the operator's entry. Errors are printed in words, never as a stack.
runHouseholdCli(process.argv.slice(2), (line) => console.log(line)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  },
);
