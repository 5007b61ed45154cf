import { identityRoute } from '@/lib/index';

/** POST `?as=role` `{approvalId}`: declines the request as that role. */
export const POST = identityRoute('decline');
