import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';

/**
 * Stands in for the Temporal client in the hostile suites. An analyze request that passes every
 * check (auth, validation, image intake) reaches the workflow start; there this stub records it
 * and fails it at once with 502 PROVIDER_UNAVAILABLE and a message of its own, so:
 *  - an accepted hostile image is answered in milliseconds instead of waiting on a workflow that
 *    no worker will run (the suites run without a worker), and no credit can move;
 *  - "reached the pipeline" is an exact, countable fact per request id, told apart from any
 *    real 5xx by its message.
 */

export const PIPELINE_STUB_MESSAGE = 'hostile suite: accepted, the analysis pipeline is stubbed';

export interface PipelineStart {
  workflowId: string;
  /** SHA-256 of every image the request took in (AnalyzeInput.images). */
  images: string[];
}

export interface PipelineStub {
  client: Client;
  starts: PipelineStart[];
  /** Request ids (from workflow ids `analyze:<user>:<requestId>`) that reached the pipeline. */
  requestIds(): Set<string>;
}

export function pipelineStub(): PipelineStub {
  const starts: PipelineStart[] = [];
  const refuse = (options: { workflowId?: string; args?: unknown[] }) => {
    const input = (options.args?.[0] ?? {}) as { images?: Array<{ sha256?: string }> };
    starts.push({ workflowId: options.workflowId ?? '', images: (input.images ?? []).map((i) => i.sha256 ?? '') });
    return Promise.reject(ApplicationFailure.create({ type: 'PROVIDER_UNAVAILABLE', message: PIPELINE_STUB_MESSAGE, nonRetryable: true }));
  };
  const workflow = {
    start: (_wf: unknown, options: { workflowId?: string; args?: unknown[] }) => refuse(options),
    execute: (_wf: unknown, options: { workflowId?: string; args?: unknown[] }) => refuse(options),
    getHandle: (workflowId: string) => ({
      workflowId,
      result: () => Promise.reject(ApplicationFailure.create({ type: 'PROVIDER_UNAVAILABLE', message: PIPELINE_STUB_MESSAGE, nonRetryable: true })),
    }),
  };
  return {
    client: { workflow } as unknown as Client,
    starts,
    requestIds: () => new Set(starts.map((s) => s.workflowId.split(':').slice(2).join(':'))),
  };
}
