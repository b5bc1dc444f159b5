/** What went wrong, announced to screen readers as it appears; nothing while there is nothing. */
export function ErrorNote({ text }: { text: string | null | undefined }) {
  return text ? (
    <p role="alert" className="error">
      {text}
    </p>
  ) : null;
}
