import { createHash } from 'node:crypto';
import { compactVerify } from 'jose';
import { z } from 'zod';
import { jwkFromDidKey } from './did-key.js';
import { checkTimeClaims, MAX_LIFETIME_SECONDS } from './time-claims.js';

/** The `PaymentReceipt` credential subject (SPEC §7), as read from verified bytes only. */
export const ReceiptSubject = z.object({
  invoiceId: z.string().min(1).max(200),
  invoiceHash: z.string().min(1).max(200),
  merchantId: z.string().min(1).max(200),
  amountCents: z.number().int().nonnegative(),
  currency: z.string().min(1).max(16),
  paymentRef: z.string().min(1).max(200),
  status: z.string().max(32),
});

/** A verified receipt's subject. */
export type ReceiptSubject = z.infer<typeof ReceiptSubject>;

/**
 * The verdict on a receipt: its verified subject and when the settlement service issued it (its
 * `iat`: the payment's time), or why it was not accepted.
 */
export type ReceiptVerification =
  | { verified: true; subject: ReceiptSubject; issuedAt: Date }
  | { verified: false; reason: string };

const ReceiptClaims = z.object({
  iss: z.string(),
  iat: z.number(),
  vc: z.object({
    type: z.array(z.string()).refine((types) => types.includes('PaymentReceipt'), 'not a PaymentReceipt'),
    credentialSubject: ReceiptSubject,
  }),
});

/** `invoiceHash` (SPEC §5.2): base64url(SHA-256(ASCII of the compact invoice JWS)). */
export function invoiceHash(invoiceJws: string): string {
  return createHash('sha256').update(invoiceJws, 'ascii').digest('base64url');
}

/**
 * Verify a `PaymentReceipt` JWT-VC against the one settlement DID the operator trusts.
 * Claims are read only from the verified payload; any doubt is a refusal.
 */
export async function verifyReceipt(
  receipt: string,
  options: { settlementDid: string; now: Date },
): Promise<ReceiptVerification> {
  // Step 1: the trusted settlement DID must be a well-formed Ed25519 did:key.
  const jwk = jwkFromDidKey(options.settlementDid);
  if (jwk === null) return { verified: false, reason: 'the configured settlement DID is not an Ed25519 did:key' };

  // Step 2: the signature verifies with that key (EdDSA only); claims come only from these bytes.
  let payload: unknown;
  try {
    const result = await compactVerify(receipt, jwk, { algorithms: ['EdDSA', 'Ed25519'] });
    payload = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(result.payload));
  } catch {
    return { verified: false, reason: 'the receipt is not signed by the trusted settlement service' };
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return { verified: false, reason: 'the receipt is not a well-formed PaymentReceipt credential' };
  }

  // Step 3: every time claim is bounded (SPEC §5.2): exp required, iat/nbf not in the future
  // beyond the skew, not expired, and a lifetime of at most 24 h.
  const window = checkTimeClaims(payload as Record<string, unknown>, {
    now: options.now,
    maxLifetimeSeconds: MAX_LIFETIME_SECONDS.PaymentReceipt,
  });
  if (!window.ok) return { verified: false, reason: `the receipt is not acceptable: ${window.reason}` };

  // Step 4: it is a PaymentReceipt with a well-formed subject, issued by that DID.
  const claims = ReceiptClaims.safeParse(payload);
  if (!claims.success) return { verified: false, reason: 'the receipt is not a well-formed PaymentReceipt credential' };
  if (claims.data.iss !== options.settlementDid) {
    return { verified: false, reason: 'the receipt is not issued by the trusted settlement service' };
  }

  // Step 5: only a succeeded payment ships pizza.
  const subject = claims.data.vc.credentialSubject;
  if (subject.status !== 'succeeded') {
    return { verified: false, reason: `the receipt's payment status is "${subject.status}", not "succeeded"` };
  }
  return { verified: true, subject, issuedAt: new Date(claims.data.iat * 1000) };
}
