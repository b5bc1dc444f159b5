import { batchActivities } from './batch.ts';
import { bespokeActivities } from './bespoke.ts';
import { billingActivities } from './billing.ts';
import type { ActivityDeps } from './deps.ts';
import { photoActivities } from './photos.ts';
import { vendorActivities } from './vendors.ts';

export type { ActivityDeps } from './deps.ts';

/** Activities are built from their dependencies once per worker (their clients and pools are made once, never per call); one module per concern. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...billingActivities(deps),
    ...bespokeActivities(deps),
    ...vendorActivities(deps),
    ...batchActivities(deps),
    ...photoActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
