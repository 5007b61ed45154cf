import { identityRoute } from '@/lib/index';

/** POST `?as=role` `{requestId}`: assertion options whose challenge is the gated call's hash. */
export const POST = identityRoute('callApprovalOptions');
