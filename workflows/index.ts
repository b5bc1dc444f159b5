export { analyzeWorkflow } from './analyze.ts';
