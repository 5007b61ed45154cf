import { mcpRoute } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** The embedded proxy for external MCP clients (Streamable HTTP): 404 unless `EXTENSIBLE_MCP_HTTP_TOKEN` is set. */
export const GET = mcpRoute;
export const POST = mcpRoute;
export const DELETE = mcpRoute;
