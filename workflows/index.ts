export { analyzeWorkflow } from './analyze.ts';
export { vehicleReportWorkflow } from './vehicle-report.ts';
export { batchWorkflow } from './batch.ts';
