import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DownloadError } from './download-error.js';
import { type DownloadProgress, ensureFileDownloaded } from './ensure-file-downloaded.js';
import { LoopbackFileServer, tarArchive, zipArchive, zstdFrame } from './testing/index.js';

// A body big enough to arrive in several chunks, with a pattern that shows any misplaced byte.
const BIG = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7 + (i >> 8)) & 0xff));
const fast = { retryDelayMs: 1, env: {} };

let server: LoopbackFileServer;
let dir: string;

beforeAll(async () => {
  server = await LoopbackFileServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flexhelm-downloads-'));
  server.requests.length = 0;
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The folder must hold exactly these names: no `.partial`, `.lock`, `.download` or unpack folders left over. */
async function expectOnly(names: string[]): Promise<void> {
  expect((await readdir(dir)).sort()).toEqual(names.sort());
}

async function failure(promise: Promise<unknown>): Promise<DownloadError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DownloadError);
  return error as DownloadError;
}

describe('plain files', () => {
  it('downloads, reports progress and leaves nothing else behind', async () => {
    server.set('/big.bin', BIG);
    const target = join(dir, 'big.bin');
    const progress: DownloadProgress[] = [];
    const path = await ensureFileDownloaded({ url: server.url('/big.bin'), targetPath: target, onProgress: (p) => progress.push(p), ...fast });
    expect(path).toBe(target);
    expect((await readFile(target)).equals(BIG)).toBe(true);
    await expectOnly(['big.bin']);
    const last = progress.at(-1);
    expect(last).toMatchObject({ phase: 'download', bytesDone: BIG.length, bytesTotal: BIG.length, targetPath: target });
    for (let i = 1; i < progress.length; i++) expect(progress[i]!.bytesDone).toBeGreaterThanOrEqual(progress[i - 1]!.bytesDone);
  });

  it('uses an existing target as is, without touching the network', async () => {
    const target = join(dir, 'words.txt');
    await writeFile(target, 'already here');
    await ensureFileDownloaded({ url: server.url('/nothing-there'), targetPath: target, ...fast });
    expect(await readFile(target, 'utf8')).toBe('already here');
    expect(server.requests).toEqual([]);
  });

  it('creates missing parent folders', async () => {
    server.set('/a.txt', 'a');
    const target = join(dir, 'x', 'y', 'a.txt');
    await ensureFileDownloaded({ url: server.url('/a.txt'), targetPath: target, ...fast });
    expect(await readFile(target, 'utf8')).toBe('a');
  });

  it('verifies sha256 and deletes a mismatching download', async () => {
    server.set('/s.txt', 'payload');
    const good = createHash('sha256').update('payload').digest('hex');
    await ensureFileDownloaded({ url: server.url('/s.txt'), targetPath: join(dir, 'ok.txt'), sha256: good.toUpperCase(), ...fast });
    expect(await readFile(join(dir, 'ok.txt'), 'utf8')).toBe('payload');
    const error = await failure(ensureFileDownloaded({ url: server.url('/s.txt'), targetPath: join(dir, 'bad.txt'), sha256: '0'.repeat(64), ...fast }));
    expect(error.failure).toBe('checksum');
    expect(error.message).toContain(`expected ${'0'.repeat(64)}, got ${good}`);
    await expectOnly(['ok.txt']);
  });

  it('rejects a malformed sha256 option before downloading', async () => {
    await expect(ensureFileDownloaded({ url: server.url('/s.txt'), targetPath: join(dir, 'x'), sha256: 'abc', ...fast })).rejects.toThrow(/64 hexadecimal digits/);
    expect(server.requests).toEqual([]);
  });
});

