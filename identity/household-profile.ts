import { z } from 'zod';
import { IdentityError } from './identity-error';
import type { HouseholdProfileStore, Role } from './store';

/** Longest member name, in characters (code points): a first name or a nickname, not a sentence. */
export const maxMemberNameLength = 40;

/**
 * Characters a window could not show as they are (the set the windows escape in signed text,
 * issue 26 item 3): controls, format characters (bidirectional overrides, zero-width, tags), line
 * and paragraph separators, lone surrogates. A name is plain text, so none of them is allowed.
 */
const hiddenCharacter = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/**
 * A member's display name as the parent types it: NFC, trimmed, 1 to {@link maxMemberNameLength}
 * characters, no control or invisible character. The windows show it as text, never as markup.
 */
export const memberNameSchema = z
  .string()
  .max(400)
  .transform((name) => name.normalize('NFC').trim())
  .pipe(
    z
      .string()
      .min(1, 'a name cannot be empty')
      .refine((name) => [...name].length <= maxMemberNameLength, `a name has at most ${maxMemberNameLength} characters`)
      .refine((name) => !hiddenCharacter.test(name), 'a name has no control or invisible characters (such as U+202E)'),
  );

const zoneMessage = 'an IANA time zone name such as Europe/Paris';

/**
 * An IANA time zone name the runtime knows, as the runtime spells it (`europe/paris` →
 * `Europe/Paris`), so the zone an allowance states is the one the household stores.
 */
export const householdTimeZoneSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_+-]+(\/[A-Za-z0-9_+-]+)*$/, zoneMessage)
  .transform((name, context) => {
    try {
      return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    } catch {
      context.addIssue({ code: 'custom', message: zoneMessage });
      return z.NEVER;
    }
  });

/**
 * A change the parent makes in the window: any member's name, the household's zone, or both.
 * Closed: a field the window has no place for is refused.
 */
export const householdProfileChangeSchema = z
  .object({
    names: z.object({ child: memberNameSchema.optional(), parent: memberNameSchema.optional() }).strict().optional(),
    timeZone: householdTimeZoneSchema.optional(),
  })
  .strict()
  .refine(
    (change) => change.timeZone !== undefined || Object.keys(change.names ?? {}).length > 0,
    'say what to change: names, timeZone or both',
  );

/** A change, as {@link householdProfileChangeSchema} reads it. */
export type HouseholdProfileChange = z.input<typeof householdProfileChangeSchema>;

/** The names the household set for its members; a member without one is absent (the windows say "your child"). */
export type MemberNames = Readonly<Partial<Record<Role, string>>>;

/** What the windows show of the household itself. */
export interface HouseholdProfileView {
  readonly members: MemberNames;
  /** The IANA zone an allowance's day or week is counted in when the parent signs it. */
  readonly timeZone: string;
}

/** Changing the profile, or why not. */
export type HouseholdProfileUpdate =
  | { readonly ok: true; readonly profile: HouseholdProfileView }
  | { readonly ok: false; readonly reason: string };

/** The household's names and zone (docs/human-authority.md "Member names and the household's time zone"). */
export interface HouseholdProfile {
  read(): Promise<HouseholdProfileView>;
  /** Validates the whole change, then writes it: a refused change writes nothing. */
  update(change: HouseholdProfileChange): Promise<HouseholdProfileUpdate>;
}

/** The names the household set, by role. */
export async function memberNamesOf(store: HouseholdProfileStore): Promise<MemberNames> {
  return Object.fromEntries((await store.names()).map((record) => [record.role, record.name]));
}

/**
 * The zone this server runs in, as a household's first start stores it; `UTC` when the runtime
 * names none the household would accept.
 */
export function serverTimeZone(): string {
  const parsed = householdTimeZoneSchema.safeParse(Intl.DateTimeFormat().resolvedOptions().timeZone);
  return parsed.success ? parsed.data : 'UTC';
}

/**
 * The household's profile over its store. Who may change it is the caller's check (the parent's
 * session, in `passkeys.profile`); what a change may hold is checked here, whoever calls.
 */
export function createHouseholdProfile(options: {
  readonly store: HouseholdProfileStore;
  readonly clock?: () => Date;
}): HouseholdProfile {
  const { store } = options;
  const clock = options.clock ?? (() => new Date());

  const read = async (): Promise<HouseholdProfileView> => {
    const zone = await store.timeZone();
    // openHousehold stores a zone before anything reads it: none here is a household opened some other way.
    if (zone === undefined) throw new IdentityError('household-invalid', 'the household has no time zone');
    return { members: await memberNamesOf(store), timeZone: zone.timeZone };
  };

  return {
    read,
    async update(change) {
      const parsed = householdProfileChangeSchema.safeParse(change);
      if (!parsed.success) return { ok: false, reason: parsed.error.issues.map(describeIssue).join('; ') };
      const setAt = clock().getTime();
      const names = parsed.data.names ?? {};
      for (const role of ['child', 'parent'] as const) {
        const name = names[role];
        if (name !== undefined) await store.setName({ role, name, setAt });
      }
      if (parsed.data.timeZone !== undefined) await store.setTimeZone({ timeZone: parsed.data.timeZone, setAt });
      return { ok: true, profile: await read() };
    },
  };
}

function describeIssue(issue: z.ZodError['issues'][number]): string {
  return issue.path.length === 0 ? issue.message : `${issue.path.join('.')}: ${issue.message}`;
}
