import { describe, expect, it } from 'vitest';
import { RouteRecorder } from './moe-routing.js';

describe('RouteRecorder.problems', () => {
  // Two rows of 3 tokens, the first token of row 1 a pad; top 2 of 4 experts.
  const mask = [[1, 1, 1], [0, 1, 1]];
  const recorder = new RouteRecorder();
  recorder.byLayer.set(0, { topK: 2, experts: Int32Array.from([1, 0, 0, 2, 2, 0, 3, 3, 1, 3, 0, 1]), weights: new Float32Array(12) });

  it('counts the real positions only: distinct unordered sets and tokens per expert', () => {
    expect(recorder.problems({ '0': { positions: 5, expert_sets: [[0, 1], [0, 2], [1, 3]], tokens_per_expert: [4, 3, 2, 1] } }, mask, 4)).toEqual([]);
  });

  it('compares only the statistics the golden states', () => {
    expect(recorder.problems({ '0': { expert_sets: [[0, 1], [0, 2], [1, 3]] } }, mask, 4)).toEqual([]);
    expect(recorder.problems({ '0': { tokens_per_expert: [4, 3, 2, 0] } }, mask, 4)).toEqual(['layer 0: tokens per expert 4,3,2,1, golden 4,3,2,0']);
  });

  it('names the layer and what differs', () => {
    const problems = recorder.problems({ '0': { positions: 6, expert_sets: [[0, 1], [0, 2]], tokens_per_expert: [4, 3, 2, 2] }, '1': { positions: 5, expert_sets: [], tokens_per_expert: [] } }, mask, 4);
    expect(problems).toEqual([
      'layer 0: 5 positions, golden 6',
      'layer 0: expert sets [[0,1],[0,2],[1,3]], golden [[0,1],[0,2]]',
      'layer 0: tokens per expert 4,3,2,1, golden 4,3,2,2',
      'layer 1: no routes recorded (the description has it dense?)',
    ]);
  });
});
