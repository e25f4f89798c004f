/**
 * HELM 0.2.1 `PerturbationDescription{name, robustness=False, fairness=False, computed_on="perturbed", seed=None}`.
 * Perturbation-specific subclasses append their own fields after these (e.g. `prob`, `source_class`), in order.
 */
export interface PerturbationDescription {
  name: string;
  robustness: boolean;
  fairness: boolean;
  computed_on: 'original' | 'perturbed' | 'worst';
  seed?: number;
  /** Fields that subclasses add, after the base fields (kept in insertion order). */
  [extra: string]: unknown;
}

export function perturbationDescription(
  name: string,
  fields: Partial<PerturbationDescription> = {},
): PerturbationDescription {
  const { robustness = false, fairness = false, computed_on = 'perturbed', seed, ...extra } = fields;
  return { name, robustness, fairness, computed_on, seed, ...extra } as PerturbationDescription;
}
