import { dollars } from './invoice-terms';

/** Longest one-line summary the chat shows for a tool step. */
const maxSummary = 240;

/** What a step does, in words (UI.md: "asked the shop for a signed invoice"). */
const labels: Readonly<Record<string, string>> = {
  pizza__get_menu: 'asked the shop for its menu',
  pizza__negotiate: 'asked the shop clerk for better terms',
  pizza__request_invoice: 'asked the shop for a signed invoice',
  pizza__fulfill: 'gave the shop the payment receipt',
  pizza__merchant_card: 'asked the shop for its merchant card',
  request_approval: 'asked the household to approve the invoice',
  await_approval: "checked on the household's approval",
  record_fulfillment: "recorded the shop's signed delivery commitment",
  payments__charge_invoice: 'asked payments to charge the invoice',
};

/** The one-line summary of a meta-tool call before it runs. */
export function callSummary(tool: string, args: Readonly<Record<string, unknown>>): string {
  if (tool === 'search_tools') return clip(`searching tools: ${String(args.query ?? '')}`);
  if (tool === 'load_mcp_server') return clip(`asked to load the server "${String(args.server_name ?? '')}"`);
  if (tool === 'call_tool') {
    const name = String(args.tool_name ?? '');
    return clip(labels[name] ?? `called ${name}`);
  }
  return clip(`called ${tool}`);
}

/** The one-line summary of a meta-tool's result ("searched tools: pizza menu → 3 found", "policy refused: …"). */
export function resultSummary(input: {
  readonly tool: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly isError: boolean;
  readonly text: string;
  readonly json: Readonly<Record<string, unknown>> | undefined;
}): string {
  const { tool, args, json } = input;
  if (input.isError) {
    const reason = firstLine(input.text);
    return clip(
      /^refused by /i.test(reason) ? `policy refused: ${reason.replace(/^refused by /i, '')}` : `refused: ${reason}`,
    );
  }
  if (tool === 'search_tools') {
    const results = Array.isArray(json?.results) ? json.results.length : 0;
    return clip(`searched tools: ${String(args.query ?? '')} → ${results} found`);
  }
  if (tool !== 'call_tool') return clip(firstLine(input.text));
  switch (String(args.tool_name ?? '')) {
    case 'pizza__get_menu':
      return `the shop's menu: ${Array.isArray(json?.items) ? json.items.length : 0} items`;
    case 'pizza__negotiate': {
      const total = (json?.proposal as { totalCents?: unknown } | undefined)?.totalCents;
      return typeof total === 'number' ? `the clerk proposed ${dollars(total)} (not binding)` : 'the clerk answered';
    }
    case 'pizza__request_invoice': {
      const total = (json?.terms as { totalCents?: unknown } | undefined)?.totalCents;
      return typeof total === 'number'
        ? `the shop signed an invoice for ${dollars(total)}`
        : 'the shop signed an invoice';
    }
    case 'request_approval': {
      const roles = Array.isArray(json?.requiredRoles) ? (json.requiredRoles as string[]) : [];
      return `approval requested from the ${roles.join(' and the ')}`;
    }
    case 'payments__charge_invoice':
      return typeof json?.amountCents === 'number'
        ? clip(`paid ${dollars(json.amountCents)} (payment ${String(json.paymentRef ?? '')})`)
        : 'payment answered';
    case 'pizza__fulfill':
      return typeof json?.etaMinutes === 'number'
        ? `the shop signed a commitment to deliver in ${json.etaMinutes} minutes`
        : 'the shop signed a delivery commitment';
    case 'record_fulfillment':
      return 'the order’s evidence chain is complete';
    default:
      return clip(firstLine(input.text));
  }
}

function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? 'no answer'
  );
}

function clip(text: string): string {
  return text.length <= maxSummary ? text : `${text.slice(0, maxSummary - 1)}…`;
}
