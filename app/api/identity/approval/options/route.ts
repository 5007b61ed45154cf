import { identityRoute } from '@/lib/index';

/** POST `?as=role` `{approvalId}`: assertion options whose challenge is the invoice hash. */
export const POST = identityRoute('approvalOptions');
