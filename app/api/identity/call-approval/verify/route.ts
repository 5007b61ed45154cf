import { identityRoute } from '@/lib/index';

/** POST `?as=role` `{ceremonyId, response}`: verifies the assertion and issues the `CallApproval`. */
export const POST = identityRoute('callApprovalVerify');
