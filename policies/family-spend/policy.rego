# family-spend: the household's payment policy (SPEC §7.1). A `charge_invoice` call is allowed
# only when the merchant's signed invoice, the child's approval and, above $10.00, the parent's
# approval all check out against the exact call: each approval signed by the member's did:key,
# that member's role proven by an admin-signed FamilyMembership, and the human's passkey assertion
# over the invoice hash verified with the key an admin-signed PasskeyEnrollment pins.
#
# Every JWS is verified once (complete rules are evaluated once per query), and claims are read
# only from the bytes that verified (SPEC §4.2). Every check is a complete rule named after its id
# with a `false` default, so it is `false`, never undefined, when anything is off.
package family_spend

import rego.v1

# Tiers (SPEC §7.1): solo up to $10.00; the child and the parent up to $200.00; nothing above.
child_limit_cents := 1000

household_limit_cents := 20000

default allow := false

# Tier "solo": the invoice and the child's leg, at most $10.00, where the parent has set no
# allowance for the child at this merchant (an allowance says how much the child may spend there
# without asking; beyond it, the parent decides).
allow if {
	invoice_ok
	child_ok
	within_child_limit
	solo_without_allowance
}

# Tier "family": the invoice, the child's leg and the parent's leg, at most $200.00. The parent's
# leg is the parent's own approval or, instead of it, a standing allowance that covers the order
# (docs/human-authority.md "Standing allowances").
allow if {
	invoice_ok
	child_ok
	parent_present
	parent_ok
	allowance_ok
	within_household_limit
}

invoice_ok if {
	invoice_signature
	invoice_window
	invoice_id_bound
	invoice_amount_bound
	invoice_merchant_bound
	invoice_text_unambiguous
	amount_valid
}

child_ok if {
	child_approval_signature
	child_approval_window
	child_approval_subject
	child_approval_invoice
	child_membership_signature
	child_membership_claims
	child_enrollment_signature
	child_enrollment_claims
	child_passkey_signature
	child_passkey_challenge
	child_passkey_origin
}

parent_ok if {
	parent_approval_signature
	parent_approval_window
	parent_approval_subject
	parent_approval_invoice
	parent_membership_signature
	parent_membership_claims
	parent_enrollment_signature
	parent_enrollment_claims
	parent_passkey_signature
	parent_passkey_challenge
	parent_passkey_origin
}

allowance_ok if {
	allowance_signature
	allowance_claims
	allowance_membership
	allowance_enrollment
	allowance_passkey
	allowance_merchant
	allowance_child
	allowance_order_cap
	allowance_window
	allowance_not_revoked
	allowance_budget
}

checks := {
	"invoice_signature": invoice_signature,
	"invoice_window": invoice_window,
	"invoice_id_bound": invoice_id_bound,
	"invoice_amount_bound": invoice_amount_bound,
	"invoice_merchant_bound": invoice_merchant_bound,
	"invoice_text_unambiguous": invoice_text_unambiguous,
	"amount_valid": amount_valid,
	"child_approval_signature": child_approval_signature,
	"child_approval_window": child_approval_window,
	"child_approval_subject": child_approval_subject,
	"child_approval_invoice": child_approval_invoice,
	"child_membership_signature": child_membership_signature,
	"child_membership_claims": child_membership_claims,
	"child_enrollment_signature": child_enrollment_signature,
	"child_enrollment_claims": child_enrollment_claims,
	"child_passkey_signature": child_passkey_signature,
	"child_passkey_challenge": child_passkey_challenge,
	"child_passkey_origin": child_passkey_origin,
	"within_child_limit": within_child_limit,
	"parent_present": parent_present,
	"parent_approval_signature": parent_approval_signature,
	"parent_approval_window": parent_approval_window,
	"parent_approval_subject": parent_approval_subject,
	"parent_approval_invoice": parent_approval_invoice,
	"parent_membership_signature": parent_membership_signature,
	"parent_membership_claims": parent_membership_claims,
	"parent_enrollment_signature": parent_enrollment_signature,
	"parent_enrollment_claims": parent_enrollment_claims,
	"parent_passkey_signature": parent_passkey_signature,
	"parent_passkey_challenge": parent_passkey_challenge,
	"parent_passkey_origin": parent_passkey_origin,
	"within_household_limit": within_household_limit,
	"solo_without_allowance": solo_without_allowance,
	"allowance_signature": allowance_signature,
	"allowance_claims": allowance_claims,
	"allowance_membership": allowance_membership,
	"allowance_enrollment": allowance_enrollment,
	"allowance_passkey": allowance_passkey,
	"allowance_merchant": allowance_merchant,
	"allowance_child": allowance_child,
	"allowance_order_cap": allowance_order_cap,
	"allowance_window": allowance_window,
	"allowance_not_revoked": allowance_not_revoked,
	"allowance_budget": allowance_budget,
}

