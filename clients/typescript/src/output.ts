import type { Analysis, MultiPhotoOutput, PhotoOutput, VehicleReportOutput } from './types.ts';

/**
 * `Analysis.output` is one of three shapes. These narrow it by what the answer says it is, so a
 * caller reads `photoOutput(a).estimatedDate?.year` with the dating lens's own types.
 */
export function photoOutput(analysis: Analysis): PhotoOutput {
  if (analysis.outputSchema !== 'photo' || 'images' in analysis.output) throw new TypeError('Not a one-photo analysis: use multiPhotoOutput() or vehicleReport()');
  return analysis.output as PhotoOutput;
}

export function multiPhotoOutput(analysis: Analysis): MultiPhotoOutput {
  if (analysis.outputSchema !== 'photo' || !Array.isArray((analysis.output as { images?: unknown }).images)) throw new TypeError('Not an analysis of several photos');
  return analysis.output as MultiPhotoOutput;
}

export function vehicleReport(analysis: Analysis): VehicleReportOutput {
  if (analysis.outputSchema !== 'vehicle') throw new TypeError('Not a vehicle-condition report');
  return analysis.output as VehicleReportOutput;
}
