import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('@flexhelm/cost-model', () => {
  it('loads no native addon and no onnxruntime when imported', () => {
    // A fresh process, so what other tests loaded does not count; its report lists every shared object mapped.
    const script =
      "await import('@flexhelm/cost-model');" +
      "const loaded = process.report.getReport().sharedObjects.filter((p) => /\\.node$|onnxruntime|dnnl/.test(p));" +
      'console.log(JSON.stringify(loaded));';
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('..', import.meta.url), encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([]);
  });
});
