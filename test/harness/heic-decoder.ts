import { inject } from 'vitest';
import { configureHeicDecoder } from '../../images/heic-native.ts';
import './provided.ts';

// Every test file starts with the run's HEIC decoder (HEIC_DECODER when vitest started, `auto`
// unless set): `HEIC_DECODER=wasm npm test` runs the suite on the WASM fallback.
await configureHeicDecoder({ HEIC_DECODER: inject('heicDecoder') });
