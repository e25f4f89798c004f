#!/usr/bin/env node
// `pnpm conformance`: runs the built conformance runner (build first with `pnpm build`).
import { existsSync } from 'node:fs';
const cli = new URL('../conformance/dist/cli.js', import.meta.url);
if (!existsSync(cli)) {
  console.error('the conformance runner is not built yet: run `pnpm build` first');
  process.exit(2);
}
await import(cli.href);
