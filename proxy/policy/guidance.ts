import { z } from 'zod';
import { ProxyError } from '../errors';

const checkGuidance = z.object({ sentence: z.string().min(1), remedy: z.string().min(1) }).strict();

/** `guidance.json` (SPEC §4.6): per-check sentence and remedy, the tiers as paths, who provides which credential. */
export const guidanceSchema = z
  .object({
    /** How the policy is named to the model ("the spending policy"). */
    title: z.string().min(1),
    checks: z.record(z.string().min(1), checkGuidance),
    tiers: z
      .array(
        z
          .object({ tier: z.string().min(1), title: z.string().min(1), checks: z.array(z.string().min(1)).min(1) })
          .strict(),
      )
      .min(1),
    /** Which credentials each role provides, and the plain sentence the search augmenter adds per credential. */
    credentials: z.record(
      z.string().min(1),
      z.object({ role: z.string().min(1), signedBy: z.string().min(1), sentence: z.string().min(1) }).strict(),
    ),
  })
  .strict();

/** A validated `guidance.json`. */
export type Guidance = z.infer<typeof guidanceSchema>;

/** Validates `guidance.json`: every tier names only checks that have a sentence, so no raw id can leak. */
export function parseGuidance(document: unknown): Guidance {
  const parsed = guidanceSchema.safeParse(document);
  if (!parsed.success) throw new ProxyError('bundle-invalid', `guidance.json: ${z.prettifyError(parsed.error)}`);
  for (const tier of parsed.data.tiers) {
    for (const id of tier.checks) {
      if (!(id in parsed.data.checks))
        throw new ProxyError('bundle-invalid', `guidance.json: tier ${tier.tier} names check ${id} without guidance`);
    }
  }
  return parsed.data;
}

/**
 * Renders a denial as the alternative paths to success: for each tier, what is missing and who must
 * sign it, in the guidance's own words. Raw check ids never appear; a failed check without
 * guidance is described generically.
 */
export function renderDenial(
  guidance: Guidance,
  failedChecks: readonly string[],
  input: Readonly<Record<string, unknown>>,
): string {
  const failed = new Set(failedChecks);
  const paths = guidance.tiers.map((tier, index) => {
    const missing = tier.checks.filter((id) => failed.has(id));
    const remedies = [
      ...new Set(missing.map((id) => guidance.checks[id]?.remedy ?? 'satisfy a requirement of this path')),
    ];
    const body =
      remedies.length === 0 ? 'every requirement is met' : remedies.map((remedy) => fill(remedy, input)).join('; ');
    return `Path ${index + 1} (${fill(tier.title, input)}): ${body}.`;
  });
  const reasons = [
    ...new Set([...failed].flatMap((id) => (guidance.checks[id] ? [fill(guidance.checks[id].sentence, input)] : []))),
  ];
  const why = reasons.length > 0 ? ` Why: ${reasons.join(' ')}` : '';
  return `Refused by ${guidance.title}. Any one of these paths would succeed: ${paths.join(' ')}${why}`;
}

/** Renders "the call lacks a required input" naming the field (and who provides it, when it is a credential). */
export function renderMissing(guidance: Guidance, field: string, kind: 'missing' | 'invalid'): string {
  const credential = guidance.credentials[field];
  const who = credential ? ` (provided by ${credential.signedBy})` : '';
  const what = kind === 'missing' ? `is missing \`${field}\`${who}` : `has an invalid \`${field}\`${who}`;
  return `Refused by ${guidance.title}: the call ${what}. ${credential ? credential.sentence : ''}`.trim();
}

/**
 * Fills `{path}` and `{path|usd}` placeholders from the assembled input (`{arguments.amountCents|usd}`
 * → `$15.00`). Unknown paths render as `?`; values are never interpreted as templates themselves.
 */
function fill(template: string, input: Readonly<Record<string, unknown>>): string {
  return template.replace(/\{([A-Za-z0-9_.]+)(\|usd)?\}/g, (_match, path: string, usd: string | undefined) => {
    let value: unknown = input;
    for (const segment of path.split('.')) {
      value =
        typeof value === 'object' && value !== null && Object.hasOwn(value, segment)
          ? (value as Record<string, unknown>)[segment]
          : undefined;
    }
    if (usd && typeof value === 'number' && Number.isFinite(value)) return `$${(value / 100).toFixed(2)}`;
    return typeof value === 'string' || typeof value === 'number' ? String(value) : '?';
  });
}