failed_checks contains id if {
	some id, passed in checks
	passed != true
}

deny_reason := concat("", ["family_spend denied: ", concat(", ", sort([id | some id in failed_checks]))]) if not allow

# The three documents above in one evaluation, so the host runs the policy once per decision.
decision := {
	"allow": allow,
	"failed_checks": failed_checks,
	"deny_reason": [reason | reason := deny_reason],
}

# --- the invoice: signed by a trusted merchant, live, and bound to exactly this call ---

# 1. The key: the trusted merchant whose DID is the invoice's `iss`. The unverified `iss` only
#    selects the key; the signature check below then proves that merchant signed these bytes.
default invoice_signature := false

invoice_signature if {
	issuer := unverified_claims(input.invoice).iss
	is_string(issuer)
	some merchant in input.trustedMerchants
	merchant.did == issuer
	io.jwt.verify_eddsa(input.invoice, json.marshal(merchant.jwk))
}

default invoice := null

invoice := verified_claims(input.invoice) if invoice_signature

# 2. Live: the invoice's own time claims, at most 5 minutes of lifetime (SPEC §5.2).
default invoice_window := false

invoice_window if window_ok(invoice, 300)

# 3. Bound to the call: its `jti` is the invoice id charged.
default invoice_id_bound := false

invoice_id_bound if {
	typed(invoice, "Invoice")
	is_string(invoice.jti)
	invoice.jti == input.arguments.invoiceId
}

# 4. Bound to the call: exactly this many cents, in US dollars.
default invoice_amount_bound := false

invoice_amount_bound if {
	typed(invoice, "Invoice")
	subject := invoice.vc.credentialSubject
	is_number(subject.totalCents)
	subject.totalCents == input.arguments.amountCents
	subject.currency == "usd"
}

# 5. Bound to the call: paid to the merchant that signed it.
default invoice_merchant_bound := false

invoice_merchant_bound if {
	typed(invoice, "Invoice")
	is_string(invoice.iss)
	invoice.iss == input.arguments.merchantId
	invoice.vc.credentialSubject.merchantId == input.arguments.merchantId
}

# 6. Its text reads as it is (issue 26 item 3), whatever a merchant signs: the merchant name, the
#    address and every line's sku and name are strings without a character of Unicode categories
#    Cc, Cf, Zl or Zp (controls, bidirectional overrides, zero-width and tag characters, line and
#    paragraph separators), so what a person approved in the window is what was signed. The
#    texts are joined and matched once: OPA recompiles a pattern on every evaluation.
default invoice_text_unambiguous := false

invoice_text_unambiguous if {
	typed(invoice, "Invoice")
	subject := invoice.vc.credentialSubject
	is_string(subject.merchantName)
	is_string(subject.deliverTo)
	is_array(subject.items)
	labels := [label | some item in subject.items; some field in ["sku", "name"]; label := item[field]; is_string(label)]
	count(labels) == 2 * count(subject.items)
	not regex.match(ambiguous_text_pattern, concat(" ", array.concat([subject.merchantName, subject.deliverTo], labels)))
}

# Cc ∪ Cf ∪ Zl ∪ Zp of Unicode 17.0 as explicit ranges, so both engines match the same characters
# (generated by fixtures/ambiguous-text.ts; a test checks this line equals its output).
ambiguous_text_pattern := `[\x{0000}-\x{001F}\x{007F}-\x{009F}\x{00AD}\x{0600}-\x{0605}\x{061C}\x{06DD}\x{070F}\x{0890}-\x{0891}\x{08E2}\x{180E}\x{200B}-\x{200F}\x{2028}-\x{202E}\x{2060}-\x{2064}\x{2066}-\x{206F}\x{FEFF}\x{FFF9}-\x{FFFB}\x{110BD}\x{110CD}\x{13430}-\x{1343F}\x{1BCA0}-\x{1BCA3}\x{1D173}-\x{1D17A}\x{E0001}\x{E0020}-\x{E007F}]`

