import { describe, expect, it } from 'vitest';
import { MAX_JSON_TEXT_LENGTH, safeJsonParse } from './safe-json';

const parsed = (text: string) => {
  const result = safeJsonParse(text);
  if (!result.ok) throw new Error(result.reason);
  return result.value as Record<string, unknown>;
};

describe('safeJsonParse', () => {
  it('parses JSON as JSON.parse does', () => {
    const text = '{"a":[1,2.5,"x\\n",null,true],"b":{"c":"\\u00e9"},"d":-0.5e3}';
    expect(parsed(text)).toEqual(JSON.parse(text));
  });

  it.each([
    ['spelled out', '{"__proto__":{"admin":true},"keep":1}'],
    ['nested', '{"keep":1,"inner":{"__proto__":{"admin":true}}}'],
    ['in an array', '[{"__proto__":{"admin":true}}]'],
    ['escaped underscore', '{"\\u005f_proto__":{"admin":true},"keep":1}'],
    ['every character escaped', '{"\\u005f\\u005f\\u0070\\u0072\\u006f\\u0074\\u006f\\u005f\\u005f":{"admin":true}}'],
  ])('drops a __proto__ key, %s', (_label, text) => {
    const value = parsed(text);
    const objects = [value, value.inner, (value as unknown as unknown[])[0]].filter(
      (item): item is Record<string, unknown> => typeof item === 'object' && item !== null,
    );
    for (const object of objects) {
      expect(Object.hasOwn(object, '__proto__')).toBe(false);
      expect(Object.getPrototypeOf(object)).toBe(Array.isArray(object) ? Array.prototype : Object.prototype);
      expect((object as { admin?: unknown }).admin).toBeUndefined();
    }
  });

  it('refuses text that is not JSON or is too large, without throwing', () => {
    expect(safeJsonParse('{').ok).toBe(false);
    expect(safeJsonParse(' '.repeat(MAX_JSON_TEXT_LENGTH + 1)).ok).toBe(false);
  });
});
