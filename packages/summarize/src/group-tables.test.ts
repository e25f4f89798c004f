import { expect, it } from 'vitest';
import { aggregateRowWinRates } from './group-tables.js';
import { cell, headerCell, table } from './table.js';

it('aggregateRowWinRates: ties ranked by row as Python sorts (value, row) tuples, reversed when lower is better', () => {
  const t = table('T', [headerCell('m'), headerCell('a', { lower_is_better: false }), headerCell('t', { lower_is_better: true }), headerCell('n')], [
    [cell('x'), cell(0.5), cell(1.0), cell(1)],
    [cell('y'), cell(0.5), cell(1.0), cell(2)],
    [cell('z'), cell(0.25), cell(undefined), cell(3)],
    [cell('w'), cell(undefined), cell(undefined), cell(4)],
  ]);
  // HELM 0.2.1's compute_aggregate_row_win_rates on the same table: [0.75, 0.5, 0.0, None].
  expect(aggregateRowWinRates(t)).toEqual([0.75, 0.5, 0, undefined]);
});
