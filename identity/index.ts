/**
 * The household identity module (SPEC §5): DIDs, keys and credentials with Veramo, passkeys with
 * SimpleWebAuthn, enrollment codes, and durable approval requests. The one public entry: `lib/`
 * and the tests import from here only. It declares the store and event sink it needs; the host
 * implements them.
 */
export type {
  AllowanceHold,
  AllowanceHoldResult,
  AllowanceRecord,
  AllowanceStore,
} from './allowance-store';
export {
  type AllowanceCover,
  type AllowanceOrder,
  type AllowanceTerms,
  allowanceCovers,
  allowanceHashOf,
  allowanceTermsSchema,
  canonicalTerms,
  maxAllowanceSeconds,
  parseCanonicalTerms,
  periodKeyOf,
} from './allowance-terms';
export {
  type AllowanceCoverOutcome,
  type AllowanceDraft,
  type AllowanceHoldOutcome,
  type AllowanceOutcome,
  type AllowanceStanding,
  type Allowances,
  type AllowancesOptions,
  type AllowanceView,
  createAllowances,
} from './allowances';
export { approvalTools, maxWaitSeconds } from './approval-tools';
export {
  type ApprovalEvidenceSet,
  type Approvals,
  type ApprovalsOptions,
  type ApprovalView,
  childOnlyLimitCents,
  createApprovals,
  type DecisionOutcome,
  householdLimitCents,
  type InvoiceTerms,
  type RequestOutcome,
  requiredRolesFor,
  type WaitOutcome,
} from './approvals';
export type {
  CallApprovalCreation,
  CallApprovalRecord,
  CallApprovalStatus,
  CallApprovalStore,
} from './call-approval-store';
export {
  type CallApprovals,
  type CallApprovalsOptions,
  type CallApprovalView,
  type CallArgumentView,
  type CallDecisionOutcome,
  type CallWaitOutcome,
  callApprovalLifetimeMs,
  createCallApprovals,
  maxPendingCallApprovals,
} from './call-approvals';
export {
  type AllowanceClaims,
  type AuditCheckpointClaims,
  type CallApprovalClaims,
  type CredentialType,
  clockSkewSeconds,
  type EnrollmentClaims,
  lifetimeSeconds,
  type MembershipClaims,
  type OrderApprovalClaims,
  type PasskeyAssertion,
} from './credentials';
export {
  type CheckEnrollmentCodeOptions,
  checkEnrollmentCode,
  type EnrollmentCodeCheck,
  enrollmentCeilingWindowMs,
  enrollmentCodeLifetimeMs,
  enrollmentFailureCeiling,
  enrollmentFailureLimit,
  enrollmentFailureWindowMs,
  type IssuedEnrollmentCode,
  type IssueEnrollmentCodesOptions,
  issueEnrollmentCodes,
} from './enrollment-codes';
export type { IdentityEvent, IdentityEventSink } from './events';
export {
  type DidDocument,
  defaultAdminDid,
  type Household,
  type IssueRequest,
  keyFileName,
  type OpenHouseholdOptions,
  openHousehold,
  type Signer,
} from './household';
export {
  createHouseholdProfile,
  type HouseholdProfile,
  type HouseholdProfileChange,
  type HouseholdProfileUpdate,
  type HouseholdProfileView,
  householdProfileChangeSchema,
  householdTimeZoneSchema,
  type MemberNames,
  maxMemberNameLength,
  memberNameSchema,
  memberNamesOf,
  serverTimeZone,
} from './household-profile';
export { IdentityError, type IdentityErrorCode, identityErrorCodes } from './identity-error';
export {
  type CappedBody,
  type CreateIdentityHandlersOptions,
  createIdentityHandlers,
  type IdentityHandler,
  type IdentityHandlers,
  maxIdentityBodyBytes,
  readCappedBody,
  sessionCookieName,
  windowCookieName,
} from './identity-http';
export {
  type ApprovalResult,
  type CallApprovalResult,
  type CeremonyOptions,
  type CreatePasskeysOptions,
  ceremonyLifetimeMs,
  createPasskeys,
  hashSessionToken,
  type PasskeyApprovals,
  type PasskeyCallApprovals,
  type PasskeyRefusal,
  type Passkeys,
  type ProfileResult,
  type SignedInSession,
  type SignInResult,
  sessionLifetimeMs,
} from './passkeys';
export type {
  ApprovalHandover,
  ApprovalHandoverCause,
  ApprovalRecord,
  ApprovalStatus,
  ApprovalStore,
  CeremonyRecord,
  CeremonyStore,
  EnrollmentCodeRecord,
  EnrollmentStore,
  HouseholdProfileStore,
  IdentityStore,
  MemberNameRecord,
  MerchantRecord,
  MerchantStore,
  PasskeyRecord,
  PasskeyStore,
  RecordKind,
  RecordStore,
  Role,
  SessionRecord,
  SessionStore,
  TimeZoneRecord,
} from './store';
export { roles } from './store';
export { type TrustMerchantRequest, trustMerchant } from './trust-merchant';
export { createVeramoVerifier } from './veramo-verifier';
export { type AllowanceEvidence, type AllowanceVerdict, verifyAllowance } from './verify-allowance';
export { type CallApprovalEvidence, type CallApprovalVerdict, verifyCallApproval } from './verify-call-approval';
export {
  type CredentialExpectation,
  type CredentialVerdict,
  type CredentialVerifier,
  createCredentialVerifier,
  householdKeys,
  type KeyResolver,
  readClaims,
  type TrustAnchors,
  type VerifiedCredential,
} from './verify-credential';
export {
  type ApprovalContext,
  type ApprovalEvidence,
  type ApprovalVerdict,
  invoiceHashOf,
  verifyOrderApproval,
} from './verify-order-approval';
export {
  type AssertionExpectation,
  type AssertionVerdict,
  type AssertionVerifier,
  coseKeyOf,
  verifyAssertionFast,
  verifyAssertionWithSimpleWebAuthn,
} from './verify-passkey-assertion';
