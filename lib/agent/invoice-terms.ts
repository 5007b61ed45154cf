import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { safeJsonParse } from '../../proxy/index';
import type { ChatEventBody } from './types';

/** The 'order' chat event. */
export type OrderEventBody = Extract<ChatEventBody, { type: 'order' }>;

const InvoicePayload = z.object({
  iss: z.string().min(1).max(500),
  jti: z.string().min(1).max(200),
  exp: z.number().int(),
  vc: z.object({
    type: z.array(z.string()).refine((types) => types.includes('Invoice')),
    credentialSubject: z.object({
      merchantId: z.string().min(1).max(500),
      merchantName: z.string().min(1).max(200),
      items: z
        .array(
          z.object({
            sku: z.string().max(100),
            name: z.string().min(1).max(200),
            qty: z.number().int().min(1),
            unitPriceCents: z.number().int().min(0),
          }),
        )
        .min(1)
        .max(100),
      totalCents: z.number().int().min(0),
      deliverTo: z.string().max(500),
    }),
  }),
});

/** The terms of a merchant-signed invoice with each line's sku, as the planner re-quotes them. */
export interface InvoiceTerms {
  readonly order: OrderEventBody;
  readonly lines: ReadonlyArray<{ readonly sku: string; readonly qty: number; readonly unitPriceCents: number }>;
}

/**
 * Reads the terms from the signed invoice's own payload (UI.md: truth comes from signatures), never
 * from what a model wrote around it. The signer must be `merchantDid` when the household pinned one;
 * the signature itself is verified by the approval request and by the payment policy.
 */
export function invoiceTerms(jws: string, merchantDid: string | undefined): InvoiceTerms | undefined {
  const segment = jws.split('.')[1];
  if (segment === undefined || jws.length > 16_384) return undefined;
  const decoded = safeJsonParse(Buffer.from(segment, 'base64url').toString('utf8'));
  if (!decoded.ok) return undefined;
  const payload = InvoicePayload.safeParse(decoded.value);
  if (!payload.success) return undefined;
  const { iss, jti, exp, vc } = payload.data;
  const subject = vc.credentialSubject;
  if (subject.merchantId !== iss || (merchantDid !== undefined && iss !== merchantDid)) return undefined;
  return {
    order: {
      type: 'order',
      invoiceId: jti,
      merchantName: subject.merchantName,
      merchantDid: iss,
      items: subject.items.map(({ name, qty, unitPriceCents }) => ({ name, qty, unitPriceCents })),
      totalCents: subject.totalCents,
      deliverTo: subject.deliverTo,
      expiresAt: new Date(exp * 1000).toISOString(),
    },
    lines: subject.items.map(({ sku, qty, unitPriceCents }) => ({ sku, qty, unitPriceCents })),
  };
}

/** The text of a tool result (its text blocks, joined). */
export function textOf(result: CallToolResult): string {
  return result.content
    .filter((block): block is { type: 'text'; text: string } => block.type === 'text')
    .map((block) => block.text)
    .join('\n');
}

/** A tool result's JSON object: its structured content, else its text parsed safely. */
export function jsonOf(result: CallToolResult): Record<string, unknown> | undefined {
  if (result.isError) return undefined;
  const structured = result.structuredContent;
  if (structured !== undefined && structured !== null && typeof structured === 'object')
    return structured as Record<string, unknown>;
  const text = textOf(result).trim();
  if (!text.startsWith('{')) return undefined;
  const parsed = safeJsonParse(text);
  return parsed.ok && typeof parsed.value === 'object' && parsed.value !== null && !Array.isArray(parsed.value)
    ? (parsed.value as Record<string, unknown>)
    : undefined;
}

/** Money as people read it: `$15.00`. */
export function dollars(cents: number): string {
  return `$${(cents / 100).toFixed(2)}`;
}
