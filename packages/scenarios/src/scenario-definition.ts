import { formatPyNumber, PyFloat } from '@flexhelm/python-compat';
import { z } from 'zod';
import { HelmError, type ArgValue } from '@flexhelm/core';
import type { Scenario } from './scenario.js';

/** How the registry builds one HELM scenario class from the `args` of a ScenarioSpec. */
export interface ScenarioDefinition {
  /** The fully qualified HELM class name, exactly as ScenarioSpecs spell it. */
  readonly className: string;
  /** The constructor's keyword arguments, in HELM's order (for error messages and listings). */
  readonly argNames: readonly string[];
  /** Validates `args` like Python's keyword binding (unknown or missing → TypeError) and builds the scenario. */
  create(args: Readonly<Record<string, ArgValue>> | ReadonlyMap<string, ArgValue>): Scenario;
}

/** Python's short class name: the last dotted component. */
export function shortClassName(className: string): string {
  return className.slice(className.lastIndexOf('.') + 1);
}

/**
 * Declares a scenario class: `shape` is a zod schema per keyword argument (use the helpers below so Python ints,
 * floats and `None` are told apart), `build` receives the validated and defaulted arguments.
 */
export function defineScenario<S extends z.ZodRawShape>(
  className: string,
  shape: S,
  build: (args: z.output<z.ZodObject<S>>) => Scenario,
): ScenarioDefinition {
  const schema = z.strictObject(shape);
  const argNames = Object.keys(shape);
  const short = shortClassName(className);
  return {
    className,
    argNames,
    create(rawArgs) {
      const args = rawArgs instanceof Map ? Object.fromEntries(rawArgs) : { ...(rawArgs as Record<string, ArgValue>) };
      const parsed = schema.safeParse(args);
      if (!parsed.success) throw argumentError(short, argNames, args, parsed.error.issues);
      return build(parsed.data);
    },
  };
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'None';
  if (typeof value === 'number' || value instanceof PyFloat) return formatPyNumber(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  return JSON.stringify(value);
}

function argumentError(short: string, argNames: string[], args: Record<string, unknown>, issues: z.core.$ZodIssue[]): HelmError {
  const accepted = argNames.length ? argNames.join(', ') : '(no arguments)';
  const problems = issues.map((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return `unexpected argument(s) ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
    }
    const name = String(issue.path[0] ?? '');
    if (!(name in args)) return `missing required argument '${name}'`;
    return `argument '${name}' ${issue.message} (got ${describeValue(args[name])})`;
  });
  return new HelmError('TypeError', `${short}: ${problems.join('; ')}. ${short} accepts: ${accepted}; fix the scenario spec's args.`);
}

/** A Python int argument (a JS integer; an integral float such as `42.0` is rejected, as HELM would choke on it). */
export function intArg(what = 'an int') {
  return z.number({ error: `must be ${what}` }).int({ error: `must be ${what}` });
}

/** A Python float argument: any number (an int is promoted, as Python does). */
export function floatArg() {
  return z
    .union([z.number(), z.instanceof(PyFloat)], { error: 'must be a number' })
    .transform((v) => (v instanceof PyFloat ? v.value : v));
}

export function stringArg() {
  return z.string({ error: 'must be a string' });
}

export function boolArg() {
  return z.boolean({ error: 'must be True or False' });
}
