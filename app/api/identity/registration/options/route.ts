import { identityRoute } from '@/lib/index';

/** POST `{code}`: registration options for the role the enrollment code is for. */
export const POST = identityRoute('registrationOptions');
