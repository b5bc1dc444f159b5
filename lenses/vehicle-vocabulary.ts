/**
 * Shared vocabulary of the multi-photo vehicle report: the per-photo fan-out schema
 * (vehicle-photo.ts) and the synthesis lens (vehicle-condition.ts) must speak the same words.
 */

/** The walk-around a complete inspection set covers; `missingViews` is drawn from this list. */
export const STANDARD_VEHICLE_VIEWS = [
  'front',
  'rear',
  'left',
  'right',
  'front-left',
  'front-right',
  'rear-left',
  'rear-right',
  'interior',
  'odometer',
  'vin-plate',
  'engine-bay',
] as const;

/** What a single photo can show: a standard view or a supplementary one. */
export const VEHICLE_VIEWS = [
  ...STANDARD_VEHICLE_VIEWS,
  'trunk',
  'roof',
  'undercarriage',
  'wheel-detail',
  'damage-close-up',
  'document',
  'other',
] as const;

export const VEHICLE_COMPONENTS = [
  'front-bumper',
  'rear-bumper',
  'grille',
  'hood',
  'roof',
  'trunk-tailgate',
  'front-left-fender',
  'front-right-fender',
  'rear-left-quarter-panel',
  'rear-right-quarter-panel',
  'front-left-door',
  'front-right-door',
  'rear-left-door',
  'rear-right-door',
  'left-sill',
  'right-sill',
  'windshield',
  'rear-window',
  'side-windows',
  'headlights',
  'taillights',
  'mirrors',
  'wheels-tyres',
  'seats-upholstery',
  'dashboard-controls',
  'engine-bay',
  'undercarriage',
  'other',
] as const;

export const DAMAGE_TYPES = [
  'scratch',
  'scuff',
  'dent',
  'crack',
  'chip',
  'broken',
  'missing-part',
  'rust',
  'paint-damage',
  'glass-damage',
  'tyre-wear',
  'misalignment',
  'interior-wear',
  'stain',
  'tear',
  'fluid-leak',
  'other',
] as const;

export const ACCIDENT_INDICATOR_TYPES = [
  'uneven-panel-gaps',
  'paint-mismatch',
  'overspray',
  'replaced-panel',
  'deployed-airbag',
  'crumple-damage',
  'frame-damage',
  'misaligned-lights-or-panels',
  'broken-glass',
  'fresh-repair',
  'other',
] as const;

export const CAMERA_ELEVATIONS = ['low', 'eye-level', 'high', 'overhead'] as const;
export const CAMERA_DISTANCES = ['close-up', 'medium', 'full-vehicle'] as const;

export const PHOTO_ISSUES = ['blurry', 'too-dark', 'overexposed', 'glare-reflections', 'obstructed', 'too-far', 'cropped', 'wet-or-dirty-surface', 'low-resolution'] as const;
