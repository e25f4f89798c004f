"""Prints CPython's own character tables as JSON for python-string's comparison test.

Ranges are [first, last] code-point pairs over the code points this Python's Unicode database assigns (category not
Cn; surrogates left out). Case maps list only the code points whose mapping is not the character itself.
"""
import json
import sys
import unicodedata


def ranges(cps):
    out = []
    for cp in cps:
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


assigned = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) != 'Cn']
tests = {
    'isupper': str.isupper, 'islower': str.islower, 'isspace': str.isspace, 'isalpha': str.isalpha,
    'isdecimal': str.isdecimal, 'isdigit': str.isdigit, 'isalnum': str.isalnum,
}
table = {'unidata_version': unicodedata.unidata_version, 'assigned': ranges(assigned)}
for name, test in tests.items():
    table[name] = ranges(cp for cp in assigned if test(chr(cp)))
for name in ('upper', 'lower', 'title', 'capitalize'):
    table[name] = {cp: getattr(chr(cp), name)() for cp in assigned if getattr(chr(cp), name)() != chr(cp)}
json.dump(table, sys.stdout)