describe('interrupted downloads', () => {
  it('resumes with a Range request after the connection drops mid-body', async () => {
    server.set('/cut.bin', { body: BIG, cutAfterBytes: 100_000, cutTimes: 1 });
    const target = join(dir, 'cut.bin');
    await ensureFileDownloaded({ url: server.url('/cut.bin'), targetPath: target, ...fast });
    expect((await readFile(target)).equals(BIG)).toBe(true);
    // The client keeps what reached it before the cut (at most the 100000 bytes sent) and asks for the rest.
    expect(server.requests.map((r) => r.status)).toEqual([200, 206]);
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(server.requests[1]!.range ?? '')?.[1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(100_000);
    await expectOnly(['cut.bin']);
  });

  it('resumes several times as long as each attempt makes progress', async () => {
    server.set('/flaky.bin', { body: BIG, cutAfterBytes: 50_000, cutTimes: 4 });
    const target = join(dir, 'flaky.bin');
    await ensureFileDownloaded({ url: server.url('/flaky.bin'), targetPath: target, maxAttempts: 3, ...fast });
    expect((await readFile(target)).equals(BIG)).toBe(true);
    // Five requests although only three attempts in a row may fail: cut attempts that brought bytes do not count.
    const offsets = server.requests.map((r) => Number(/^bytes=(\d+)-$/.exec(r.range ?? 'bytes=0-')?.[1]));
    expect(offsets).toHaveLength(5);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThanOrEqual(offsets[i - 1]!);
    expect(offsets[4]).toBeGreaterThan(0);
  });

  it('starts over when the server ignores Range and answers 200', async () => {
    server.set('/norange.bin', { body: BIG, cutAfterBytes: 120_000, cutTimes: 1, ignoreRange: true });
    const target = join(dir, 'norange.bin');
    await ensureFileDownloaded({ url: server.url('/norange.bin'), targetPath: target, ...fast });
    expect((await readFile(target)).equals(BIG)).toBe(true);
    expect(server.requests.map((r) => r.status)).toEqual([200, 200]);
    expect(server.requests[1]!.range).toMatch(/^bytes=\d+-$/);
  });

  it('continues a .partial left by an earlier run, and finishes one that was already complete (416)', async () => {
    server.set('/left.bin', BIG);
    const target = join(dir, 'left.bin');
    await writeFile(`${target}.partial`, BIG.subarray(0, 12_345));
    await ensureFileDownloaded({ url: server.url('/left.bin'), targetPath: target, ...fast });
    expect((await readFile(target)).equals(BIG)).toBe(true);
    expect(server.requests.map((r) => [r.range, r.status])).toEqual([['bytes=12345-', 206]]);

    const done = join(dir, 'done.bin');
    await writeFile(`${done}.partial`, BIG);
    await ensureFileDownloaded({ url: server.url('/left.bin'), targetPath: done, ...fast });
    expect((await readFile(done)).equals(BIG)).toBe(true);
    expect(server.requests.at(-1)).toMatchObject({ range: `bytes=${BIG.length}-`, status: 416 });
  });

  it('gives up on a body that keeps getting cut without progress, keeping the partial file for a later resume', async () => {
    server.set('/always-cut.bin', { body: BIG, cutAfterBytes: 0, cutTimes: 100 });
    const target = join(dir, 'always-cut.bin');
    const error = await failure(ensureFileDownloaded({ url: server.url('/always-cut.bin'), targetPath: target, maxAttempts: 3, ...fast }));
    expect(error.failure).toBe('truncated');
    expect(error.message).toContain(server.url('/always-cut.bin'));
    expect(error.message).toContain(target);
    expect(error.message).toContain(`of ${BIG.length} bytes`);
    expect(server.requests).toHaveLength(3);
    await expect(stat(target)).rejects.toThrow();
  });

  it('drops a stalled response after the idle timeout and resumes', async () => {
    server.set('/stall.bin', { body: BIG, cutAfterBytes: 70_000, stallTimes: 1 });
    const target = join(dir, 'stall.bin');
    await ensureFileDownloaded({ url: server.url('/stall.bin'), targetPath: target, idleTimeoutMs: 300, ...fast });
    expect((await readFile(target)).equals(BIG)).toBe(true);
    expect(server.requests.map((r) => r.range)).toEqual([undefined, 'bytes=70000-']);
  });
});

describe('errors name the URL and the target path', () => {
  it('HTTP 404 and 500, with the status, and nothing left behind', async () => {
    server.set('/boom', { body: '', status: 500 });
    for (const [path, status] of [
      ['/missing.txt', 404],
      ['/boom', 500],
    ] as const) {
      const target = join(dir, 'f.txt');
      const error = await failure(ensureFileDownloaded({ url: server.url(path), targetPath: target, ...fast }));
      expect(error.failure).toBe('http');
      expect(error.status).toBe(status);
      expect(error.message).toContain(`HTTP ${status}`);
      expect(error.message).toContain(server.url(path));
      expect(error.message).toContain(target);
    }
    await expectOnly([]);
  });

  it('a connection failure', async () => {
    const closed = await LoopbackFileServer.start();
    const url = closed.url('/x.txt');
    await closed.close();
    const target = join(dir, 'x.txt');
    const error = await failure(ensureFileDownloaded({ url, targetPath: target, maxAttempts: 2, ...fast }));
    expect(error.failure).toBe('network');
    expect(error.message).toContain(url);
    expect(error.message).toContain(target);
    expect(error.message).toMatch(/ECONNREFUSED/);
    // A refused connection may be a server restarting: it is retried.
    expect(error.message).toMatch(/gave up after 2 attempts/);
  });

  it('a host name that does not resolve fails at once, without retries', async () => {
    // `.invalid` never resolves (RFC 6761): the resolver says so without reaching any server on the internet. With a
    // 60 s wait before a retry, finishing at all shows that none was made.
    const url = 'http://flexhelm-no-such-host.invalid/x.txt';
    const target = join(dir, 'x.txt');
    const error = await failure(ensureFileDownloaded({ url, targetPath: target, maxAttempts: 5, retryDelayMs: 60_000, env: {} }));
    expect(error.failure).toBe('network');
    expect(error.message).toMatch(/host flexhelm-no-such-host\.invalid not found \((.*)(ENOTFOUND|EAI_AGAIN)(.*)\): this machine is offline or the name is wrong; not retried/);
    expect(error.message).not.toMatch(/gave up/);
    await expectOnly([]);
  }, 30_000);
});

describe('archives', () => {
  const files = { 'data/dev/a_dev.csv': 'q,a,b,A\n', 'data/test/a_test.csv': 'x,y,z,B\n', 'data/README': 'readme' };

  it('tar.gz with one top-level folder: the folder becomes the target (HELM rule)', async () => {
    // The zeros compress far beyond 1000:1, which must not be mistaken for a zip bomb.
    server.set('/data.tar.gz', tarArchive({ ...files, 'data/zeros.bin': Buffer.alloc(3_000_000) }, { gzip: true }));
    const target = join(dir, 'data');
    const progress: DownloadProgress[] = [];
    await ensureFileDownloaded({ url: server.url('/data.tar.gz'), targetPath: target, unpack: 'auto', onProgress: (p) => progress.push(p), ...fast });
    expect(await readFile(join(target, 'dev', 'a_dev.csv'), 'utf8')).toBe('q,a,b,A\n');
    expect(await readFile(join(target, 'README'), 'utf8')).toBe('readme');
    expect((await stat(join(target, 'zeros.bin'))).size).toBe(3_000_000);
    expect(progress.some((p) => p.phase === 'unpack')).toBe(true);
    await expectOnly(['data']);
  });

  it('tar with several top-level entries: the target is the folder holding them', async () => {
    server.set('/many.tar', tarArchive({ 'one.txt': '1', 'two/2.txt': '2' }));
    const target = join(dir, 'many');
    await ensureFileDownloaded({ url: server.url('/many.tar'), targetPath: target, unpack: 'tar', ...fast });
    expect((await readdir(target)).sort()).toEqual(['one.txt', 'two']);
    expect(await readFile(join(target, 'two', '2.txt'), 'utf8')).toBe('2');
  });

  it('unpackedName picks one entry of the archive', async () => {
    server.set('/imdb.tgz', tarArchive({ 'aclImdb/train/pos/0_9.txt': 'great', 'aclImdb/README': 'r', 'other.txt': 'o' }, { gzip: true }));
    const target = join(dir, 'imdb');
    await ensureFileDownloaded({ url: server.url('/imdb.tgz'), targetPath: target, unpack: 'tgz', unpackedName: 'aclImdb', ...fast });
    expect(await readFile(join(target, 'train', 'pos', '0_9.txt'), 'utf8')).toBe('great');
    await expectOnly(['imdb']);
    const error = await failure(ensureFileDownloaded({ url: server.url('/imdb.tgz'), targetPath: join(dir, 'y'), unpack: 'tgz', unpackedName: 'nope', ...fast }));
    expect(error.message).toContain('no entry "nope"');
    expect(error.message).toContain('aclImdb, other.txt');
  });

  it('zip, with folders and UTF-8 names', async () => {
    server.set('/obqa.zip', zipArchive({ 'OpenBookQA/': '', 'OpenBookQA/Data/Main/train.jsonl': '{"id":"1"}\n', 'OpenBookQA/naïve.txt': 'é' }));
    const target = join(dir, 'openbookqa');
    await ensureFileDownloaded({ url: server.url('/obqa.zip'), targetPath: target, unpack: 'zip', ...fast });
    expect(await readFile(join(target, 'Data', 'Main', 'train.jsonl'), 'utf8')).toBe('{"id":"1"}\n');
    expect(await readFile(join(target, 'naïve.txt'), 'utf8')).toBe('é');
  });

  it('gz and zst decompress to a single file at the target', async () => {
    const { gzipSync } = await import('node:zlib');
    server.set('/nq-dev-00.jsonl.gz', gzipSync(BIG));
    server.set('/test.jsonl.zst', zstdFrame(BIG));
    await ensureFileDownloaded({ url: server.url('/nq-dev-00.jsonl.gz'), targetPath: join(dir, 'nq.jsonl'), unpack: 'auto', ...fast });
    await ensureFileDownloaded({ url: server.url('/test.jsonl.zst'), targetPath: join(dir, 'pile.jsonl'), unpack: 'auto', ...fast });
    expect((await readFile(join(dir, 'nq.jsonl'))).equals(BIG)).toBe(true);
    expect((await readFile(join(dir, 'pile.jsonl'))).equals(BIG)).toBe(true);
    await expectOnly(['nq.jsonl', 'pile.jsonl']);
  });

  it('a corrupt or truncated archive is an error, and the bad download is deleted', async () => {
    const tgz = tarArchive(files, { gzip: true });
    const zip = zipArchive({ 'a.txt': 'hello hello hello hello' });
    const badZip = Buffer.from(zip);
    badZip[30 + 'a.txt'.length + 2]! ^= 0xff; // inside the deflated data of the only entry
    const cases: [string, Buffer, 'auto' | 'zip'][] = [
      ['/garbage.tar.gz', Buffer.from('this is not a gzip stream at all'), 'auto'],
      ['/short.tar.gz', tgz.subarray(0, tgz.length - 30), 'auto'],
      ['/bad.zip', badZip, 'zip'],
      ['/notzip.zip', Buffer.from('PK nope'), 'zip'],
      ['/short.jsonl.zst', zstdFrame(BIG).subarray(0, 1000), 'auto'],
    ];
    for (const [path, body, unpack] of cases) {
      server.set(path, body);
      const target = join(dir, 'out');
      const error = await failure(ensureFileDownloaded({ url: server.url(path), targetPath: target, unpack, ...fast }));
      expect(error.failure, path).toBe('archive');
      expect(error.message).toContain(server.url(path));
      expect(error.message).toContain(target);
      await expectOnly([]);
    }
  });

  it('refuses unpack: auto when the URL does not show the format', async () => {
    const error = await failure(ensureFileDownloaded({ url: server.url('/download?id=3'), targetPath: join(dir, 'x'), unpack: 'auto', ...fast }));
    expect(error.message).toMatch(/pass unpack as one of/);
  });
});

describe('offline mode', () => {
  it('a missing file is an error naming the URL and where to put the file by hand', async () => {
    server.set('/w.txt', 'words');
    const target = join(dir, 'w.txt');
    const error = await failure(ensureFileDownloaded({ url: server.url('/w.txt'), targetPath: target, offline: true }));
    expect(error.failure).toBe('offline');
    expect(error.message).toContain(`Download ${server.url('/w.txt')} yourself and save it as ${target}`);
    const viaEnv = await failure(ensureFileDownloaded({ url: server.url('/w.txt'), targetPath: target, env: { FLEXHELM_OFFLINE: '1' } }));
    expect(viaEnv.failure).toBe('offline');
    expect(server.requests).toEqual([]);
  });

  it('an archive placed by hand at <target>.download is unpacked without the network', async () => {
    const target = join(dir, 'babi');
    const error = await failure(ensureFileDownloaded({ url: 'http://example.invalid/tasks.tar.gz', targetPath: target, unpack: 'auto', offline: true }));
    expect(error.message).toContain(`save it as ${target}.download`);
    await writeFile(`${target}.download`, tarArchive({ 'tasks_1-20_v1-2/en-valid/qa1_test.txt': '1 Mary moved.\n' }, { gzip: true }));
    await ensureFileDownloaded({ url: 'http://example.invalid/tasks.tar.gz', targetPath: target, unpack: 'auto', offline: true });
    expect(await readFile(join(target, 'en-valid', 'qa1_test.txt'), 'utf8')).toBe('1 Mary moved.\n');
    await expectOnly(['babi']);
  });

  it('an existing target is fine offline', async () => {
    await writeFile(join(dir, 'here.txt'), 'x');
    expect(await ensureFileDownloaded({ url: 'http://example.invalid/here.txt', targetPath: join(dir, 'here.txt'), offline: true })).toBe(join(dir, 'here.txt'));
  });
});

describe('concurrency and URL rewrites', () => {
  it('concurrent calls for one target download once and all get the finished file', async () => {
    server.set('/shared.tar.gz', tarArchive({ 'shared/big.bin': BIG }, { gzip: true }));
    const target = join(dir, 'shared');
    const paths = await Promise.all([1, 2, 3].map(() => ensureFileDownloaded({ url: server.url('/shared.tar.gz'), targetPath: target, unpack: 'auto', ...fast })));
    expect(paths).toEqual([target, target, target]);
    expect(server.requests).toHaveLength(1);
    expect((await readFile(join(target, 'big.bin'))).equals(BIG)).toBe(true);
    await expectOnly(['shared']);
  });

  it('breaks a lock left behind by a dead process', async () => {
    server.set('/l.txt', 'locked');
    const target = join(dir, 'l.txt');
    const deadPid = spawnSync(process.execPath, ['-e', '0']).pid;
    await writeFile(`${target}.lock`, JSON.stringify({ pid: deadPid, host: hostname(), token: 'old', since: '2020-01-01T00:00:00Z' }));
    await ensureFileDownloaded({ url: server.url('/l.txt'), targetPath: target, ...fast });
    expect(await readFile(target, 'utf8')).toBe('locked');
    await expectOnly(['l.txt']);
  });

  it('rewrites URL prefixes from the option and from FLEXHELM_URL_REWRITES', async () => {
    server.set('/mirror/data.txt', 'mirrored');
    await ensureFileDownloaded({
      url: 'https://data.example.org/pub/data.txt',
      targetPath: join(dir, 'a.txt'),
      urlRewrites: { 'https://data.example.org/pub/': server.url('/mirror/') },
      ...fast,
    });
    await ensureFileDownloaded({
      url: 'https://data.example.org/pub/data.txt',
      targetPath: join(dir, 'b.txt'),
      retryDelayMs: 1,
      env: { FLEXHELM_URL_REWRITES: JSON.stringify({ 'https://data.example.org/': server.url('/mirror/x/'), 'https://data.example.org/pub/': server.url('/mirror/') }) },
    });
    expect(await readFile(join(dir, 'a.txt'), 'utf8')).toBe('mirrored');
    expect(await readFile(join(dir, 'b.txt'), 'utf8')).toBe('mirrored');
  });
});
