import type { ProxyConfig } from './config';
import type { CreateProxyOptions } from './create-proxy';
import type { DownstreamSpec } from './downstream';

/** Maps a validated config file onto {@link CreateProxyOptions} (servers and reference filters). */
export function proxyOptionsFromConfig(config: ProxyConfig): CreateProxyOptions {
  const servers: Record<string, DownstreamSpec> = {};
  for (const [name, server] of Object.entries(config.servers)) {
    servers[name] =
      'command' in server
        ? {
            kind: 'stdio',
            command: server.command,
            ...(server.args && { args: server.args }),
            ...(server.env && { env: server.env }),
          }
        : { kind: 'http', url: server.url };
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
  };
}
