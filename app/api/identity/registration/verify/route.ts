import { identityRoute } from '@/lib/index';

/** POST `{ceremonyId, response}`: enrols the passkey and signs the role in. */
export const POST = identityRoute('registrationVerify');
