import { describe, expect, it } from 'vitest';
import { VectorStore } from './vector-store';

const unit = (...values: number[]) => {
  const norm = Math.hypot(...values);
  return new Float32Array(values.map((value) => value / norm));
};

describe('VectorStore', () => {
  it('scores every stored row against a query', () => {
    const store = new VectorStore();
    store.set(0, unit(1, 0, 0, 0, 0));
    store.set(1, unit(0, 1, 0, 0, 0));
    store.set(2, unit(1, 1, 0, 0, 0));
    const scores = store.dot(unit(1, 0, 0, 0, 0), 3);
    expect(scores[0]).toBeCloseTo(1);
    expect(scores[1]).toBeCloseTo(0);
    expect(scores[2]).toBeCloseTo(Math.SQRT1_2);
    expect(store.matrix(3)).toHaveLength(15);
  });

  it('zeroes a deleted row, so a reused row never scores with an old vector', () => {
    const store = new VectorStore();
    store.set(0, unit(1, 0));
    store.set(1, unit(0, 1));
    store.delete(0);
    expect(store.has(0)).toBe(false);
    expect(store.size).toBe(1);
    expect(store.dot(unit(1, 0), 2)[0]).toBe(0);
    store.set(0, unit(1, 1));
    store.set(1, unit(1, 0));
    expect(store.size).toBe(2);
    expect(store.dot(unit(1, 0), 2)[1]).toBeCloseTo(1);
  });

  it('answers for rows past what it stores (tools not embedded yet) with zeros', () => {
    const store = new VectorStore();
    store.set(0, unit(1, 0));
    const scores = store.dot(unit(1, 0), 100);
    expect(scores).toHaveLength(100);
    expect(scores[99]).toBe(0);
    expect(store.matrix(100)).toHaveLength(200);
    expect(store.has(99)).toBe(false);
  });

  it('snapshots which rows hold a vector, unaffected by later writes', () => {
    const store = new VectorStore();
    store.set(1, unit(1, 0));
    const snapshot = store.presence(4);
    store.set(0, unit(0, 1));
    store.delete(1);
    expect([...snapshot]).toEqual([0, 1, 0, 0]);
    expect([...store.presence(2)]).toEqual([1, 0]);
  });

  it('grows past its initial capacity and refuses vectors of another width', () => {
    const store = new VectorStore();
    for (let row = 0; row < 200; row++) store.set(row, unit(row + 1, 1));
    expect(store.size).toBe(200);
    expect(store.dot(unit(1, 0), 200)[199]).toBeCloseTo(200 / Math.hypot(200, 1));
    expect(() => store.set(200, unit(1, 2, 3))).toThrow(/width 3 differs from 2/);
  });
});
