/** Where API and worker find Temporal when TEMPORAL_ADDRESS is not set (npm start's dev server). */
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