# 7. The amount charged is a whole number of cents from 1 to 10 000 000 (the manifest's bounds),
#    whatever a merchant signs: no fractional, zero or negative charge. The tier limits and the
#    guidance's "$15.00 is over $10.00" then speak of a real amount (issue 26 item 11).
default amount_valid := false

amount_valid if {
	is_number(input.arguments.amountCents)
	input.arguments.amountCents >= 1
	input.arguments.amountCents <= 10000000
	floor(input.arguments.amountCents) == input.arguments.amountCents
}

# The invoice hash (SPEC §5.2): base64url of the 32 SHA-256 bytes of the compact JWS, computed once.
invoice_hash := hex_to_base64url(crypto.sha256(input.invoice)) if is_string(input.invoice)

# --- the child's leg ---

default child_approval_signature := false

child_approval_signature if approval_signature(input.childApproval)

default child_approval := null

child_approval := verified_claims(input.childApproval) if child_approval_signature

default child_approval_window := false

child_approval_window if window_ok(child_approval, 900)

default child_approval_subject := false

child_approval_subject if approval_subject_ok(child_approval, "child")

default child_approval_invoice := false

child_approval_invoice if approval_invoice_ok(child_approval)

default child_membership_signature := false

child_membership_signature if admin_signed(input.childEvidence.membership)

default child_membership := null

child_membership := verified_claims(input.childEvidence.membership) if child_membership_signature

default child_membership_claims := false

child_membership_claims if membership_ok(child_membership, child_approval, "child")

default child_enrollment_signature := false

child_enrollment_signature if admin_signed(input.childEvidence.enrollment)

default child_enrollment := null

child_enrollment := verified_claims(input.childEvidence.enrollment) if child_enrollment_signature

default child_enrollment_claims := false

child_enrollment_claims if enrollment_ok(child_enrollment, child_approval, "child")

default child_passkey_signature := false

child_passkey_signature if passkey_signature_ok(child_approval, child_enrollment)

default child_passkey_challenge := false

child_passkey_challenge if passkey_challenge_ok(child_approval)

default child_passkey_origin := false

child_passkey_origin if passkey_origin_ok(child_approval)

# --- the tiers' amounts ---

default within_child_limit := false

within_child_limit if {
	is_number(input.arguments.amountCents)
	input.arguments.amountCents <= child_limit_cents
}

default within_household_limit := false

within_household_limit if {
	is_number(input.arguments.amountCents)
	input.arguments.amountCents <= household_limit_cents
}

# --- the parent's leg: the same checks with role `parent` ---
# Without a parent approval only `parent_present` fails (the guidance then asks for the parent
# alone); each detail check holds vacuously, which allows nothing, since the family tier requires
# `parent_present`.

default parent_given := false

parent_given if is_string(input.parentApproval)

default parent_present := false

parent_present if parent_given

parent_present if allowance_used

default parent_approval_signature := false

parent_approval_signature if not parent_given

parent_approval_signature if approval_signature(input.parentApproval)

default parent_approval := null

parent_approval := verified_claims(input.parentApproval) if parent_approval_signature

default parent_approval_window := false

parent_approval_window if not parent_given

parent_approval_window if window_ok(parent_approval, 900)

default parent_approval_subject := false

parent_approval_subject if not parent_given

parent_approval_subject if approval_subject_ok(parent_approval, "parent")

default parent_approval_invoice := false

parent_approval_invoice if not parent_given

parent_approval_invoice if approval_invoice_ok(parent_approval)

default parent_membership_signature := false

parent_membership_signature if not parent_given

parent_membership_signature if admin_signed(input.parentEvidence.membership)

default parent_membership := null

parent_membership := verified_claims(input.parentEvidence.membership) if parent_membership_signature

default parent_membership_claims := false

parent_membership_claims if not parent_given

parent_membership_claims if membership_ok(parent_membership, parent_approval, "parent")

default parent_enrollment_signature := false

parent_enrollment_signature if not parent_given

parent_enrollment_signature if admin_signed(input.parentEvidence.enrollment)

default parent_enrollment := null

parent_enrollment := verified_claims(input.parentEvidence.enrollment) if parent_enrollment_signature

default parent_enrollment_claims := false

