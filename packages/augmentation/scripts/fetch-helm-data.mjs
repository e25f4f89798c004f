#!/usr/bin/env node
// Copies HELM v0.2.1's augmentation word-list files into packages/augmentation/helm-data/, where
// @flexhelm/augmentation finds them without network. Usage:
//   node scripts/fetch-helm-data.mjs --from /path/to/helm-checkout   (a clone at tag v0.2.1)
//   node scripts/fetch-helm-data.mjs                                 (downloads them from GitHub, tag v0.2.1)
// Every file is checked against the SHA-256 pinned in the package and written atomically.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BUNDLED_HELM_DATA_DIR, HELM_SOURCE_FILES } from '../dist/index.js';

const args = process.argv.slice(2);
const fromIndex = args.indexOf('--from');
if (args.some((a, i) => a !== '--from' && i !== fromIndex + 1) || (fromIndex >= 0 && !args[fromIndex + 1])) {
  console.error('usage: fetch-helm-data.mjs [--from HELM_CHECKOUT]');
  process.exit(2);
}
const from = fromIndex >= 0 ? args[fromIndex + 1] : undefined;
const url = 'https://raw.githubusercontent.com/stanford-crfm/helm/v0.2.1/src/helm/benchmark/augmentations/';

await mkdir(BUNDLED_HELM_DATA_DIR, { recursive: true });
for (const [file, sha256] of Object.entries(HELM_SOURCE_FILES)) {
  let bytes;
  if (from) {
    const path = [join(from, 'src/helm/benchmark/augmentations', file), join(from, file)].find((p) => existsSync(p));
    if (!path) {
      console.error(`${file} is not in ${from}; pass a HELM checkout at tag v0.2.1`);
      process.exit(1);
    }
    bytes = await readFile(path);
  } else {
    const response = await fetch(url + file);
    if (!response.ok) {
      console.error(`downloading ${url + file} failed with HTTP ${response.status}`);
      process.exit(1);
    }
    bytes = Buffer.from(await response.arrayBuffer());
  }
  const digest = createHash('sha256').update(bytes).digest('hex');
  if (digest !== sha256) {
    console.error(`${file} has sha256 ${digest}, expected ${sha256}: not HELM v0.2.1's file`);
    process.exit(1);
  }
  const target = join(BUNDLED_HELM_DATA_DIR, file);
  const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temp, bytes);
  await rename(temp, target);
  console.log(`${file}: ok`);
}
