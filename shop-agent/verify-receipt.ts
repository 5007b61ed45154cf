import { createHash } from 'node:crypto';
import { errors, jwtVerify } from 'jose';
import { z } from 'zod';
import { jwkFromDidKey } from './did-key.js';

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

/** The verdict on a receipt: its verified subject, or why it was not accepted. */
export type ReceiptVerification = { verified: true; subject: ReceiptSubject } | { verified: false; reason: string };

const ReceiptClaims = z.object({
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

  // Step 2: the signature verifies with that key, the issuer is that DID, and the time window holds.
  let payload: unknown;
  try {
    const result = await jwtVerify(receipt, jwk, {
      algorithms: ['EdDSA', 'Ed25519'],
      issuer: options.settlementDid,
      currentDate: options.now,
      clockTolerance: 5,
    });
    payload = result.payload;
  } catch (error) {
    // JWTExpired is a subclass of JWTClaimValidationFailed: test it first.
    if (error instanceof errors.JWTExpired) return { verified: false, reason: 'the receipt has expired' };
    if (error instanceof errors.JWTClaimValidationFailed) {
      return { verified: false, reason: `the receipt's ${error.claim} claim is not acceptable (${error.reason})` };
    }
    return { verified: false, reason: 'the receipt is not signed by the trusted settlement service' };
  }

  // Step 3: it is a PaymentReceipt with a well-formed subject.
  const claims = ReceiptClaims.safeParse(payload);
  if (!claims.success) return { verified: false, reason: 'the receipt is not a well-formed PaymentReceipt credential' };

  // Step 4: only a succeeded payment ships pizza.
  const subject = claims.data.vc.credentialSubject;
  if (subject.status !== 'succeeded') {
    return { verified: false, reason: `the receipt's payment status is "${subject.status}", not "succeeded"` };
  }
  return { verified: true, subject };
}
