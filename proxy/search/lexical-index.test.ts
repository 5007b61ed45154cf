import { describe, expect, it } from 'vitest';
import { LexicalIndex } from './lexical-index';
import { tokenize } from './tool-index';

/** Two fields like the tool index: a boosted name and the full text. */
const newIndex = () => new LexicalIndex({ fields: [{ boost: 2 }, { boost: 1 }], tokenize });

/** Rows with a score, best first. */
const ranked = (index: LexicalIndex, query: string) => {
  const { rows, scores } = index.search(query);
  return [...rows].sort((a, b) => (scores[b] ?? 0) - (scores[a] ?? 0));
};

describe('LexicalIndex', () => {
  it('scores only the documents sharing a word with the query, best first', () => {
    const index = newIndex();
    index.add(0, ['read_file', 'read a file from disk']);
    index.add(1, ['send_email', 'send an email message']);
    index.add(2, ['list_directory', 'list the files in a directory']);
    expect(ranked(index, 'send email')).toEqual([1]);
    const { scores, best } = index.search('send email');
    expect(best).toBe(scores[1]);
    expect(scores[0]).toBe(0);
    expect(index.search('weather').rows).toEqual([]);
    expect(index.search('weather').best).toBe(0);
  });

  it('ranks a rare word above a common one, and more query words matched above fewer', () => {
    const index = newIndex();
    for (let row = 0; row < 8; row++) index.add(row, [`tool_${row}`, `create record number ${row}`]);
    index.add(8, ['invoice', 'create invoice']);
    index.add(9, ['invoice_pdf', 'render an invoice']);
    // "invoice" is rare, "create" common: both invoice tools beat the record tools, and the
    // one matching both words beats the one matching one.
    expect(ranked(index, 'create invoice').slice(0, 2)).toEqual([8, 9]);
  });

  it('boosts a match in the name field over the same match in the text', () => {
    const index = newIndex();
    index.add(0, ['archive', 'store old messages']);
    index.add(1, ['store', 'archive old messages']);
    expect(ranked(index, 'archive')).toEqual([0, 1]);
  });

  it('expands words of four letters or more to the words they start, for less than an exact match', () => {
    const index = newIndex();
    index.add(0, ['deploy', 'deploy the app']);
    index.add(1, ['deployment_status', 'status of a deployment']);
    index.add(2, ['ping', 'pin a message']);
    expect(ranked(index, 'deploy')).toEqual([0, 1]);
    // "pin" is too short to expand to "ping".
    expect(ranked(index, 'pin')).toEqual([2]);
    expect(index.search('pin').scores[2]).toBeGreaterThan(0);
    expect(ranked(index, 'pi')).toEqual([]);
  });

  it('unindexes a removed row and lets the row be reused for another document', () => {
    const index = newIndex();
    index.add(0, ['weather', 'current weather']);
    index.add(1, ['forecast', 'weather forecast']);
    index.remove(0);
    expect(index.size).toBe(1);
    expect(ranked(index, 'weather')).toEqual([1]);
    index.add(0, ['email', 'send email']);
    expect(ranked(index, 'weather')).toEqual([1]);
    expect(ranked(index, 'email')).toEqual([0]);
    index.remove(0);
    index.remove(0);
    expect(index.size).toBe(1);
    expect(ranked(index, 'email')).toEqual([]);
  });

  it('re-adding a row replaces its document', () => {
    const index = newIndex();
    index.add(0, ['weather', 'current weather']);
    index.add(0, ['email', 'send email']);
    expect(index.size).toBe(1);
    expect(ranked(index, 'weather')).toEqual([]);
    expect(ranked(index, 'email')).toEqual([0]);
  });
});
