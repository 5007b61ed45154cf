# spend-limit: the teaching bundle. A requester's signed SpendRequest allows a spend up to the
# configured limit; above it, an approver's signed SpendApproval for the same amount and payee is
# needed too. Claims are read only from bytes whose signature verified (SPEC §4.2).
package spend_limit

import rego.v1

default allow := false

# Tier "solo": the requester alone, within the limit.
allow if {
	requester_ok
	checks.within_limit
}

# Tier "approved": the requester plus an approver, any amount.
allow if {
	requester_ok
	approver_ok
}

requester_ok if {
	checks.requester_signature
	checks.requester_issuer
	checks.requester_window
	checks.requester_bound
}

approver_ok if {
	checks.approver_present
	checks.approver_signature
	checks.approver_issuer
	checks.approver_window
	checks.approver_bound
}

checks := {
	"requester_signature": requester_signature,
	"requester_issuer": issuer_ok(requester_claims, input.trust.requester.did),
	"requester_window": window_ok(requester_claims),
	"requester_bound": bound_ok(requester_claims, "SpendRequest"),
	"within_limit": within_limit,
	"approver_present": approver_present,
	"approver_signature": approver_signature,
	"approver_issuer": issuer_ok(approver_claims, input.trust.approver.did),
	"approver_window": window_ok(approver_claims),
	"approver_bound": bound_ok(approver_claims, "SpendApproval"),
}

failed_checks contains id if {
	some id, passed in checks
	passed != true
}

deny_reason := concat("", ["spend_limit denied: ", concat(", ", sort([id | some id in failed_checks]))]) if not allow

# The three documents above in one evaluation, so the host runs the policy once per decision.
# deny_reason is undefined on allow, so it travels as a list of zero or one reason.
decision := {
	"allow": allow,
	"failed_checks": failed_checks,
	"deny_reason": [reason | reason := deny_reason],
}

# --- evidence: verify first, then decode the very bytes that verified ---

default requester_signature := false

requester_signature if io.jwt.verify_eddsa(input.requesterCredential, json.marshal(input.trust.requester.jwk))

default approver_signature := false

approver_signature if io.jwt.verify_eddsa(input.approverCredential, json.marshal(input.trust.approver.jwk))

default approver_present := false

approver_present if is_string(input.approverCredential)

default requester_claims := null

requester_claims := verified_claims(input.requesterCredential) if requester_signature

default approver_claims := null

approver_claims := verified_claims(input.approverCredential) if approver_signature

verified_claims(jws) := json.unmarshal(base64url.decode(split(jws, ".")[1]))

# --- checks over verified claims; each is false (never undefined) when anything is off ---

default within_limit := false

within_limit if input.arguments.amountCents <= input.trust.limitCents

default issuer_ok(_, _) := false

issuer_ok(claims, did) if {
	is_string(claims.iss)
	claims.iss == did
}

# Time bounds (SPEC §5.2): iat, nbf and exp are required numbers; iat and nbf may be in the future
# by at most the clock skew; the credential is not expired; and its lifetime (exp - iat) is
# positive and at most the maximum, so an open-ended or far-future credential never counts.
clock_skew_seconds := 60

max_lifetime_seconds := 900

default window_ok(_) := false

window_ok(claims) if {
	is_number(claims.iat)
	is_number(claims.nbf)
	is_number(claims.exp)
	claims.iat - clock_skew_seconds <= input.now
	claims.nbf - clock_skew_seconds <= input.now
	input.now < claims.exp
	claims.iat < claims.exp
	claims.exp - claims.iat <= max_lifetime_seconds
}

default bound_ok(_, _) := false

bound_ok(claims, type) if {
	is_array(claims.vc.type)
	type in claims.vc.type
	subject := claims.vc.credentialSubject
	is_object(subject)
	subject.amountCents == input.arguments.amountCents
	subject.payee == input.arguments.payee
}
