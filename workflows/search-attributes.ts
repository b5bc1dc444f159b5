import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * The custom search attributes AnalyzeWorkflow is indexed by. Pure data (no node-only imports) so
 * workflow code, the API and the Temporal tooling that registers them all share this one list.
 */
export const SEARCH_ATTRIBUTES = {
  userId: defineSearchAttributeKey('LenstackUserId', SearchAttributeType.KEYWORD),
  requestId: defineSearchAttributeKey('LenstackRequestId', SearchAttributeType.KEYWORD),
  stack: defineSearchAttributeKey('LenstackStack', SearchAttributeType.KEYWORD),
  imageCount: defineSearchAttributeKey('LenstackImageCount', SearchAttributeType.INT),
  /** A batch's workflow, and every photo's analysis in it. */
  batchId: defineSearchAttributeKey('LenstackBatchId', SearchAttributeType.KEYWORD),
} as const;
