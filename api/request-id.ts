import { randomBytes } from 'node:crypto';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export const newRequestId = () => `req_${randomBytes(12).toString('hex')}`;

/** The caller's own x-request-id when it is safe to echo and log; undefined when absent or unsafe. */
export function callerRequestId(header: string | string[] | undefined): string | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  return v && SAFE_REQUEST_ID.test(v) ? v : undefined;
}

/** Honour a caller's x-request-id when it is safe to echo and log; otherwise mint one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return callerRequestId(header) ?? newRequestId();
}
