/** One tool step, compact: what the agent asked and what came back; the names on demand. */
export function ToolRow({
  tool,
  callId,
  summary,
  result,
}: {
  readonly tool: string;
  readonly callId: string;
  readonly summary: string;
  readonly result?: { readonly summary: string; readonly isError: boolean } | undefined;
}) {
  const refused = result?.isError === true;
  return (
    <details
      className={`rounded-lg border px-3 py-2 text-sm ${
        refused ? 'border-amber-300 bg-amber-50' : 'border-slate-200 bg-white'
      }`}
    >
      <summary className="cursor-pointer list-inside">
        <span className="text-slate-800">{summary}</span>
        {result === undefined ? (
          <span className="text-slate-500"> — working…</span>
        ) : (
          <span className={refused ? 'text-amber-900' : 'text-slate-600'}>
            {' '}
            → {refused && !/^refused\b/i.test(result.summary) ? 'refused: ' : ''}
            {result.summary}
          </span>
        )}
      </summary>
      <dl className="mt-2 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-xs text-slate-600">
        <dt>Tool</dt>
        <dd className="font-mono">{tool}</dd>
        <dt>Call</dt>
        <dd className="font-mono">{callId}</dd>
      </dl>
    </details>
  );
}
