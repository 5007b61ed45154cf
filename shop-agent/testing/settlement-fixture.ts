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

/**
 * How to sign a test receipt. The defaults make an honest receipt; the time variants make the
 * stale or open-ended evidence a verifier must refuse (SPEC §5.2).
 */
export type SignReceiptOptions = {
  /** Lifetime in seconds, `exp - iat` (default one hour). */
  ttlSeconds?: number;
  /** The VC type after `VerifiableCredential` (default `PaymentReceipt`). */
  type?: string;
  /** The signer's clock in seconds since the epoch (default: the real clock). */
  nowSeconds?: number;
  /** Leave `exp` out: an open-ended receipt. */
  omitExp?: boolean;
  /** Leave `iat` out. */
  omitIat?: boolean;
  /** Leave `nbf` out. */
  omitNbf?: boolean;
  /** Seconds added to `iat` (e.g. years in the future); `nbf` stays at the signer's now. */
  iatOffsetSeconds?: number;
  /** Seconds added to `nbf`. */
  nbfOffsetSeconds?: number;
};

/** A stand-in settlement service for tests: its own did:key and a receipt signer. */
export type SettlementFixture = {
  did: string;
  /** Sign a PaymentReceipt JWT-VC with this settlement key. */
  signReceipt(subject: ReceiptSubjectInput, options?: SignReceiptOptions): Promise<string>;
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
      const now = options?.nowSeconds ?? Math.floor(Date.now() / 1000);
      const jwt = new SignJWT({
        vc: {
          '@context': ['https://www.w3.org/2018/credentials/v1'],
          type: ['VerifiableCredential', options?.type ?? 'PaymentReceipt'],
          credentialSubject: subject,
        },
      })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid })
        .setIssuer(did)
        .setJti(`urn:uuid:${crypto.randomUUID()}`);
      if (options?.omitNbf !== true) jwt.setNotBefore(now + (options?.nbfOffsetSeconds ?? 0));
      if (options?.omitIat !== true) jwt.setIssuedAt(now + (options?.iatOffsetSeconds ?? 0));
      if (options?.omitExp !== true) jwt.setExpirationTime(now + (options?.ttlSeconds ?? 3600));
      return jwt.sign(privateKey);
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
