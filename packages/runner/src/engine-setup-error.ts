/** A setup problem the user fixes by changing options (policy, budget, dtype, prompt length): the message says how. */
export class EngineSetupError extends Error {
  override name = 'EngineSetupError';
}
