import { identityRoute } from '@/lib/index';

/** POST `?as=parent` `{allowanceId}`: revokes the allowance at once. */
export const POST = identityRoute('allowanceRevoke');
