import { afterAll, beforeAll, inject } from 'vitest';
import type { Config } from '../../core/config.ts';
import { configureHeicDecoder } from '../../images/heic-native.ts';

/** The two HEIC decoders the key HEIC tests run on: the system's libheif, and the WASM fallback. */
export const HEIC_DECODERS = ['native', 'wasm'] as const;
export type HeicDecoderMode = (typeof HEIC_DECODERS)[number];

/** The run's own setting (HEIC_DECODER when `vitest` started; test/harness/heic-decoder.ts applies it to every file). */
const runDefault = () => configureHeicDecoder({ HEIC_DECODER: inject('heicDecoder') });

/**
 * Inside the calling describe block, this process's HEICs go to `mode` (HEIC_DECODER), and to the
 * run's default after it. `native` fails the block when the native decoder is not built
 * (`npm run heic-decoder`; the test harness builds it when the machine can).
 */
export function withHeicDecoder(mode: HeicDecoderMode): void {
  beforeAll(async () => {
    await configureHeicDecoder({ HEIC_DECODER: mode });
  });
  afterAll(runDefault);
}

/** `run` with this process's HEICs going to the decoder `setting` names; the run's default again after it. */
export async function onHeicDecoder<T>(setting: Pick<Config, 'HEIC_DECODER' | 'HEIC_DECODER_PATH'>, run: () => Promise<T>): Promise<T> {
  await configureHeicDecoder(setting);
  try {
    return await run();
  } finally {
    await runDefault();
  }
}
