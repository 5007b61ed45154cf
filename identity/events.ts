import type { ApprovalHandoverCause, Role } from './store';

/**
 * What identity reports as it decides (SPEC §8 live log). No event carries a secret: never a code,
 * a token, a challenge's answer or a key; a credential id or DID is public.
 */
export type IdentityEvent =
  | { readonly kind: 'enrollment-code-issued'; readonly role: Role }
  | { readonly kind: 'enrollment-refused'; readonly role?: Role; readonly reason: string }
  | {
      readonly kind: 'passkey-enrolled';
      readonly role: Role;
      readonly memberDid: string;
      readonly credentialId: string;
    }
  | { readonly kind: 'sign-in-succeeded'; readonly role: Role; readonly credentialId: string }
  | { readonly kind: 'passkey-refused'; readonly ceremony: 'sign-in' | 'approval'; readonly reason: string }
  | {
      readonly kind: 'approval-created';
      readonly approvalId: string;
      readonly invoiceId: string;
      readonly totalCents: number;
      readonly requiredRoles: readonly Role[];
    }
  | { readonly kind: 'approval-refused'; readonly reason: string }
  | {
      readonly kind: 'approval-approved';
      readonly approvalId: string;
      readonly invoiceId: string;
      readonly role: Role;
      readonly complete: boolean;
    }
  | { readonly kind: 'approval-declined'; readonly approvalId: string; readonly invoiceId: string; readonly role: Role }
  /** An order approved on the parent's allowance alone that the allowance no longer covers now asks the parent. */
  | {
      readonly kind: 'approval-handed-over';
      readonly approvalId: string;
      readonly invoiceId: string;
      readonly cause: ApprovalHandoverCause;
      readonly allowanceId: string;
    }
  | {
      readonly kind: 'approval-expired' | 'approval-settled' | 'approval-fulfilled';
      readonly approvalId: string;
      readonly invoiceId: string;
    }
  /** A gated call (`approval_required`) waits for `requiredRoles`' passkeys over `callHash`. */
  | {
      readonly kind: 'call-approval-requested';
      readonly requestId: string;
      readonly tool: string;
      readonly callHash: string;
      readonly requiredRoles: readonly Role[];
    }
  | {
      readonly kind: 'call-approval-approved';
      readonly requestId: string;
      readonly tool: string;
      readonly role: Role;
      readonly complete: boolean;
    }
  | { readonly kind: 'call-approval-declined'; readonly requestId: string; readonly tool: string; readonly role: Role }
  /** Nobody decided in time; or (`spent`) its approvals authorised the call once and cannot again. */
  | {
      readonly kind: 'call-approval-expired' | 'call-approval-spent';
      readonly requestId: string;
      readonly tool: string;
    };

/** Receives identity's events; the host validates them against its one event schema and fans them out. */
export type IdentityEventSink = (event: IdentityEvent) => void;
