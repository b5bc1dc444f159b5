import { useCallback, useState } from 'react';
import { useQueryClient, type QueryKey } from '@tanstack/react-query';
import { ConsoleError } from './api.ts';

export interface ActionJob<R> {
  /** The call to the server. */
  run: () => Promise<R>;
  /** Said when the failure is not one of the server's own messages (a network error, a crash). */
  fallback: string;
  /** Said, politely (role="status"), when it worked. */
  done?: string | ((result: R) => string);
  /** The cached data it changed, refetched before `done` is said. */
  invalidate?: QueryKey[];
  /** What else follows success (the session refreshed, another address). */
  after?: (result: R) => void | Promise<void>;
}

/**
 * The one way a console section runs an action: busy while it runs (buttons disabled), the
 * server's own message when it is refused, a confirmation when it worked, and the cached data it
 * changed refetched. Returns the result, or undefined when it failed (the error is on the hook).
 */
export function useAction() {
  const client = useQueryClient();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const run = useCallback(
    async <R,>(job: ActionJob<R>): Promise<R | undefined> => {
      setBusy(true);
      setError(null);
      setMessage(null);
      try {
        const result = await job.run();
        await Promise.all((job.invalidate ?? []).map((queryKey) => client.invalidateQueries({ queryKey })));
        await job.after?.(result);
        if (job.done) setMessage(typeof job.done === 'string' ? job.done : job.done(result));
        return result;
      } catch (err) {
        setError(err instanceof ConsoleError ? err.message : job.fallback);
        return undefined;
      } finally {
        setBusy(false);
      }
    },
    [client],
  );
  const clear = useCallback(() => {
    setError(null);
    setMessage(null);
  }, []);
  /** Says what is wrong before anything is sent (a check the page can make itself). */
  const fail = useCallback((text: string) => {
    setMessage(null);
    setError(text);
  }, []);
  return { run, busy, error, message, clear, fail };
}

export type Action = ReturnType<typeof useAction>;
