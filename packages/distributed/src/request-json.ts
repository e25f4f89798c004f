import { PyFloat, pyJsonDumps, pyJsonParse, type PyJsonValue } from '@flexhelm/python-compat';
import { z } from 'zod';
import { request, type Request } from '@flexhelm/core';

const number = z.union([z.number(), z.instanceof(PyFloat)]);
const requestShape = z.object({
  model: z.string(),
  embedding: z.boolean(),
  prompt: z.string(),
  temperature: number,
  num_completions: z.number().int(),
  top_k_per_token: z.number().int(),
  max_tokens: z.number().int(),
  stop_sequences: z.array(z.string()),
  echo_prompt: z.boolean(),
  top_p: number,
  presence_penalty: number,
  frequency_penalty: number,
  random: z.string().optional(),
});

/** A HELM Request as Python's `json.dumps` writes it: ints and floats stay apart, so it round-trips exactly. */
export function requestToJson(r: Request): string {
  return pyJsonDumps(r as never);
}

/** Reads `requestToJson`'s text back (job data arrives from Redis: it is checked, not trusted). */
export function requestFromJson(text: string, where = 'request'): Request {
  const parsed = pyJsonParse(text);
  if (!(parsed instanceof Map)) throw new Error(`${where}: expected a JSON object, got ${text.slice(0, 80)}`);
  const fields: Record<string, unknown> = {};
  for (const [k, v] of parsed as Map<string, PyJsonValue>) fields[k] = v;
  const checked = requestShape.safeParse(fields);
  if (!checked.success) throw new Error(`${where}: not a HELM request (${checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`);
  return request(checked.data as Partial<Request>);
}
