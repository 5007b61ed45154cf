import { identityRoute } from '@/lib/index';

/** POST (`?as=` narrows the passkeys offered): sign-in options. */
export const POST = identityRoute('signInOptions');
