import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import type { CallContext, CallRequest } from '../gateway/types';
import { elicitationFilter, passkeyConfirmationRules } from './elicitation-filter';
import { isMissing } from './is-missing';

const request: CallRequest = {
  tool: 'pizza__order',
  toolName: 'order',
  server: { name: 'pizza', admission: 'config' },
  hasOutputSchema: false,
  credentialFields: [],
  arguments: { size: 'large' },
  inputSchema: {
    type: 'object',
    properties: { size: { type: 'string' }, address: { type: 'string', description: 'Street and number' } },
    required: ['size', 'address'],
  },
};

function contextAnswering(result: ElicitResult | Error) {
  const asked: ElicitRequest['params'][] = [];
  const context: CallContext = {
    principal: { id: 'test' },
    scope: { kind: 'session', id: 's1' },
    elicit: async (params) => {
      if (params.mode === 'url') throw new Error('the elicitation filter asks through forms only');
      asked.push(params);
      if (result instanceof Error) throw result;
      return result;
    },
  };
  return { asked, context };
}

describe('isMissing', () => {
  it.each([[undefined], [null], [''], ['  \t'], [[]], [{}]])('%j is missing', (value) => {
    expect(isMissing(value)).toBe(true);
  });
  it.each([[false], [0], ['x'], [[0]], [{ a: 1 }]])('%j is present', (value) => {
    expect(isMissing(value)).toBe(false);
  });
});

describe('elicitationFilter', () => {
  it('is a named function, so logs say which filter decided', () => {
    expect(elicitationFilter().name).toBe('elicitation');
  });

  it('allows a complete call without rewriting or asking', async () => {
    const { asked, context } = contextAnswering({ action: 'cancel' });
    const verdict = await elicitationFilter()(
      { ...request, arguments: { size: 'large', address: 'Main St 1' } },
      context,
    );
    expect(verdict).toEqual({ decision: 'allow' });
    expect(asked).toEqual([]);
  });

  it('asks through context.elicit and allows with the merged arguments', async () => {
    const { asked, context } = contextAnswering({ action: 'accept', content: { address: 'Main St 1', size: 'small' } });
    const filter = elicitationFilter({
      tools: { order: { required: [], elicit: { message: 'Where should we deliver?', fields: {} } } },
    });
    const verdict = await filter(request, context);
    expect(verdict).toEqual({
      decision: 'allow',
      request: { ...request, arguments: { size: 'large', address: 'Main St 1' } },
    });
    // The bare tool name's policy applied (search mode qualifies names as server__tool).
    expect(asked[0]).toMatchObject({ message: 'Where should we deliver?', requestedSchema: { required: ['address'] } });
  });

  it('denies with the structured result as JSON when the user declines', async () => {
    const { context } = contextAnswering({ action: 'decline' });
    const verdict = await elicitationFilter()(request, context);
    expect(verdict.decision).toBe('deny');
    const reason = verdict.decision === 'deny' ? (JSON.parse(verdict.reason) as Record<string, unknown>) : {};
    expect(reason).toMatchObject({
      error: 'tool_call_blocked',
      tool: 'pizza__order',
      reason: 'elicitation_declined',
      missing_or_ambiguous: ['address'],
    });
    expect(reason.message).toMatch(/declined/);
  });

  it('denies with elicitation_unsupported when the client cannot show forms', async () => {
    const verdict = await elicitationFilter()(request, {
      principal: { id: 'test' },
      scope: { kind: 'session' as const, id: 's1' },
    });
    expect(verdict.decision === 'deny' && JSON.parse(verdict.reason)).toMatchObject({
      reason: 'elicitation_unsupported',
    });
  });

  it('denies with elicitation_failed when the form request throws', async () => {
    const { context } = contextAnswering(new Error('timed out'));
    const verdict = await elicitationFilter()(request, context);
    expect(verdict.decision === 'deny' && JSON.parse(verdict.reason)).toMatchObject({ reason: 'elicitation_failed' });
  });

  it('never asks for a secret, whatever else is missing', async () => {
    const { asked, context } = contextAnswering({ action: 'accept', content: {} });
    const verdict = await elicitationFilter()(
      {
        ...request,
        arguments: {},
        inputSchema: {
          type: 'object',
          properties: { card_number: { type: 'string' } },
          required: ['size', 'card_number'],
        },
      },
      context,
    );
    expect(verdict.decision === 'deny' && JSON.parse(verdict.reason)).toMatchObject({
      reason: 'sensitive_required_field',
      missing_or_ambiguous: ['card_number'],
    });
    expect(asked).toEqual([]);
  });

  it('refuses to put a non-primitive field in a form and says what to supply', async () => {
    const { asked, context } = contextAnswering({ action: 'accept', content: {} });
    const verdict = await elicitationFilter()(
      {
        ...request,
        arguments: {},
        inputSchema: { type: 'object', properties: { items: { type: 'array' } }, required: ['items'] },
      },
      context,
    );
    expect(verdict.decision === 'deny' && JSON.parse(verdict.reason)).toMatchObject({
      reason: 'required_fields_missing_or_empty',
      missing_or_ambiguous: ['items'],
    });
    expect(asked).toEqual([]);
  });

  it('honours schema_required: false (only configured fields are required)', async () => {
    const { context } = contextAnswering({ action: 'cancel' });
    const verdict = await elicitationFilter({ policies: { schemaRequired: { enabled: false } } })(request, context);
    expect(verdict).toEqual({ decision: 'allow' });
  });
});

describe('confirm_if with passkey', () => {
  const cancel: CallRequest = {
    ...request,
    tool: 'pizza__cancel_order',
    toolName: 'cancel_order',
    arguments: { invoiceId: 'urn:uuid:1' },
    inputSchema: { type: 'object', properties: { invoiceId: { type: 'string' } }, required: ['invoiceId'] },
  };
  const tools = { pizza__cancel_order: { required: [], confirmIf: { always: true, passkey: ['child'] } } };

  it('never shows a form: without approval windows the call is refused (fail closed)', async () => {
    const { asked, context } = contextAnswering({ action: 'accept', content: { confirm: true } });
    const verdict = await elicitationFilter({ tools })(cancel, context);
    expect(asked).toEqual([]);
    if (verdict.decision !== 'deny') throw new Error('expected a refusal');
    expect(JSON.parse(verdict.reason)).toMatchObject({
      reason: 'confirmation_unavailable',
      message: expect.stringMatching(
        /^"pizza__cancel_order" runs only after the child confirms the exact call with a passkey/,
      ),
    });
  });

  it('where the host gates it, leaves the call to approval_required, with the rule for its roles', async () => {
    const { asked, context } = contextAnswering({ action: 'accept', content: { confirm: true } });
    const verdict = await elicitationFilter({ tools, passkeyConfirmations: 'approval-required' })(cancel, context);
    expect(verdict).toEqual({ decision: 'allow' });
    expect(asked).toEqual([]);
    expect(passkeyConfirmationRules({ ...tools, other: { required: [], confirmIf: { always: true } } })).toEqual([
      { tool: 'pizza__cancel_order', roles: ['child'] },
    ]);
  });
});
