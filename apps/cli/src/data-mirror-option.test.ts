import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LoopbackFileServer, tarArchive } from '@flexhelm/downloads/testing';
import { instancesCommand } from './commands/instances.js';
import { promptsCommand } from './commands/prompts.js';
import { runCommand } from './commands/run.js';
import { DATA_MIRROR_OPTIONS } from './data-mirror-option.js';
import { runInProcess } from './run-in-process.js';

describe('--data-mirror (alias --base-url)', () => {
  it('is one option definition shared by run, instances and prompts', () => {
    for (const command of [runCommand, instancesCommand, promptsCommand]) {
      expect(command.options['data-mirror'], command.name).toBe(DATA_MIRROR_OPTIONS['data-mirror']);
      expect(command.options['base-url'], command.name).toBe(DATA_MIRROR_OPTIONS['base-url']);
    }
  });

  it('fetches scenario files from the mirror under either name, and explains bad values', async () => {
    const server = await LoopbackFileServer.start();
    try {
      server.set(
        '/people.eecs.berkeley.edu/~hendrycks/data.tar',
        tarArchive({
          'data/dev/anatomy_dev.csv': 'Dev question?,one,two,three,four,A\n',
          'data/val/anatomy_val.csv': 'Valid question?,one,two,three,four,C\n',
          'data/test/anatomy_test.csv': 'Test question?,one,two,three,four,D\n',
        }),
      );
      const instances = (...args: string[]) => runInProcess(instancesCommand, ['-d', 'mmlu:subject=anatomy', '--counts', ...args]);
      const outputs = [];
      for (const flag of ['--data-mirror', '--base-url']) {
        const root = mkdtempSync(join(tmpdir(), 'flexhelm-mirror-'));
        const r = await instances(flag, server.baseUrl, '-o', join(root, 'out'), '--data-dir', join(root, 'data'));
        expect(r.stderr, flag).toBe('');
        expect(r.status, flag).toBe(0);
        outputs.push(r.stdout);
      }
      expect(JSON.parse(outputs[0]!)).toEqual({ total: 3, train: 1, valid: 1, test: 1 });
      expect(outputs[1]).toBe(outputs[0]);

      const both = await instances('--data-mirror', server.baseUrl, '--base-url', 'http://127.0.0.1:1');
      expect(both.status).toBe(2);
      expect(both.stderr).toMatch(/--base-url is the older name of --data-mirror; give one of them/);
      const notUrl = await runInProcess(promptsCommand, ['-d', 'mmlu:subject=anatomy,model=together/opt-66b', '--data-mirror', 'mirror.local']);
      expect(notUrl.status).toBe(2);
      expect(notUrl.stderr).toMatch(/--data-mirror must be an http:\/\/ or https:\/\/ URL, got 'mirror\.local'/);
    } finally {
      await server.close();
    }
  });
});
