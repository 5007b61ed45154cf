import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { didKeyFromJwk } from '../did-key.js';
import { invoiceHash } from '../verify-receipt.js';

/** A receipt subject as the household's settlement service would sign it (SPEC §7). */
export type ReceiptSubjectInput = {
  invoiceId: string;
  invoiceHash: string;
  merchantId: string;
  amountCents: number;
  currency: string;
  paymentRef: string;
  status: string;
};

/** A stand-in settlement service for tests: its own did:key and a receipt signer. */
export type SettlementFixture = {
  did: string;
  /** Sign a PaymentReceipt JWT-VC with this settlement key. */
  signReceipt(subject: ReceiptSubjectInput, options?: { ttlSeconds?: number; type?: string }): Promise<string>;
  /** The receipt subject that correctly pays a merchant-signed invoice, with optional overrides. */
  subjectFor(invoice: string, overrides?: Partial<ReceiptSubjectInput>): ReceiptSubjectInput;
};

/**
 * Test support only (not exported from the shop's entry): plays the household's settlement
 * service, which in production lives on the other side and signs receipts after a charge.
 */
export async function createSettlementFixture(): Promise<SettlementFixture> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const { did, kid } = didKeyFromJwk(await exportJWK(publicKey));
  return {
    did,
    async signReceipt(subject, options) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({
        vc: {
          '@context': ['https://www.w3.org/2018/credentials/v1'],
          type: ['VerifiableCredential', options?.type ?? 'PaymentReceipt'],
          credentialSubject: subject,
        },
      })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid })
        .setIssuer(did)
        .setJti(`urn:uuid:${crypto.randomUUID()}`)
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + (options?.ttlSeconds ?? 3600))
        .sign(privateKey);
    },
    subjectFor(invoice, overrides) {
      const claims = decodeJwt(invoice) as {
        jti: string;
        iss: string;
        vc: { credentialSubject: { totalCents: number; currency: string } };
      };
      return {
        invoiceId: claims.jti,
        invoiceHash: invoiceHash(invoice),
        merchantId: claims.iss,
        amountCents: claims.vc.credentialSubject.totalCents,
        currency: claims.vc.credentialSubject.currency,
        paymentRef: `mock_${claims.jti.slice(-12)}`,
        status: 'succeeded',
        ...overrides,
      };
    },
  };
}
