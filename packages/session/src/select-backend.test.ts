import { afterEach, describe, expect, it } from 'vitest';
import { OrtBackend } from '@flexhelm/ort-backend';
import { hasFastIsa, OneDnnBackend, oneDnnStatus } from '@flexhelm/onednn-backend';
import { createFastestBackend, selectBackend } from './select-backend.js';

const saved = process.env.FLEXHELM_ONEDNN_DISABLE;
afterEach(() => {
  if (saved === undefined) delete process.env.FLEXHELM_ONEDNN_DISABLE;
  else process.env.FLEXHELM_ONEDNN_DISABLE = saved;
});

describe('selectBackend', () => {
  it('falls back to onnxruntime with a one-line reason when oneDNN is hidden', async () => {
    process.env.FLEXHELM_ONEDNN_DISABLE = '1';
    expect(oneDnnStatus()).toEqual({ available: false, reason: 'disabled by FLEXHELM_ONEDNN_DISABLE=1' });
    const selection = selectBackend({ dtype: 'bf16' });
    expect(selection.kind).toBe('onnxruntime');
    expect(selection.backend).toBeInstanceOf(OrtBackend);
    expect(selection.notice).toBe('backend: onnxruntime fp32 (bf16 needs oneDNN), because oneDNN is unavailable: disabled by FLEXHELM_ONEDNN_DISABLE=1');
    expect(selection.notice).not.toContain('\n');
    expect(() => new OneDnnBackend({ dtype: 'bf16' })).toThrow(/the oneDNN backend is unavailable: disabled by FLEXHELM_ONEDNN_DISABLE=1/);
    const lines: string[] = [];
    expect(createFastestBackend({ log: (l) => lines.push(l) })).toBeInstanceOf(OrtBackend);
    expect(lines).toEqual(['backend: onnxruntime fp32, because oneDNN is unavailable: disabled by FLEXHELM_ONEDNN_DISABLE=1']);
    await selection.backend.dispose();
  });

  it('picks oneDNN where it loads and the CPU has AMX or AVX-512, and says which', async () => {
    delete process.env.FLEXHELM_ONEDNN_DISABLE;
    const status = oneDnnStatus();
    const selection = selectBackend({ dtype: 'bf16' });
    if (status.available && hasFastIsa(status.features).fast) {
      expect(selection.kind).toBe('onednn');
      expect(selection.backend).toBeInstanceOf(OneDnnBackend);
      expect(selection.notice).toMatch(/^backend: oneDNN \d+\.\d+\.\d+ on (AMX|AVX-512.*) \(.+\), dtype bf16$/);
    } else {
      expect(selection.kind).toBe('onnxruntime');
      expect(selection.notice).toMatch(/^backend: onnxruntime fp32 \(bf16 needs oneDNN\), because /);
    }
    await selection.backend.dispose();
  });

  it('classifies the ISAs oneDNN reports', () => {
    const f = { version: '2.6.3', threads: 2, quantKernel: 'avx512vnni' as const, amxBf16: false, f32Impl: 'brg:avx512_core', int8Impl: '', bf16Impl: '' };
    expect(hasFastIsa({ ...f, isa: 'avx512_core_amx', bf16Impl: 'brg:avx512_core_amx_bf16' })).toEqual({ fast: true, what: 'AMX' });
    expect(hasFastIsa({ ...f, isa: 'avx512_core_bf16', bf16Impl: 'brg:avx512_core_bf16' })).toEqual({ fast: true, what: 'AVX-512 with bf16' });
    expect(hasFastIsa({ ...f, isa: 'avx512_core_vnni' })).toEqual({ fast: true, what: 'AVX-512' });
    expect(hasFastIsa({ ...f, isa: 'avx2', bf16Impl: 'ref:any' })).toEqual({ fast: false, what: 'avx2' });
  });
});