parent_enrollment_claims if not parent_given

parent_enrollment_claims if enrollment_ok(parent_enrollment, parent_approval, "parent")

default parent_passkey_signature := false

parent_passkey_signature if not parent_given

parent_passkey_signature if passkey_signature_ok(parent_approval, parent_enrollment)

default parent_passkey_challenge := false

parent_passkey_challenge if not parent_given

parent_passkey_challenge if passkey_challenge_ok(parent_approval)

default parent_passkey_origin := false

parent_passkey_origin if not parent_given

parent_passkey_origin if passkey_origin_ok(parent_approval)

# --- the standing allowance: the parent's passkey yes to its terms, signed by the household ---
# Fetched by the host for the approving child at this merchant (never from the call), with its
# revocation and what the current period has spent. It stands in for the parent only when the
# parent did not approve this order; each check holds vacuously otherwise, so an order the parent
# approved is decided as before.

default allowance_given := false

allowance_given if is_string(input.allowance.credential)

default allowance_used := false

allowance_used if {
	allowance_given
	not parent_given
}

default solo_without_allowance := false

solo_without_allowance if not allowance_given

# 1. Signed by the household admin's pinned key.
default allowance_signature := false

allowance_signature if not allowance_used

allowance_signature if admin_signed(input.allowance.credential)

default allowance := null

allowance := verified_claims(input.allowance.credential) if {
	allowance_used
	allowance_signature
}

default allowance_terms := null

allowance_terms := json.unmarshal(allowance.vc.credentialSubject.terms) if is_string(allowance.vc.credentialSubject.terms)

# The terms' hash: base64url of SHA-256 over the very bytes the credential carries.
default allowance_terms_hash := ""

allowance_terms_hash := hex_to_base64url(crypto.sha256(allowance.vc.credentialSubject.terms)) if is_string(allowance.vc.credentialSubject.terms)

# 2. An Allowance of this household for the parent, living as its terms say (at most 366 days),
#    whose claimed hash is the hash of its terms.
default allowance_claims := false

allowance_claims if not allowance_used

allowance_claims if {
	typed(allowance, "Allowance")
	allowance.iss == input.household.adminDid
	window_ok(allowance, 31622400)
	is_string(allowance.sub)
	allowance.vc.credentialSubject.role == "parent"
	is_object(allowance_terms)
	allowance.vc.credentialSubject.termsHash == allowance_terms_hash
	allowance.exp == allowance_terms.expiresAt
}

# The allowance as an approval leg: its signer is the parent it names, with the passkey it carries.
allowance_leg := {"iss": allowance.sub, "vc": allowance.vc} if is_string(allowance.sub)

# 3. The parent holds the role, by an admin-signed membership naming that member.
default allowance_membership := false

allowance_membership if not allowance_used

allowance_membership if {
	admin_signed(input.allowance.membership)
	membership_ok(verified_claims(input.allowance.membership), allowance_leg, "parent")
}

# 4. The passkey is the one an admin-signed enrollment pins for that member as the parent.
default allowance_enrollment_claims := null

allowance_enrollment_claims := verified_claims(input.allowance.enrollment) if admin_signed(input.allowance.enrollment)

default allowance_enrollment := false

allowance_enrollment if not allowance_used

allowance_enrollment if enrollment_ok(allowance_enrollment_claims, allowance_leg, "parent")

# 5. The parent's passkey signed exactly the terms' hash, on the household's origin.
default allowance_passkey := false

allowance_passkey if not allowance_used

allowance_passkey if {
	passkey_signature_ok(allowance, allowance_enrollment_claims)
	client := client_data(allowance)
	is_string(client.challenge)
	client.challenge == allowance_terms_hash
	passkey_origin_ok(allowance)
}

# 6. The terms cover this order: its merchant, the approving child, the per-order cap, the window.
default allowance_merchant := false

allowance_merchant if not allowance_used

allowance_merchant if {
	is_string(allowance_terms.merchantDid)
	allowance_terms.merchantDid == input.arguments.merchantId
}

default allowance_child := false

allowance_child if not allowance_used

allowance_child if {
	child_approval_signature
	is_string(allowance_terms.childDid)
	allowance_terms.childDid == child_approval.iss
}

default allowance_order_cap := false

allowance_order_cap if not allowance_used

