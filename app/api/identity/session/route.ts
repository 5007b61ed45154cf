import { identityRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET `?as=role`: who is signed in for that role. */
export const GET = identityRoute('session');
