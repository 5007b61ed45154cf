package family_spend_test

import rego.v1

import data.family_spend
import data.family_spend_cases
import data.family_spend_host_replay

# Go's OPA does not implement the two host-only builtins. The table carries the host's own answers
# for every call its cases make (computed by fixtures/generate-cases.ts with the host builtins), and
# these mocks replay them: a call the table did not record is null / false, i.e. a denial. The real
# builtins run under both engines in tests/policy/family-spend.test.ts.
replayed_key(did) := object.get(family_spend_host_replay.keys, did, null)

replayed_webauthn(authenticator_data, client_data, signature, jwk) := object.get(
	family_spend_host_replay.webauthn,
	concat("|", [authenticator_data, client_data, signature, json.unmarshal(jwk).x]),
	false,
)

decision_of(c) := result if {
	result := family_spend.decision with input as c.input
		with key_from_did_key as replayed_key
		with verify_webauthn as replayed_webauthn
}

decision_mismatches contains c.name if {
	some c in family_spend_cases
	want := c.expect.decision == "allow"
	decision_of(c).allow != want
}

missing_failures contains sprintf("%s: %s", [c.name, id]) if {
	some c in family_spend_cases
	c.expect.decision == "deny"
	failed := decision_of(c).failed_checks
	some id in c.expect.mustFail
	not id in failed
}

test_case_table_decisions if count(decision_mismatches) == 0

test_case_table_failed_checks if count(missing_failures) == 0

test_valid_orders_fail_no_check if {
	some c in family_spend_cases
	c.name == "the $15 order, the child and the parent"
	decision_of(c).failed_checks == {"within_child_limit"}
}

test_child_alone_over_ten_dollars_asks_only_for_the_parent if {
	some c in family_spend_cases
	c.name == "$15 with only the child"
	decision_of(c).failed_checks == {"within_child_limit", "parent_present"}
}

test_three_hundred_dollars_fails_the_household_limit if {
	some c in family_spend_cases
	c.name == "synthetic: a fully approved $300 order"
	decision_of(c).failed_checks == {"within_child_limit", "within_household_limit"}
}

test_invoice_hash_is_base64url_of_the_digest if {
	some c in family_spend_cases
	c.name == "the $15 order, the child and the parent"
	hash := family_spend.invoice_hash with input as c.input
	claims := json.unmarshal(base64url.decode(split(c.input.childApproval, ".")[1]))
	hash == claims.vc.credentialSubject.invoiceHash
}

# Byte vectors from outside the policy (Python's base64.urlsafe_b64encode): all zero bits, all one
# bits (the two padding bits of the last character), SHA-256("abc"), and the bytes 0..31.
test_hex_to_base64url_vectors if {
	family_spend.hex_to_base64url("0000000000000000000000000000000000000000000000000000000000000000") == "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	family_spend.hex_to_base64url("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff") == "__________________________________________8"
	family_spend.hex_to_base64url("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0"
	family_spend.hex_to_base64url("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f") == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
}

test_hex_to_base64url_needs_64_hex_digits if {
	not family_spend.hex_to_base64url("00")
}

# The host evaluates `decision` alone: it must say exactly what the three documents say.
decision_mismatches_documents contains c.name if {
	some c in family_spend_cases
	got := decision_of(c)
	allow := family_spend.allow with input as c.input
		with key_from_did_key as replayed_key
		with verify_webauthn as replayed_webauthn
	failed := family_spend.failed_checks with input as c.input
		with key_from_did_key as replayed_key
		with verify_webauthn as replayed_webauthn
	reasons := [reason |
		reason := family_spend.deny_reason with input as c.input
			with key_from_did_key as replayed_key
			with verify_webauthn as replayed_webauthn
	]
	got != {"allow": allow, "failed_checks": failed, "deny_reason": reasons}
}

test_decision_equals_the_three_documents if count(decision_mismatches_documents) == 0
