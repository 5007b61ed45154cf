import type { ElicitRequest } from '@modelcontextprotocol/server';
import { matchSecretMarker, type SecretMarkers } from './match-secret-marker';

/** A field of an upstream's form that asks for a secret, and the marker it matched. */
export interface SecretFormField {
  readonly field: string;
  readonly marker: string;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * The fields of a server-initiated `elicitation/create` form that ask for a secret (SPEC §3.10):
 * the same rule the proxy applies to its own forms — name, title, description and format checked
 * against the secret markers — so an upstream cannot collect through the proxy what the proxy
 * itself would never ask for. URL-mode requests carry no fields and yield none.
 */
export function screenUpstreamForm(params: ElicitRequest['params'], markers: SecretMarkers): SecretFormField[] {
  if (params.mode === 'url' || !('requestedSchema' in params)) return [];
  const properties: Record<string, unknown> = params.requestedSchema?.properties ?? {};
  const found: SecretFormField[] = [];
  for (const [field, raw] of Object.entries(properties)) {
    const property = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {};
    const title = text(property.title);
    const description = text(property.description);
    const format = text(property.format);
    const marker = matchSecretMarker(
      {
        name: field,
        ...(title !== undefined && { title }),
        ...(description !== undefined && { description }),
        ...(format !== undefined && { format }),
      },
      markers,
    );
    if (marker !== undefined) found.push({ field, marker });
  }
  // The form's own message may ask for the secret in prose ("enter your bank password").
  const message = text(params.message);
  if (message !== undefined) {
    const marker = matchSecretMarker({ name: '', description: message }, markers);
    if (marker !== undefined) found.push({ field: '(message)', marker });
  }
  return found;
}