allowance_order_cap if {
	is_number(allowance_terms.perOrderCapCents)
	is_number(input.arguments.amountCents)
	input.arguments.amountCents <= allowance_terms.perOrderCapCents
}

default allowance_window := false

allowance_window if not allowance_used

allowance_window if {
	is_number(allowance_terms.notBefore)
	is_number(allowance_terms.expiresAt)
	allowance_terms.notBefore <= input.now
	input.now < allowance_terms.expiresAt
}

# 7. Not revoked, and the current period's budget still holds the total (fetched in the host's
#    transaction; the charge's hold decides atomically again).
default allowance_not_revoked := false

allowance_not_revoked if not allowance_used

allowance_not_revoked if input.allowance.revoked == false

default allowance_budget := false

allowance_budget if not allowance_used

allowance_budget if {
	is_number(allowance_terms.budgetCents)
	is_number(input.allowance.spentCents)
	is_number(input.arguments.amountCents)
	input.arguments.amountCents <= allowance_terms.budgetCents - input.allowance.spentCents
}

# --- one leg, step by step (identity/verify-order-approval.ts walks the same steps) ---

# 1. The OrderApproval verifies against the key its issuer's did:key encodes (never a key from
#    the call): the unverified `iss` selects the key, and only that DID's key can sign for it.
default approval_signature(_) := false

approval_signature(jws) if {
	key := key_from_did_key(unverified_claims(jws).iss)
	key != null
	io.jwt.verify_eddsa(jws, json.marshal(key))
}

# 2. It is the member's own approval, in the role this leg proves.
default approval_subject_ok(_, _) := false

approval_subject_ok(approval, role) if {
	typed(approval, "OrderApproval")
	is_string(approval.iss)
	approval.sub == approval.iss
	approval.vc.credentialSubject.role == role
}

# 3. It approves this invoice: its invoiceHash is the hash of the very invoice JWS charged.
default approval_invoice_ok(_) := false

approval_invoice_ok(approval) if {
	is_string(approval.vc.credentialSubject.invoiceHash)
	approval.vc.credentialSubject.invoiceHash == invoice_hash
}

# 4. Admin credentials verify against the household admin's pinned key (config, never the call).
default admin_signed(_) := false

admin_signed(jws) if io.jwt.verify_eddsa(jws, json.marshal(input.household.adminJwk))

# 5. The member holds the role: a FamilyMembership of this household naming the approval's signer.
default membership_ok(_, _, _) := false

membership_ok(membership, approval, role) if {
	typed(membership, "FamilyMembership")
	membership.iss == input.household.adminDid
	window_ok(membership, 31536000)
	is_string(approval.iss)
	membership.sub == approval.iss
	membership.vc.credentialSubject.role == role
	membership.vc.credentialSubject.household == input.household.adminDid
}

# 6. The passkey is enrolled for that member and role, and is the one the approval carries.
default enrollment_ok(_, _, _) := false

enrollment_ok(enrollment, approval, role) if {
	typed(enrollment, "PasskeyEnrollment")
	enrollment.iss == input.household.adminDid
	window_ok(enrollment, 31536000)
	is_string(approval.iss)
	enrollment.sub == approval.iss
	enrollment.vc.credentialSubject.role == role
	is_string(enrollment.vc.credentialSubject.credentialId)
	enrollment.vc.credentialSubject.credentialId == approval.vc.credentialSubject.passkey.credentialId
}

# 7. The human's passkey signed: ES256 with the enrolled key over authenticatorData and the
#    client data hash, rpId hash and UP/UV flags checked by the host (verify_webauthn).
default passkey_signature_ok(_, _) := false

passkey_signature_ok(approval, enrollment) if {
	passkey := approval.vc.credentialSubject.passkey
	key := enrollment.vc.credentialSubject.publicKeyJwk
	is_p256_jwk(key)
	verify_webauthn(passkey.authenticatorData, passkey.clientDataJSON, passkey.signature, json.marshal(key))
}

# 8. ... over this approval's invoice hash (the WebAuthn challenge is those 32 bytes) ...
default passkey_challenge_ok(_) := false

passkey_challenge_ok(approval) if {
	client := client_data(approval)
	is_string(client.challenge)
	client.challenge == approval.vc.credentialSubject.invoiceHash
}

# 9. ... on the household's own origin, not framed by another one.
default passkey_origin_ok(_) := false

