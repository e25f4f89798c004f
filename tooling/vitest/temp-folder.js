// Every test file gets its own temporary folder as TMPDIR (os.tmpdir() reads it on each call), removed with what the
// file left there once its tests ran: a test that forgets its mkdtemp folder, or a process it spawned, leaves nothing
// behind in the machine's /tmp (a full run left ~1 GB before).
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const outer = process.env.TMPDIR;
const folder = mkdtempSync(join(tmpdir(), 'flexhelm-test-'));
// Enterable by every user as /tmp is (mkdtemp makes it 0700): tests that drop privileges reach their own folders in it.
chmodSync(folder, 0o755);
process.env.TMPDIR = folder;

afterAll(() => {
  if (outer === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = outer;
  rmSync(folder, { recursive: true, force: true });
});
