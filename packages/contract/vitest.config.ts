import { defineConfig } from 'vitest/config';
import { preset } from '@flexhelm/vitest-preset';

export default defineConfig({ ...preset, test: { ...preset.test, name: 'contract' } });
