package spend_limit_test

import rego.v1

import data.spend_limit
import data.spend_limit_cases

# The shared case table (cases.json) both engines must decide identically. Cases whose expected
# outcome is an engine error are skipped here: Go's OPA treats a builtin error as undefined,
# while the host's WASM builtins raise it (tested in the TypeScript contract suite).
decision_mismatches contains c.name if {
	some c in spend_limit_cases
	c.expect.decision != "error"
	want := c.expect.decision == "allow"
	got := spend_limit.allow with input as c.input
	got != want
}

missing_failures contains sprintf("%s: %s", [c.name, id]) if {
	some c in spend_limit_cases
	c.expect.decision == "deny"
	failed := spend_limit.failed_checks with input as c.input
	some id in object.get(c.expect, "mustFail", [])
	not id in failed
}

test_case_table_decisions if count(decision_mismatches) == 0

test_case_table_failed_checks if count(missing_failures) == 0

test_fully_approved_call_fails_no_check if {
	some c in spend_limit_cases
	c.name == "over limit with approver"
	failed := spend_limit.failed_checks with input as c.input
	failed == {"within_limit"}
}

test_deny_reason_only_on_denial if {
	some c in spend_limit_cases
	c.expect.decision == "allow"
	not spend_limit.deny_reason with input as c.input
}

# The host evaluates `decision` alone: it must say exactly what the three documents say.
decision_mismatches_documents contains c.name if {
	some c in spend_limit_cases
	got := spend_limit.decision with input as c.input
	allow := spend_limit.allow with input as c.input
	failed := spend_limit.failed_checks with input as c.input
	reasons := [reason | reason := spend_limit.deny_reason with input as c.input]
	got != {"allow": allow, "failed_checks": failed, "deny_reason": reasons}
}

test_decision_equals_the_three_documents if count(decision_mismatches_documents) == 0
