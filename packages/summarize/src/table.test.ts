import { PyFloat } from '@flexhelm/python-compat';
import { expect, it } from 'vitest';
import { cell, headerCell, table, tableToLatex } from './table.js';

it('tableToLatex: blank columns left out, zero values printed empty, % escaped (as HELM’s table_to_latex)', () => {
  const t = table('T', [headerCell('Model/adapter'), headerCell('EM %'), headerCell('Blank'), headerCell('# eval')], [
    [cell('A'), cell(0.5), cell(undefined), cell(new PyFloat(0))],
    [cell('B'), cell(new PyFloat(1)), cell(undefined), cell(3)],
  ]);
  expect(tableToLatex(t, 'name (group)')).toBe(
    [
      '\\begin{table*}[htp]',
      '\\resizebox{\\textwidth}{!}{',
      '\\begin{tabular}{lrr}',
      '\\toprule',
      'Model/adapter & EM \\% & # eval \\\\',
      '\\midrule',
      'A & 0.5 &  \\\\',
      'B & 1.0 & 3 \\\\',
      '\\bottomrule',
      '\\end{tabular}}',
      '\\caption{Results for name (group)}',
      '\\label{fig:name (group)}',
      '\\end{table*}',
    ].join('\n'),
  );
});
