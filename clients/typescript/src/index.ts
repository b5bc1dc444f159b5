export { Lenstack, Batches, DEFAULT_BASE_URL, type LenstackOptions, type RequestOptions } from './client.ts';
export { LenstackError, type LenstackErrorCode, type CreditShortfall } from './errors.ts';
export { photoOutput, multiPhotoOutput, vehicleReport } from './output.ts';
export { parseRetryAfter, REQUEST_ID_PATTERN, type RetryEvent, type RetryOptions, type Sleep } from './retry.ts';
export { OPERATIONS } from './operations.ts';
export type * from './types.ts';
export type { paths, components } from './generated/lenstack.ts';
