import { describe, expect, it } from 'vitest';
import { VectorStore } from './vector-store';

const unit = (...values: number[]) => {
  const norm = Math.hypot(...values);
  return new Float32Array(values.map((value) => value / norm));
};

describe('VectorStore', () => {
  it('scores every stored vector against a query', () => {
    const store = new VectorStore();
    store.set('x', unit(1, 0, 0, 0, 0));
    store.set('y', unit(0, 1, 0, 0, 0));
    store.set('xy', unit(1, 1, 0, 0, 0));
    const scores = store.dot(unit(1, 0, 0, 0, 0));
    const byName = Object.fromEntries([...scores].map((score, row) => [store.nameAt(row), score]));
    expect(byName.x).toBeCloseTo(1);
    expect(byName.y).toBeCloseTo(0);
    expect(byName.xy).toBeCloseTo(Math.SQRT1_2);
    expect(store.matrix()).toHaveLength(15);
  });

  it('reuses freed rows and replaces vectors in place', () => {
    const store = new VectorStore();
    store.set('a', unit(1, 0));
    store.set('b', unit(0, 1));
    store.delete('a');
    expect(store.has('a')).toBe(false);
    expect(store.nameAt(0)).toBeUndefined();
    store.set('c', unit(1, 1));
    expect(store.nameAt(0)).toBe('c');
    store.set('b', unit(1, 0));
    expect(store.size).toBe(2);
    expect(store.dot(unit(1, 0))[1]).toBeCloseTo(1);
  });

  it('grows past its initial capacity and refuses vectors of another width', () => {
    const store = new VectorStore();
    for (let index = 0; index < 200; index++) store.set(`t${index}`, unit(index + 1, 1));
    expect(store.size).toBe(200);
    expect(store.dot(unit(1, 0))[199]).toBeCloseTo(200 / Math.hypot(200, 1));
    expect(() => store.set('wide', unit(1, 2, 3))).toThrow(/width 3 differs from 2/);
  });
});