passkey_origin_ok(approval) if {
	client := client_data(approval)
	is_string(client.origin)
	client.origin == input.webauthn.origin
	object.get(client, "crossOrigin", false) == false
	not "topOrigin" in object.keys(client)
}

client_data(approval) := json.unmarshal(base64url.decode(approval.vc.credentialSubject.passkey.clientDataJSON))

# --- shared helpers ---

# Time bounds (SPEC §5.2): iat, nbf and exp present; iat and nbf at most 60 s in the future; not
# expired; a positive lifetime of at most the type's.
default window_ok(_, _) := false

window_ok(claims, max_lifetime) if {
	is_number(claims.iat)
	is_number(claims.nbf)
	is_number(claims.exp)
	claims.iat - 60 <= input.now
	claims.nbf - 60 <= input.now
	input.now < claims.exp
	claims.iat < claims.exp
	claims.exp - claims.iat <= max_lifetime
}

default typed(_, _) := false

typed(claims, type) if {
	is_array(claims.vc.type)
	type in claims.vc.type
}

default is_p256_jwk(_) := false

is_p256_jwk(key) if {
	key.kty == "EC"
	key.crv == "P-256"
	is_string(key.x)
	is_string(key.y)
}

# Claims of a JWS whose signature verified (callers gate on that).
verified_claims(jws) := json.unmarshal(base64url.decode(split(jws, ".")[1]))

# Claims of a JWS not yet verified: read only to select the verification key.
unverified_claims(jws) := json.unmarshal(base64url.decode(split(jws, ".")[1])) if is_string(jws)

# Lowercase hex of 32 bytes → unpadded base64url (43 characters), with short string operations
# only: number arithmetic in OPA's WASM runs on decimals, and `substring` walks its string from
# the start, so both cost tenths of a millisecond on long strings. Each group of 3 hex digits
# (12 bits) becomes its bits, then 2 characters of 6 bits; the last digit's 4 bits get two zero
# bits of padding.
hex_bits := {"0": "0000", "1": "0001", "2": "0010", "3": "0011", "4": "0100", "5": "0101", "6": "0110", "7": "0111", "8": "1000", "9": "1001", "a": "1010", "b": "1011", "c": "1100", "d": "1101", "e": "1110", "f": "1111"}

sextet_chars := {
	"000000": "A",
	"000001": "B",
	"000010": "C",
	"000011": "D",
	"000100": "E",
	"000101": "F",
	"000110": "G",
	"000111": "H",
	"001000": "I",
	"001001": "J",
	"001010": "K",
	"001011": "L",
	"001100": "M",
	"001101": "N",
	"001110": "O",
	"001111": "P",
	"010000": "Q",
	"010001": "R",
	"010010": "S",
	"010011": "T",
	"010100": "U",
	"010101": "V",
	"010110": "W",
	"010111": "X",
	"011000": "Y",
	"011001": "Z",
	"011010": "a",
	"011011": "b",
	"011100": "c",
	"011101": "d",
	"011110": "e",
	"011111": "f",
	"100000": "g",
	"100001": "h",
	"100010": "i",
	"100011": "j",
	"100100": "k",
	"100101": "l",
	"100110": "m",
	"100111": "n",
	"101000": "o",
	"101001": "p",
	"101010": "q",
	"101011": "r",
	"101100": "s",
	"101101": "t",
	"101110": "u",
	"101111": "v",
	"110000": "w",
	"110001": "x",
	"110010": "y",
	"110011": "z",
	"110100": "0",
	"110101": "1",
	"110110": "2",
	"110111": "3",
	"111000": "4",
	"111001": "5",
	"111010": "6",
	"111011": "7",
	"111100": "8",
	"111101": "9",
	"111110": "-",
	"111111": "_",
}

triple_offsets := [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45, 48, 51, 54, 57, 60]

pair_of(triple) := concat("", [sextet_chars[substring(bits, 0, 6)], sextet_chars[substring(bits, 6, 6)]]) if {
	bits := concat("", [hex_bits[substring(triple, 0, 1)], hex_bits[substring(triple, 1, 1)], hex_bits[substring(triple, 2, 1)]])
}

hex_to_base64url(hex) := concat("", array.concat(
	[pair_of(substring(hex, offset, 3)) | some offset in triple_offsets],
	[sextet_chars[concat("", [hex_bits[substring(hex, 63, 1)], "00"])]],
)) if count(hex) == 64
