import { z } from 'zod';
import type {
  ApprovalHandover,
  ApprovalRecord,
  ApprovalStatus,
  CallApprovalRecord,
  CallApprovalStatus,
  CeremonyRecord,
  EnrollmentCodeRecord,
  MemberNameRecord,
  MerchantRecord,
  PasskeyRecord,
  Role,
  SessionRecord,
  TimeZoneRecord,
} from '../identity/index';

/*
 * The identity tables' rows, shared by the SQLite and the PostgreSQL store, which keep the same
 * columns. Rows are decoded with zod rather than cast: a column the code does not expect fails
 * loudly. PostgreSQL's BIGINT columns are selected as float8, so both read numbers.
 */

/** Maps a row that may be absent. */
export function optional<T>(row: unknown, map: (row: unknown) => T): T | undefined {
  return row === undefined ? undefined : map(row);
}

/** A role column. */
export const roleSchema = z.enum(['child', 'parent']) satisfies z.ZodType<Role>;
const statusSchema = z.enum([
  'pending',
  'approved',
  'declined',
  'expired',
  'settled',
  'fulfilled',
]) satisfies z.ZodType<ApprovalStatus>;

/** A TEXT column holding JSON this store wrote, decoded and checked against `schema`. */
export function jsonColumn<T extends z.ZodType>(schema: T) {
  return z
    .string()
    .transform((text, context) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        context.addIssue({ code: 'custom', message: 'column is not JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

const jwkColumn = jsonColumn(z.record(z.string(), z.string()));
/** A `identity_records` row. */
export const recordRow = z.object({ id: z.string(), value: z.string() });
/** A `count` column. */
export const countRow = z.object({ count: z.number() });

const codeRow = z.object({
  role: roleSchema,
  code_hash: z.string(),
  issued_at: z.number(),
  expires_at: z.number(),
  used_at: z.number().nullable(),
});

/** An `enrollment_codes` row as its record. */
export function toCode(row: unknown): EnrollmentCodeRecord {
  const parsed = codeRow.parse(row);
  return {
    role: parsed.role,
    codeHash: parsed.code_hash,
    issuedAt: parsed.issued_at,
    expiresAt: parsed.expires_at,
    ...(parsed.used_at === null ? {} : { usedAt: parsed.used_at }),
  };
}

const passkeyRow = z.object({
  credential_id: z.string(),
  role: roleSchema,
  member_did: z.string(),
  user_handle: z.string(),
  public_key_cose: z.string(),
  public_key_jwk: jwkColumn,
  counter: z.number(),
  transports: jsonColumn(z.array(z.string())),
  enrollment: z.string(),
  created_at: z.number(),
});

/** A passkey as the named parameters of its insert. */
export function passkeyParameters(record: PasskeyRecord) {
  return {
    credentialId: record.credentialId,
    role: record.role,
    memberDid: record.memberDid,
    userHandle: record.userHandle,
    publicKeyCose: record.publicKeyCose,
    publicKeyJwk: JSON.stringify(record.publicKeyJwk),
    counter: record.counter,
    transports: JSON.stringify(record.transports),
    enrollment: record.enrollment,
    createdAt: record.createdAt,
  };
}

/** A `passkeys` row as its record. */
export function toPasskey(row: unknown): PasskeyRecord {
  const parsed = passkeyRow.parse(row);
  return {
    credentialId: parsed.credential_id,
    role: parsed.role,
    memberDid: parsed.member_did,
    userHandle: parsed.user_handle,
    publicKeyCose: parsed.public_key_cose,
    publicKeyJwk: parsed.public_key_jwk,
    counter: parsed.counter,
    transports: parsed.transports,
    enrollment: parsed.enrollment,
    createdAt: parsed.created_at,
  };
}

const sessionRow = z.object({
  token_hash: z.string(),
  role: roleSchema,
  member_did: z.string(),
  credential_id: z.string(),
  created_at: z.number(),
  expires_at: z.number(),
});

/** An `approval_sessions` row as its record. */
export function toSession(row: unknown): SessionRecord {
  const parsed = sessionRow.parse(row);
  return {
    tokenHash: parsed.token_hash,
    role: parsed.role,
    memberDid: parsed.member_did,
    credentialId: parsed.credential_id,
    createdAt: parsed.created_at,
    expiresAt: parsed.expires_at,
  };
}

const ceremonyRow = z.object({
  id: z.string(),
  kind: z.enum(['registration', 'sign-in', 'approval']),
  challenge: z.string(),
  role: roleSchema.nullable(),
  code_hash: z.string().nullable(),
  user_handle: z.string().nullable(),
  approval_id: z.string().nullable(),
  expires_at: z.number(),
});

/** A `ceremonies` row as its record. */
export function toCeremony(row: unknown): CeremonyRecord {
  const parsed = ceremonyRow.parse(row);
  return {
    id: parsed.id,
    kind: parsed.kind,
    challenge: parsed.challenge,
    ...(parsed.role === null ? {} : { role: parsed.role }),
    ...(parsed.code_hash === null ? {} : { codeHash: parsed.code_hash }),
    ...(parsed.user_handle === null ? {} : { userHandle: parsed.user_handle }),
    ...(parsed.approval_id === null ? {} : { approvalId: parsed.approval_id }),
    expiresAt: parsed.expires_at,
  };
}

const approvalRow = z.object({
  approval_id: z.string(),
  invoice_id: z.string(),
  invoice: z.string(),
  invoice_hash: z.string(),
  merchant_did: z.string(),
  total_cents: z.number(),
  currency: z.string(),
  required_roles: jsonColumn(z.array(roleSchema)),
  approvals: jsonColumn(z.object({ child: z.string().optional(), parent: z.string().optional() })),
  status: statusSchema,
  reason: z.string().nullable(),
  receipt: z.string().nullable(),
  commitment: z.string().nullable(),
  created_at: z.number(),
  expires_at: z.number(),
  updated_at: z.number(),
  handover: jsonColumn(
    z.strictObject({
      cause: z.enum(['budget-spent', 'revoked', 'not-covered']),
      allowanceId: z.string(),
      period: z.enum(['day', 'week']).optional(),
      at: z.number(),
    }),
  ).nullable(),
});

/** A hand-over as its TEXT column: JSON with its keys in one order, so both stores hold the same bytes. */
export function handoverColumn(handover: ApprovalHandover): string {
  const { cause, allowanceId, period, at } = handover;
  return JSON.stringify({ cause, allowanceId, ...(period === undefined ? {} : { period }), at });
}

/** An approval as the named parameters of its insert. */
export function approvalParameters(record: ApprovalRecord) {
  return {
    approvalId: record.approvalId,
    invoiceId: record.invoiceId,
    invoice: record.invoice,
    invoiceHash: record.invoiceHash,
    merchantDid: record.merchantDid,
    totalCents: record.totalCents,
    currency: record.currency,
    requiredRoles: JSON.stringify(record.requiredRoles),
    approvals: JSON.stringify(record.approvals),
    status: record.status,
    reason: record.reason ?? null,
    receipt: record.receipt ?? null,
    commitment: record.commitment ?? null,
    createdAt: record.createdAt,
    expiresAt: record.expiresAt,
    updatedAt: record.updatedAt,
    handover: record.handover === undefined ? null : handoverColumn(record.handover),
  };
}

/** An `approvals` row as its record. */
export function toApproval(row: unknown): ApprovalRecord {
  const parsed = approvalRow.parse(row);
  const { child, parent } = parsed.approvals;
  return {
    approvalId: parsed.approval_id,
    invoiceId: parsed.invoice_id,
    invoice: parsed.invoice,
    invoiceHash: parsed.invoice_hash,
    merchantDid: parsed.merchant_did,
    totalCents: parsed.total_cents,
    currency: parsed.currency,
    requiredRoles: parsed.required_roles,
    approvals: { ...(child === undefined ? {} : { child }), ...(parent === undefined ? {} : { parent }) },
    status: parsed.status,
    ...(parsed.reason === null ? {} : { reason: parsed.reason }),
    ...(parsed.receipt === null ? {} : { receipt: parsed.receipt }),
    ...(parsed.commitment === null ? {} : { commitment: parsed.commitment }),
    createdAt: parsed.created_at,
    expiresAt: parsed.expires_at,
    updatedAt: parsed.updated_at,
    ...(parsed.handover === null ? {} : { handover: handoverOf(parsed.handover) }),
  };
}

/** A decoded hand-over without absent keys (`exactOptionalPropertyTypes`). */
function handoverOf(handover: {
  cause: ApprovalHandover['cause'];
  allowanceId: string;
  period?: 'day' | 'week' | undefined;
  at: number;
}): ApprovalHandover {
  const { period, ...rest } = handover;
  return period === undefined ? rest : { ...rest, period };
}

const merchantRow = z.object({
  did: z.string(),
  name: z.string(),
  public_key_jwk: jwkColumn,
  trusted_at: z.number(),
});

/** A `merchants` row as its record. */
export function toMerchant(row: unknown): MerchantRecord {
  const parsed = merchantRow.parse(row);
  return {
    did: parsed.did,
    name: parsed.name,
    publicKeyJwk: parsed.public_key_jwk,
    trustedAt: parsed.trusted_at,
  };
}

const memberNameRow = z.object({ role: roleSchema, name: z.string(), set_at: z.number() });

/** A `member_names` row as its record. */
export function toMemberName(row: unknown): MemberNameRecord {
  const parsed = memberNameRow.parse(row);
  return { role: parsed.role, name: parsed.name, setAt: parsed.set_at };
}

const timeZoneRow = z.object({ time_zone: z.string(), set_at: z.number() });

/** The `household_settings` row as the zone's record. */
export function toTimeZone(row: unknown): TimeZoneRecord {
  const parsed = timeZoneRow.parse(row);
  return { timeZone: parsed.time_zone, setAt: parsed.set_at };
}

const callApprovalStatusSchema = z.enum([
  'pending',
  'approved',
  'declined',
  'expired',
  'used',
]) satisfies z.ZodType<CallApprovalStatus>;

const callApprovalRow = z.object({
  request_id: z.string(),
  tool: z.string(),
  call: z.string(),
  call_hash: z.string(),
  required_roles: jsonColumn(z.array(roleSchema)),
  approvals: jsonColumn(z.partialRecord(roleSchema, z.string())),
  status: callApprovalStatusSchema,
  reason: z.string().nullable(),
  created_at: z.number(),
  expires_at: z.number(),
  updated_at: z.number(),
});

/** The `call_approvals` columns every select reads, in both stores (PostgreSQL casts its BIGINTs). */
export const callApprovalColumnNames =
  'request_id, tool, call, call_hash, required_roles, approvals, status, reason, created_at, expires_at, updated_at';

/** Decodes a `call_approvals` row. */
export function toCallApproval(raw: unknown): CallApprovalRecord {
  const parsed = callApprovalRow.parse(raw);
  return {
    requestId: parsed.request_id,
    tool: parsed.tool,
    call: parsed.call,
    callHash: parsed.call_hash,
    requiredRoles: parsed.required_roles,
    approvals: parsed.approvals,
    status: parsed.status,
    ...(parsed.reason === null ? {} : { reason: parsed.reason }),
    createdAt: parsed.created_at,
    expiresAt: parsed.expires_at,
    updatedAt: parsed.updated_at,
  };
}

/** A call-approval request's values in column order ({@link callApprovalColumnNames}), JSON columns as text. */
export function callApprovalParameters(record: CallApprovalRecord): unknown[] {
  return [
    record.requestId,
    record.tool,
    record.call,
    record.callHash,
    JSON.stringify(record.requiredRoles),
    JSON.stringify(record.approvals),
    record.status,
    record.reason ?? null,
    record.createdAt,
    record.expiresAt,
    record.updatedAt,
  ];
}
