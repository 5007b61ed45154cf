/** The longest member name the household accepts (identity's `maxMemberNameLength`). */
const maxNameLength = 40;

/**
 * One member-name field, a label and its input, for a two-column grid: the parent's enrollment
 * and the household section both ask the names this way.
 */
export function NameField(props: {
  readonly id: string;
  readonly label: string;
  readonly value: string;
  readonly onChange: (value: string) => void;
  readonly autoComplete?: string;
  readonly placeholder?: string;
}) {
  return (
    <>
      <label htmlFor={props.id} className="text-sm text-slate-700">
        {props.label}
      </label>
      <input
        id={props.id}
        maxLength={maxNameLength}
        autoComplete={props.autoComplete ?? 'off'}
        {...(props.placeholder !== undefined && { placeholder: props.placeholder })}
        value={props.value}
        onChange={(event) => props.onChange(event.target.value)}
        className="rounded-md border border-slate-300 px-3 py-1"
      />
    </>
  );
}
