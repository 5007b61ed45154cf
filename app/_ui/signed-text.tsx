import { signedTextParts } from './format';

/**
 * Text a merchant signed, shown unambiguously (issue 26 item 3): any control, format (e.g. U+202E
 * RIGHT-TO-LEFT OVERRIDE), line or paragraph separator character is shown as a marked escape
 * such as `\u202E` instead of acting on the text around it, and the text is isolated
 * left-to-right so it cannot reorder what is next to it.
 */
export function SignedText({ text }: { readonly text: string }) {
  const parts = signedTextParts(text);
  return (
    <bdi dir="ltr" data-signed-text="">
      {parts.map((part) =>
        part.kind === 'text' ? (
          part.text
        ) : (
          <span
            key={part.offset}
            title={`${part.codePoint}: an invisible or control character in the signed text`}
            data-hidden-character={part.codePoint}
            className="mx-px rounded bg-amber-100 px-0.5 font-mono text-amber-900 ring-1 ring-amber-400"
          >
            {part.escape}
          </span>
        ),
      )}
    </bdi>
  );
}

/** Whether signed text has a character the window shows as an escape (so the card can say so). */
export function hasHiddenCharacters(text: string): boolean {
  return signedTextParts(text).some((part) => part.kind === 'escape');
}
