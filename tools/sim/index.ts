export {
  startSimVendor,
  estimateTextTokens,
  VENDORS,
  type SimVendor,
  type SimVendorOptions,
  type SimStats,
  type VendorStats,
  type LastCall,
  type ImageSeen,
} from './app.ts';
export {
  DEFAULT_BEHAVIOUR,
  FAILURE_MODES,
  type Behaviour,
  type BehaviourPatch,
  type ConfigPatch,
  type FailureMode,
} from './behaviour.ts';
export { CACHE_RULES, type SegmentSeen } from './prompt-cache.ts';
export { NO_LIMITS, type Limits, type LimitsPatch } from './rate-limits.ts';
export { generate } from '../../samples/generate.ts';
