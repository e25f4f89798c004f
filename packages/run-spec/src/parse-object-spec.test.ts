import { PyFloat, pyJsonDumps, type PyJsonValue } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { HelmError } from '@flexhelm/core';
import { parseArgValue, parseObjectSpec } from './parse-object-spec.js';

const dump = (description: string) => pyJsonDumps(parseObjectSpec(description) as unknown as PyJsonValue);

describe('parseArgValue (Python int(), then float(), then str)', () => {
  it.each([
    ['5', 5],
    ['-12', -12],
    ['+7', 7],
    [' 42 ', 42],
    ['1_000', 1000],
    ['010', 10],
    ['\t3\n', 3],
    ['\u00a0 7\u3000', 7],
    ['\u0661\u0662', 12],
    ['\uff19\uff11', 91],
  ])('int %j → %j', (text, value) => expect(parseArgValue(text)).toBe(value));

  it.each([
    ['0.3', 0.3],
    ['-2.5', -2.5],
    ['.5', 0.5],
    ['1_000.5', 1000.5],
    ['1e-3', 0.001],
  ])('float %j → %j', (text, value) => expect(parseArgValue(text)).toBe(value));

  it('integral floats are PyFloats (printed 1.0)', () => {
    expect(parseArgValue('1.0')).toBeInstanceOf(PyFloat);
    expect(pyJsonDumps(parseArgValue('1e3'))).toBe('1000.0');
    expect(pyJsonDumps(parseArgValue('5.'))).toBe('5.0');
  });

  it('inf and nan are floats, case-insensitive', () => {
    expect(pyJsonDumps(parseArgValue('inf'))).toBe('Infinity');
    expect(pyJsonDumps(parseArgValue('-Infinity'))).toBe('-Infinity');
    expect(pyJsonDumps(parseArgValue('NaN'))).toBe('NaN');
  });

  it('Unicode decimal digits count as digits for floats too', () => {
    expect(pyJsonDumps(parseArgValue('\uff11e1 '))).toBe('10.0');
  });

  it.each(['3\x1c', 'True', 'abc', '1__0', '_1', '1_', '1e', '', '0x10', '1.5.2', '"5"', 'infinit'])('%j stays a string', (text) =>
    expect(parseArgValue(text)).toBe(text),
  );
});

describe('parseObjectSpec', () => {
  it('splits the name at the first colon and arguments at every comma', () => {
    expect(dump('mmlu:subject=anatomy,method=multiple_choice_joint')).toBe(
      '{"class_name": "mmlu", "args": {"subject": "anatomy", "method": "multiple_choice_joint"}}',
    );
  });

  it('no colon: no arguments', () => {
    expect(dump('boolq')).toBe('{"class_name": "boolq", "args": {}}');
    expect(dump('')).toBe('{"class_name": "", "args": {}}');
  });

  it('values may contain = and : (split at the first =)', () => {
    expect(dump('a:x=b=c,y=d:e')).toBe('{"class_name": "a", "args": {"x": "b=c", "y": "d:e"}}');
  });

  it('keeps spaces in keys and values', () => {
    expect(dump('mmlu: subject=high school')).toBe('{"class_name": "mmlu", "args": {" subject": "high school"}}');
  });

  it('duplicate keys: last value wins at the first position', () => {
    expect(dump('boolq:model=a,x=1,model=b')).toBe('{"class_name": "boolq", "args": {"model": "b", "x": 1}}');
  });

  it('keeps integer-like keys in description order', () => {
    expect(dump('ice:b=1,2=x,1=y')).toBe('{"class_name": "ice", "args": {"b": 1, "2": "x", "1": "y"}}');
  });

  it('types values', () => {
    expect(dump('babi_qa:task=1.5,k=5,t=1.0,only_contrast=True')).toBe(
      '{"class_name": "babi_qa", "args": {"task": 1.5, "k": 5, "t": 1.0, "only_contrast": "True"}}',
    );
  });

  it.each(['mmlu:subject=philosophy,,model=text', 'mmlu:', 'mmlu:subject', 'x:a=1,b'])('%j: an argument without = is a ValueError', (d) => {
    let error: unknown;
    try {
      parseObjectSpec(d);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(HelmError);
    expect((error as HelmError).pythonClass).toBe('ValueError');
    expect((error as HelmError).message).toMatch(/^Expected <key>=<value>, got '/);
  });
});
