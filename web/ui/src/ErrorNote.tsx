import type { Action } from './useAction.ts';

/** What went wrong, announced to screen readers as it appears; nothing while there is nothing. */
export function ErrorNote({ text }: { text: string | null | undefined }) {
  return text ? (
    <p role="alert" className="error">
      {text}
    </p>
  ) : null;
}

/** An action's outcome: its confirmation (role="status") or its error (role="alert"). */
export function ActionNotes({ action }: { action: Pick<Action, 'error' | 'message'> }) {
  return (
    <>
      {action.message && (
        <p role="status" className="notice">
          {action.message}
        </p>
      )}
      <ErrorNote text={action.error} />
    </>
  );
}
