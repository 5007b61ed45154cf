import { shopMcpRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** The household's shop served transparently (its own tools, the household's approvals): 404 unless `EXTENSIBLE_MCP_HTTP_TOKEN` is set. */
export const GET = shopMcpRoute;
export const POST = shopMcpRoute;
export const DELETE = shopMcpRoute;
