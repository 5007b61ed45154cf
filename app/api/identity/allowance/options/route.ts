import { identityRoute } from '@/lib/index';

/** POST `?as=parent` the allowance form: the drafted terms and assertion options over their hash. */
export const POST = identityRoute('allowanceOptions');
