import { describe, expect, it } from 'vitest';

describe('registerLocalModel', () => {
  it('lets run specs name a locally run model, which joins no family', async () => {
    const { registerLocalModel, getModel, getAllTextModels } = await import('./model-registry.js');
    expect(() => getModel('facebook/opt-flexhelm-test')).toThrow(/No model with name/);
    registerLocalModel('facebook/opt-flexhelm-test');
    expect(getModel('facebook/opt-flexhelm-test')).toEqual({ name: 'facebook/opt-flexhelm-test', group: 'facebook', tags: [] });
    expect(getAllTextModels()).not.toContain('facebook/opt-flexhelm-test');
    expect(() => registerLocalModel('no-slash')).toThrow(/organization\/name/);
  });
});
