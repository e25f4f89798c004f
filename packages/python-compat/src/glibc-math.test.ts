import { describe, expect, it } from 'vitest';
import { glibcExp } from './glibc-exp.js';
import { glibcLog } from './glibc-log.js';
import { glibcPow } from './glibc-pow.js';
import { pyLog } from './py-math.js';

describe('glibc exp, log and pow', () => {
  it("reproduces Python's math.exp where it is not correctly rounded", () => {
    // Values printed by Debian bookworm's Python 3.11 (glibc 2.36).
    expect(glibcExp(-708.3964185322641)).toBe(2.2250738585072626e-308);
    expect(glibcExp(-2)).toBe(0.1353352832366127);
    expect(glibcExp(-745.1)).toBe(5e-324);
  });

  it("reproduces math.log and float ** (glibc), including where they are not correctly rounded", () => {
    // Values printed by Debian bookworm's Python 3.11 (glibc 2.36).
    expect(glibcLog(3 / 7)).toBe(-0.8472978603872037);
    // m ** 2 is glibc pow, one ulp away from m * m here (this decides a HELM variance).
    expect(glibcPow(-1.443384274840355, 2)).toBe(2.0833581648564174);
    expect(-1.443384274840355 * -1.443384274840355).toBe(2.083358164856417);
    expect(glibcLog(1.6452596601777496)).toBe(0.4978982198930002);
    expect(pyLog(1.6452596601777496)).toBe(0.49789821989300015); // the correctly rounded value differs
  });
});
