#!/usr/bin/env node
// Creates a workspace package with the project's layout: `node tooling/scripts/new-package.mjs packages/foo "what it does"`.
// Writes package.json (exports map to dist/), tsconfig files, vitest config, src/index.ts and a README stub.
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { join, basename, relative } from 'node:path';

const [dir, description = ''] = process.argv.slice(2);
if (!dir || !/^(packages|apps)\/[a-z0-9-]+$/.test(dir)) {
  console.error('usage: new-package.mjs packages/<kebab-name>|apps/<kebab-name> "description"');
  process.exit(2);
}
if (existsSync(dir)) {
  console.error(`${dir} already exists; refusing to overwrite it`);
  process.exit(2);
}
const name = `@flexhelm/${basename(dir)}`;
const up = relative(dir, '.') || '.';
mkdirSync(join(dir, 'src'), { recursive: true });
const pkg = {
  name,
  version: '0.0.0',
  description,
  type: 'module',
  exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
  main: './dist/index.js',
  types: './dist/index.d.ts',
  files: ['dist', 'README.md'],
  scripts: {
    build: 'tsc -p tsconfig.build.json',
    typecheck: 'tsc -p tsconfig.json --noEmit',
    lint: `node ${up}/tooling/scripts/lint.mjs .`,
    test: 'vitest run',
  },
  dependencies: {},
  devDependencies: {
    '@flexhelm/tsconfig': 'workspace:*',
    '@flexhelm/vitest-preset': 'workspace:*',
  },
};
writeFileSync(join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
writeFileSync(
  join(dir, 'tsconfig.json'),
  `${JSON.stringify({ extends: '@flexhelm/tsconfig/base.json', compilerOptions: { rootDir: 'src', outDir: 'dist' }, include: ['src'] }, null, 2)}\n`,
);
writeFileSync(
  join(dir, 'tsconfig.build.json'),
  `${JSON.stringify({ extends: './tsconfig.json', exclude: ['src/**/*.test.ts', 'src/**/test-*.ts'] }, null, 2)}\n`,
);
writeFileSync(
  join(dir, 'vitest.config.ts'),
  `import { defineConfig } from 'vitest/config';\nimport { preset } from '@flexhelm/vitest-preset';\n\nexport default defineConfig({ ...preset, test: { ...preset.test, name: '${basename(dir)}' } });\n`,
);
writeFileSync(join(dir, 'src', 'index.ts'), `export {};\n`);
writeFileSync(join(dir, 'README.md'), `# ${name}\n\n${description}\n`);
console.log(`created ${dir} (${name})`);
