import { identityRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET `?as=child|parent`: the household's names for its members and its time zone. */
export const GET = identityRoute('household');
/** POST `?as=parent` `{names?, timeZone?}`: the parent changes them. */
export const POST = identityRoute('householdUpdate');
