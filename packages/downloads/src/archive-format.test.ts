import { describe, expect, it } from 'vitest';
import { inferArchiveFormat } from './archive-format.js';
import { crc32 } from './crc32.js';
import { huggingFaceFileUrl } from './hugging-face-url.js';

describe('inferArchiveFormat', () => {
  it('reads the extension of the URL path, ignoring the query', () => {
    expect(inferArchiveFormat('https://x/aclImdb_v1.tar.gz')).toBe('tar.gz');
    expect(inferArchiveFormat('https://x/data.tar')).toBe('tar');
    expect(inferArchiveFormat('https://x/a.TGZ?download=1')).toBe('tgz');
    expect(inferArchiveFormat('https://x/master.zip#frag')).toBe('zip');
    expect(inferArchiveFormat('https://x/nq-dev-00.jsonl.gz')).toBe('gz');
    expect(inferArchiveFormat('https://x/test.jsonl.zst')).toBe('zst');
    expect(inferArchiveFormat('https://x/train.jsonl')).toBeUndefined();
  });
});

describe('crc32', () => {
  it('matches the standard check value and works incrementally', () => {
    const data = Buffer.from('123456789');
    expect(crc32(data)).toBe(0xcbf43926);
    expect(crc32(data.subarray(4), crc32(data.subarray(0, 4)))).toBe(0xcbf43926);
  });
});

describe('huggingFaceFileUrl', () => {
  it('builds resolve URLs, honouring HF_ENDPOINT, revisions and repo types', () => {
    expect(huggingFaceFileUrl('facebook/opt-125m', 'config.json', { env: {} })).toBe('https://huggingface.co/facebook/opt-125m/resolve/main/config.json');
    expect(huggingFaceFileUrl('ought/raft', 'data/a b.csv', { repoType: 'dataset', revision: 'v1', env: { HF_ENDPOINT: 'http://127.0.0.1:9/' } })).toBe(
      'http://127.0.0.1:9/datasets/ought/raft/resolve/v1/data/a%20b.csv',
    );
    expect(() => huggingFaceFileUrl('not a repo', 'x', { env: {} })).toThrow(/owner\/name/);
    expect(() => huggingFaceFileUrl('a/b', '../x', { env: {} })).toThrow(/relative path/);
  });
});
