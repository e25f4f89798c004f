import { readFileSync } from 'node:fs';

const TIMING_FIELDS = ['request_time', 'request_datetime', 'batch_request_time', 'batch_size'];

/**
 * A run file with its wall-clock measurements removed: the timing fields of results and the stats derived from them
 * (`inference_runtime`, `batch_size`…), and `outputRoot` replaced by `<out>`. What two runs of the same requests must
 * agree on byte for byte, whoever computed them and when (tests of resume and of distributed runs).
 */
export function runFileWithoutTimings(path: string, outputRoot: string): string {
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) {
      return value
        .filter((v) => !(v && typeof v === 'object' && 'name' in v && /runtime|batch_size/.test((v as { name: { name?: string } }).name?.name ?? '')))
        .map(strip);
    }
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).filter(([k]) => !TIMING_FIELDS.includes(k)).map(([k, v]) => [k, strip(v)]));
    }
    return typeof value === 'string' ? value.replaceAll(outputRoot, '<out>') : value;
  };
  return JSON.stringify(strip(JSON.parse(readFileSync(path, 'utf8'))), null, 1);
}
