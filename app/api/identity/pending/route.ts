import { identityRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET `?as=role`: the requests waiting for that role, their terms decoded from the signed invoice. */
export const GET = identityRoute('pending');
