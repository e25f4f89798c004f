// Every test file gets its own temporary folder as TMPDIR (os.tmpdir() reads it on each call), removed with what the
// file left there once its tests ran: a test that forgets its mkdtemp folder, or a process it spawned, leaves nothing
// behind in the machine's /tmp (a full run left ~1 GB before).
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const outer = process.env.TMPDIR;
const base = tmpdir();

// A file whose tests are all skipped runs no afterAll, and the workers are stopped without an exit event: such
// (empty) folders are swept here once the worker that made them (its pid is in the name) is gone.
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
};
for (const name of readdirSync(base)) {
  const pid = /^flexhelm-test-(\d+)-/.exec(name)?.[1];
  if (pid && !alive(Number(pid))) rmSync(join(base, name), { recursive: true, force: true });
}

const folder = mkdtempSync(join(base, `flexhelm-test-${process.pid}-`));
// Enterable by every user as /tmp is (mkdtemp makes it 0700): tests that drop privileges reach their own folders in it.
chmodSync(folder, 0o755);
process.env.TMPDIR = folder;

afterAll(() => {
  if (outer === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = outer;
  rmSync(folder, { recursive: true, force: true });
});
