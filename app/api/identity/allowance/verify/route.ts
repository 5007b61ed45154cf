import { identityRoute } from '@/lib/index';

/** POST `?as=parent` `{ceremonyId, response}`: the household signs and stores the parent's `Allowance`. */
export const POST = identityRoute('allowanceVerify');
