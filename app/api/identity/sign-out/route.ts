import { identityRoute } from '@/lib/index';

/** POST `?as=role`: ends that role's session. */
export const POST = identityRoute('signOut');
