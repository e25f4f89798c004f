/** The Python exception class HELM 0.2.1 raises for the same bad input. */
export type PythonErrorClass =
  | 'ValueError'
  | 'TypeError'
  | 'KeyError'
  | 'IndexError'
  | 'AttributeError'
  | 'OverflowError'
  | 'AssertionError'
  | 'FileNotFoundError'
  | 'NotImplementedError'
  | 'Exception';

/**
 * An error caused by bad input, carrying the Python exception class HELM raises in the same situation (so callers and
 * the conformance check can compare) and a message that says what is wrong and how to fix it.
 */
export class HelmError extends Error {
  readonly pythonClass: PythonErrorClass;
  constructor(pythonClass: PythonErrorClass, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HelmError';
    this.pythonClass = pythonClass;
  }
}
