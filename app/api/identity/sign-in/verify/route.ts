import { identityRoute } from '@/lib/index';

/** POST `{ceremonyId, response}`: signs in the role of the passkey used. */
export const POST = identityRoute('signInVerify');
