import { identityRoute } from '@/lib/index';

/** POST `?as=role` `{ceremonyId, response}`: verifies the assertion and records the approval. */
export const POST = identityRoute('approvalVerify');
