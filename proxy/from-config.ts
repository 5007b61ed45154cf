import type { ProxyConfig } from './config';
import { elicitationFilter } from './elicitation/elicitation-filter';
import type { GatewayOptions } from './gateway/create-gateway';
import type { DownstreamSpec } from './gateway/types';

/** Maps a validated config file onto {@link GatewayOptions} (servers and reference filters). */
export function gatewayOptionsFromConfig(config: ProxyConfig): GatewayOptions {
  const servers: Record<string, DownstreamSpec> = {};
  for (const [name, server] of Object.entries(config.servers)) {
    const protocol = server.protocol === undefined ? {} : { protocol: server.protocol };
    servers[name] =
      'command' in server
        ? {
            kind: 'stdio',
            command: server.command,
            ...(server.args && { args: server.args }),
            ...(server.env && { env: server.env }),
            ...protocol,
          }
        : { kind: 'http', url: server.url, ...protocol };
  }
  const { access_control: access, load_control: load, similarity_threshold: threshold } = config.filters;
  return {
    servers,
    ...(threshold !== undefined && { similarityThreshold: threshold }),
    ...(access && {
      accessControl: {
        deny: access.deny,
        denyPatterns: access.deny_patterns,
        ...(access.allow_servers && { allowServers: access.allow_servers }),
      },
    }),
    ...(load && {
      loadControl: {
        denyNames: load.deny_names,
        denyNamePatterns: load.deny_name_patterns,
        denyUrlPatterns: load.deny_url_patterns,
        allowUrlPatterns: load.allow_url_patterns,
      },
    }),
    ...(load?.allow_localhost === true && { allowLocalhostLoads: true }),
    // The YAML's defaults: required fields from the schema, secret-looking ones never asked for.
    ...(config.filters.elicit_missing === true && { elicitation: elicitationFilter() }),
    // Rules only: a config file names no approval source, so the proxy on its own refuses every
    // matching call (fail closed); the household app supplies the gate and the ledger.
    ...(config.filters.approval_required && { approvalRequired: { rules: config.filters.approval_required } }),
  };
}
