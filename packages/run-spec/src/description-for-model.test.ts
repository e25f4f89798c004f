import { describe, expect, it } from 'vitest';
import { descriptionForModel } from './description-for-model.js';

describe('descriptionForModel', () => {
  it('replaces model= where it stands, or appends it', () => {
    expect(descriptionForModel('mmlu:subject=philosophy,model=text,data_augmentation=canonical', 'facebook/opt-30b')).toBe(
      'mmlu:subject=philosophy,model=facebook/opt-30b,data_augmentation=canonical',
    );
    expect(descriptionForModel('boolq', 'local/x')).toBe('boolq:model=local/x');
    expect(descriptionForModel('boolq:only_contrast=True', 'local/x')).toBe('boolq:only_contrast=True,model=local/x');
    expect(descriptionForModel('mmlu:model=a,subject=b,model=c', 'local/x')).toBe('mmlu:model=local/x,subject=b');
  });
});
