import Anthropic from '@anthropic-ai/sdk';
import { ApiError } from '@google/genai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { fromAnthropicError } from '../../vendors/anthropic/index.ts';
import { kindForStatus, VendorError } from '../../vendors/errors.ts';
import { fromGoogleError } from '../../vendors/google/index.ts';
import { fromOpenAIError } from '../../vendors/openai/index.ts';

/** Each SDK's own error classes, built the way the SDK builds them, mapped to VendorError. */

const STATUS_TABLE = [
  [400, 'rejected'],
  [401, 'rejected'],
  [402, 'rejected'],
  [403, 'rejected'],
  [404, 'rejected'],
  [408, 'unavailable'],
  [409, 'unavailable'],
  [413, 'rejected'],
  [422, 'rejected'],
  [429, 'unavailable'],
  [500, 'unavailable'],
  [502, 'unavailable'],
  [503, 'unavailable'],
  [529, 'unavailable'],
] as const;

describe('kindForStatus', () => {
  it.each(STATUS_TABLE)('HTTP %i → %s', (status, kind) => {
    expect(kindForStatus(status)).toBe(kind);
  });
});

describe('VendorError', () => {
  it('is retryable exactly when unavailable, and names the API error code it becomes', () => {
    expect(new VendorError('openai', 'unavailable', 'x')).toMatchObject({ retryable: true, appCode: 'PROVIDER_UNAVAILABLE' });
    expect(new VendorError('openai', 'rejected', 'x')).toMatchObject({ retryable: false, appCode: 'PROVIDER_ERROR' });
    expect(new VendorError('openai', 'invalid_output', 'x')).toMatchObject({ retryable: false, appCode: 'PROVIDER_ERROR' });
  });
});

describe('OpenAI SDK errors', () => {
  it.each(STATUS_TABLE)('APIError.generate(%i) → %s', (status, kind) => {
    const sdkError = OpenAI.APIError.generate(status, { error: { message: 'm' } }, undefined, new Headers());
    expect(fromOpenAIError(sdkError, undefined)).toMatchObject({ vendor: 'openai', kind, status, retryable: kind === 'unavailable' });
  });
  it('abort, timeout and connection errors', () => {
    expect(fromOpenAIError(new OpenAI.APIUserAbortError(), undefined)).toMatchObject({ kind: 'unavailable', aborted: true });
    expect(fromOpenAIError(new OpenAI.APIConnectionTimeoutError(), undefined)).toMatchObject({ kind: 'unavailable', aborted: false });
    expect(fromOpenAIError(new OpenAI.APIConnectionError({ message: 'ECONNRESET' }), undefined)).toMatchObject({ kind: 'unavailable', retryable: true });
  });
});

describe('Anthropic SDK errors', () => {
  it.each(STATUS_TABLE)('APIError.generate(%i) → %s', (status, kind) => {
    const body = { type: 'error', error: { type: 'api_error', message: 'm' } };
    const sdkError = Anthropic.APIError.generate(status, body, undefined, new Headers());
    expect(fromAnthropicError(sdkError, undefined)).toMatchObject({ vendor: 'anthropic', kind, status, retryable: kind === 'unavailable' });
  });
  it('abort, timeout and connection errors', () => {
    expect(fromAnthropicError(new Anthropic.APIUserAbortError(), undefined)).toMatchObject({ kind: 'unavailable', aborted: true });
    expect(fromAnthropicError(new Anthropic.APIConnectionTimeoutError(), undefined)).toMatchObject({ kind: 'unavailable', aborted: false });
    expect(fromAnthropicError(new Anthropic.APIConnectionError({ message: 'socket hang up' }), undefined)).toMatchObject({ kind: 'unavailable' });
  });
});

describe('@google/genai errors', () => {
  it.each(STATUS_TABLE)('ApiError(%i) → %s', (status, kind) => {
    expect(fromGoogleError(new ApiError({ message: '{}', status }), undefined)).toMatchObject({ vendor: 'google', kind, status });
  });
  it('our abort wins over whatever fetch threw; its own timeout and network failures are unavailable', () => {
    const controller = new AbortController();
    controller.abort();
    expect(fromGoogleError(new DOMException('aborted', 'AbortError'), controller.signal)).toMatchObject({ kind: 'unavailable', aborted: true });
    expect(fromGoogleError(new DOMException('timed out', 'TimeoutError'), undefined)).toMatchObject({ kind: 'unavailable', aborted: false });
    expect(fromGoogleError(new TypeError('fetch failed'), undefined)).toMatchObject({ kind: 'unavailable', retryable: true });
  });
});
