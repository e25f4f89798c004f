import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultCachePath, helmModelName } from './model-names.js';

const root = mkdtempSync(join(tmpdir(), 'model-names-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('helmModelName: the model a HELM run names', () => {
  it('keeps a Hub name (run names show it as model=meta-llama_Llama-3.2-1B) and gives bare OPT names facebook/', () => {
    expect(helmModelName('meta-llama/Llama-3.2-1B')).toBe('meta-llama/Llama-3.2-1B');
    expect(helmModelName('Qwen/Qwen2-0.5B')).toBe('Qwen/Qwen2-0.5B');
    expect(helmModelName('opt-1.3b')).toBe('facebook/opt-1.3b');
  });

  it('names a local folder local/<folder name>, whatever path leads to it', () => {
    const folder = join(root, 'models', 'Llama-3.2-1B random');
    mkdirSync(folder, { recursive: true });
    expect(helmModelName(folder)).toBe('local/Llama-3.2-1B_random');
    expect(helmModelName(`${folder}/`)).toBe('local/Llama-3.2-1B_random');
    expect(helmModelName(relative(process.cwd(), folder))).toBe('local/Llama-3.2-1B_random');
    // A path that does not exist (yet) is still a path when it is written as one.
    expect(helmModelName('./not-made/qwen2-tiny')).toBe('local/qwen2-tiny');
    expect(defaultCachePath('/out', helmModelName(folder))).toBe('/out/cache/local_Llama-3.2-1B_random.sqlite');
  });
});
