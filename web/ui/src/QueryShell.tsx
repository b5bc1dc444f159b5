import type { ReactNode } from 'react';
import { QueryClientProvider } from '@tanstack/react-query';
import { queryClient } from './query.ts';

/**
 * The data cache around a signed-in section. Loaded with the first section, not with sign-in
 * (docs/decisions.md "The console's sections and its front-end shape"); every section shares the one client, so the cache
 * outlives moving between them.
 */
export default function QueryShell({ children }: { children: ReactNode }) {
  return <QueryClientProvider client={queryClient}>{children}</QueryClientProvider>;
}
