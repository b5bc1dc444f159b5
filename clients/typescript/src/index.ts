export { Lenstack, Batches, DEFAULT_BASE_URL, type LenstackOptions, type RequestOptions } from './client.ts';
export { LenstackError, type LenstackErrorCode, type CreditShortfall } from './errors.ts';
export { photoOutput, multiPhotoOutput, vehicleReport } from './output.ts';
export { parseRetryAfter, REQUEST_ID_PATTERN, type RetryEvent, type RetryOptions, type Sleep } from './retry.ts';
export { OPERATIONS } from './operations.ts';
export type * from './types.ts';
export type { paths, components } from './generated/lenstack.ts';
/** The names a request may use, from the API document: check a name before sending it. */
export { lensNameValues as LENS_NAMES, stackNameValues as STACK_NAMES, anyLensNameValues as ANY_LENS_NAMES, errorCodeValues as ERROR_CODES } from './generated/lenstack.ts';
