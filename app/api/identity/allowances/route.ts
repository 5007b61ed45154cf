import { identityRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET `?as=parent`: the standing allowances, with what each has left, and the merchants one can be set at. */
export const GET = identityRoute('allowances');
