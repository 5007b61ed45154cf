import { z } from 'zod';
import { ProxyError } from '../errors';

const checkGuidance = z
  .object({
    sentence: z.string().min(1),
    remedy: z.string().min(1),
    /**
     * Checks this one reads what they establish from (a claim check after its signature check).
     * When one of them failed, this failure follows from theirs: its sentence and remedy are not
     * said, since they would state a condition nobody checked ("the invoice has expired" about an
     * invoice whose signature did not verify).
     */
    after: z.array(z.string().min(1)).optional(),
    /**
     * Clauses for `{because}` in the sentence or remedy (each with its own leading words), each
     * said only when the check it is keyed by failed too: "the parent must approve{because}" with
     * `{"within_child_limit": " because {arguments.amountCents|usd} is over $10.00"}` says "because
     * $15.00 is over $10.00" only when the limit check failed, never for a $4.00 order.
     */
    because: z.record(z.string().min(1), z.string().min(1)).optional(),
  })
  .strict();

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

/**
 * Validates `guidance.json`: every tier names only checks that have a sentence, so no raw id can
 * leak; every `after` and `because` names a check with guidance; a check's `after` checks are in
 * every tier that names it (so a path whose failure is not said still names what did fail); and
 * `{because}` appears exactly where clauses are declared.
 */
export function parseGuidance(document: unknown): Guidance {
  const parsed = guidanceSchema.safeParse(document);
  if (!parsed.success) throw new ProxyError('bundle-invalid', `guidance.json: ${z.prettifyError(parsed.error)}`);
  const invalid = (message: string) => new ProxyError('bundle-invalid', `guidance.json: ${message}`);
  const { checks, tiers } = parsed.data;
  for (const tier of tiers) {
    for (const id of tier.checks) {
      if (!Object.hasOwn(checks, id)) throw invalid(`tier ${tier.tier} names check ${id} without guidance`);
      for (const prerequisite of checks[id]?.after ?? []) {
        if (!tier.checks.includes(prerequisite))
          throw invalid(`check ${id} is said after ${prerequisite}, which tier ${tier.tier} does not name`);
      }
    }
  }
  for (const [id, entry] of Object.entries(checks)) {
    for (const named of [...(entry.after ?? []), ...Object.keys(entry.because ?? {})]) {
      if (!Object.hasOwn(checks, named)) throw invalid(`check ${id} names check ${named} without guidance`);
    }
    const placeholders = `${entry.sentence}${entry.remedy}`.includes('{because}');
    if (placeholders !== (entry.because !== undefined))
      throw invalid(`check ${id}: {because} and its clauses go together`);
  }
  return parsed.data;
}

/**
 * Renders a denial as the alternative paths to success: for each tier, what is missing and who must
 * sign it, in the guidance's own words. Every sentence is generated from a check that actually
 * failed (issue 26 item 11): a failure that follows from an earlier one (`after`) is not said, and
 * a `{because}` clause only when its own check failed. Raw check ids never appear; a failed check
 * without guidance is described generically.
 */
export function renderDenial(
  guidance: Guidance,
  failedChecks: readonly string[],
  input: Readonly<Record<string, unknown>>,
): string {
  const failed = new Set(failedChecks);
  const said = (id: string) => failed.has(id) && !(guidance.checks[id]?.after ?? []).some((other) => failed.has(other));
  const text = (id: string, template: string) => fill(template, input, clauses(guidance, id, failed));
  const paths = guidance.tiers.map((tier, index) => {
    const missing = tier.checks.filter(said);
    const remedies = [
      ...new Set(
        missing.map((id) => {
          const entry = guidance.checks[id];
          return entry ? text(id, entry.remedy) : 'satisfy a requirement of this path';
        }),
      ),
    ];
    const body = remedies.length === 0 ? 'every requirement is met' : remedies.join('; ');
    return `Path ${index + 1} (${fill(tier.title, input)}): ${body}.`;
  });
  const reasons = [
    ...new Set(
      [...failed].filter(said).flatMap((id) => {
        const entry = guidance.checks[id];
        return entry ? [text(id, entry.sentence)] : [];
      }),
    ),
  ];
  const why = reasons.length > 0 ? ` Why: ${reasons.join(' ')}` : '';
  return `Refused by ${guidance.title}. Any one of these paths would succeed: ${paths.join(' ')}${why}`;
}

/** The `{because}` clauses of a check whose own checks failed (none: `{because}` says nothing). */
function clauses(guidance: Guidance, id: string, failed: ReadonlySet<string>): string[] {
  return Object.entries(guidance.checks[id]?.because ?? {})
    .filter(([check]) => failed.has(check))
    .map(([, clause]) => clause);
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
 * → `$15.00`), and `{because}` with the clauses given. Unknown paths render as `?`; values are
 * never interpreted as templates themselves (clauses are filled before they are inserted).
 */
function fill(template: string, input: Readonly<Record<string, unknown>>, because: readonly string[] = []): string {
  const reasons = because.map((clause) => fill(clause, input));
  const withClauses = template.replace('{because}', () => reasons.join(''));
  return withClauses.replace(/\{([A-Za-z0-9_.]+)(\|usd)?\}/g, (_match, path: string, usd: string | undefined) => {
    let value: unknown = input;
    for (const segment of path.split('.')) {
      value =
        typeof value === 'object' && value !== null && Object.hasOwn(value, segment)
          ? (value as Record<string, unknown>)[segment]
          : undefined;
    }
    if (usd && typeof value === 'number') return usdOf(value);
    return typeof value === 'string' || typeof value === 'number' ? String(value) : '?';
  });
}

/**
 * Cents as dollars, exactly: `$15.00`, `-$0.50`. A number that is not a whole number of cents is
 * said as it is (`1000.4 cents`), never rounded: "$10.00 is over $10.00" must not be said of 1000.4.
 */
function usdOf(cents: number): string {
  if (!Number.isSafeInteger(cents)) return `${String(cents)} cents`;
  const sign = cents < 0 ? '-' : '';
  const whole = Math.abs(cents);
  return `${sign}$${Math.floor(whole / 100)}.${String(whole % 100).padStart(2, '0')}`;
}
