import { identityRoute } from '@/lib/index';

/** POST `?as=role` `{requestId}`: declines the gated call as that role. */
export const POST = identityRoute('callDecline');
