import { describe, expect, it } from 'vitest';
import { requestIdKey } from './request-id-key';

describe('requestIdKey', () => {
  it('keeps a number and a string that print alike apart', () => {
    expect(requestIdKey(1)).not.toBe(requestIdKey('1'));
    expect(new Set([1, '1', 1].map(requestIdKey)).size).toBe(2);
  });
});
