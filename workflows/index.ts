export { analyzeWorkflow } from './analyze.ts';
export { vehicleReportWorkflow } from './vehicle-report.ts';
