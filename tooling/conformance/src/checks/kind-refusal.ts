/**
 * Whether a load error is a backend refusing a kind it does not compute (`requireKinds`' "does not compute", and the
 * family checks the backends had before it), which the runner reports as not implemented rather than failed.
 */
export function isKindRefusal(message: string): boolean {
  return /does not compute|cannot compute/.test(message);
}
