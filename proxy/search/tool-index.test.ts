import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Embedder } from './embedder';
import {
  embeddingText,
  type IndexedTool,
  indexText,
  intentWords,
  maskIdentifiers,
  parameterText,
  ToolIndex,
  tokenize,
} from './tool-index';

/** Tools embedded from the SPEC §3.3 index text, which starts with the qualified name (`srv__…`): tests tell tool texts from queries by it. */
const indexTextEmbedding = { embedding: 'index-text' } as const;

const tool = (name: string, description: string, server: string | null = 'srv'): IndexedTool => ({
  name: server ? `${server}__${name}` : name,
  server: server ?? undefined,
  toolName: name,
  description,
  inputSchema: {
    type: 'object',
    properties: { path: { type: 'string' }, depth: { type: 'integer' } },
    required: ['path'],
  },
});

describe('index text', () => {
  it('follows "<name>: <description>. Parameters: p (type, required|optional)"', () => {
    expect(indexText(tool('read_file', 'Reads a file.'))).toBe(
      'srv__read_file: Reads a file. Parameters: path (string, required), depth (integer, optional)',
    );
  });

  it('splits names into words', () => {
    expect(tokenize('github__createPullRequest list-files')).toEqual([
      'github',
      'create',
      'pull',
      'request',
      'list',
      'files',
    ]);
  });

  it('masks literal identifiers for the embedding', () => {
    expect(
      maskIdentifiers('read https://example.com/a?b=1 and mail bob@example.com about /var/log/app.log in acme/web #12'),
    ).toBe('read URL and mail email address about file path in repository number');
  });

  it('masks a whole token by what it is: a date-like folder path is no repository, a dotted repository no file', () => {
    expect(maskIdentifiers('summarise reports/2024/q3 for me')).toBe('summarise file path for me');
    expect(maskIdentifiers('open an issue on vercel/next.js about caching')).toBe(
      'open an issue on repository about caching',
    );
    expect(maskIdentifiers('what changed in src/index.ts?')).toBe('what changed in file path?');
    expect(maskIdentifiers('star facebook/react, then read notes.md.')).toBe('star repository, then read file path.');
    expect(maskIdentifiers('list open issues')).toBe('list open issues');
  });

  it('embeds the name in words and the description without docstring sections', () => {
    const documented = tool(
      'create_issue',
      'Create a new issue in a repository.\n\nArgs:\n  title: the title\nReturns:\n  the issue',
    );
    expect(embeddingText(documented)).toBe('srv create issue: Create a new issue in a repository.');
    expect(
      parameterText({
        ...documented,
        inputSchema: { type: 'object', properties: { title: { type: 'string', description: 'Issue title' } } },
      }),
    ).toBe('title Issue title');
  });
});

describe('ToolIndex', () => {
  it('ranks lexically while no model is available', async () => {
    const index = new ToolIndex();
    index.replace('srv', [tool('read_file', 'Read a file from disk'), tool('send_email', 'Send an email message')]);
    const hits = await index.search('send an email');
    expect(hits[0]?.name).toBe('srv__send_email');
    expect(index.mode).toBe('lexical');
  });

  it('reports lexical-only when the model fails to load, and keeps working', async () => {
    const index = new ToolIndex(Promise.resolve(undefined));
    index.replace('srv', [tool('read_file', 'Read a file from disk')]);
    expect(await index.settled()).toBe('lexical');
    expect((await index.search('read file'))[0]?.name).toBe('srv__read_file');
  });

  it('fuses semantic similarity once the model is ready, and re-embeds re-indexed tools', async () => {
    // A tiny deterministic embedder: one dimension per concept word.
    const concepts = ['mail', 'file', 'weather'];
    const embedder: Embedder = {
      model: 'test',
      embed: async (texts) =>
        texts.map((text) => {
          const vector = new Float32Array(concepts.map((word) => (text.toLowerCase().includes(word) ? 1 : 0)));
          const norm = Math.hypot(...vector) || 1;
          return vector.map((value) => value / norm);
        }),
    };
    const index = new ToolIndex(Promise.resolve(embedder));
    index.replace('srv', [tool('deliver', 'Deliver electronic mail'), tool('read_file', 'Read a file')]);
    expect(await index.settled()).toBe('hybrid');
    // No shared word with "deliver electronic mail" except the concept: only the embedding finds it.
    expect((await index.search('compose mail'))[0]?.name).toBe('srv__deliver');
    index.replace('srv', [tool('forecast', 'Weather forecast')]);
    await index.settled();
    expect(index.get('srv__deliver')).toBeUndefined();
    expect((await index.search('weather tomorrow'))[0]?.name).toBe('srv__forecast');
  });

  it("replaces and removes a server's tools", async () => {
    const index = new ToolIndex();
    index.replace('a', [tool('one', 'first tool', 'a')]);
    index.replace(undefined, [tool('local', 'a local tool', null)]);
    expect(index.size).toBe(2);
    index.remove('a');
    expect(index.size).toBe(1);
    expect(await index.search('first')).toEqual([]);
    expect(index.toolsOf(undefined).map((entry) => entry.name)).toEqual(['local']);
  });

  it('ranks the index as it is when the search finishes, even if a tool was replaced while the query was embedded', async () => {
    // Regression: rows are reused, so BM25 scores taken before the await must not be credited
    // to the tool that took the row over.
    let releaseQuery: (() => void) | undefined;
    const embedder: Embedder = {
      model: 'test',
      embed: async (texts) => {
        const vectors = texts.map((text) => new Float32Array(text.includes('weather') ? [1, 0] : [0, 1]));
        if (texts.some((text) => !text.includes('__'))) await new Promise<void>((resolve) => (releaseQuery = resolve));
        return vectors;
      },
    };
    const index = new ToolIndex(Promise.resolve(embedder), { ranking: indexTextEmbedding });
    index.replace('old', [tool('weather_report', 'Weather report for a city', 'old')]);
    await index.settled();
    const search = index.search('weather');
    await vi.waitFor(() => expect(releaseQuery).toBeDefined());
    index.replace('old', []);
    index.replace('new', [tool('translate', 'Translate text', 'new')]);
    await index.settled();
    releaseQuery?.();
    expect((await search).map((hit) => hit.name)).toEqual([]);
  });

  it('ranks a tool whose vector arrives while a search computes similarities by BM25 alone in that search', async () => {
    // The similarity product reads the shared matrix asynchronously: a row written meanwhile
    // must not be scored from a half-written (or freshly written) vector it was not part of.
    let releaseDocument: (() => void) | undefined;
    const releaseProducts: (() => void)[] = [];
    const embedder: Embedder = {
      model: 'test',
      embed: async (texts) => {
        if (texts.some((text) => text.startsWith('late__'))) {
          await new Promise<void>((resolve) => (releaseDocument = resolve));
        }
        return texts.map(() => new Float32Array([1, 0]));
      },
      similarities: async (matrix, query) => {
        await new Promise<void>((resolve) => releaseProducts.push(resolve));
        // Read the matrix only now, after the late vector was written.
        const rows = matrix.length / query.length;
        return Float32Array.from({ length: rows }, (_, row) => (matrix[row * 2] ?? 0) * (query[0] ?? 0));
      },
    };
    const index = new ToolIndex(Promise.resolve(embedder), { ranking: indexTextEmbedding });
    index.replace('early', [tool('lookup', 'Look up a record', 'early')]);
    await index.settled();
    index.replace('late', [tool('fetch', 'Fetch a page', 'late')]);
    await vi.waitFor(() => expect(releaseDocument).toBeDefined());
    const search = index.search('anything');
    await vi.waitFor(() => expect(releaseProducts).toHaveLength(1));
    releaseDocument?.();
    await index.settled();
    releaseProducts[0]?.();
    const hits = await search;
    expect(hits.map((hit) => hit.name)).toEqual(['early__lookup']);
    // The next search sees the late tool's vector.
    const next = index.search('anything');
    await vi.waitFor(() => expect(releaseProducts).toHaveLength(2));
    releaseProducts[1]?.();
    expect((await next).map((hit) => hit.name).sort()).toEqual(['early__lookup', 'late__fetch']);
  });
});

// Issue 10: an embedder whose embed() rejected after the model had loaded killed the process with
// an unhandled rejection (the background indexing chain had no catch) or failed the search.
describe('ToolIndex when the embedding model fails after loading', () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });

  /** Embeds as a one-dimensional model until `fails(texts)` says otherwise, then rejects. */
  const faulty = (fails: (texts: readonly string[]) => boolean, extra: Partial<Embedder> = {}): Embedder => ({
    model: 'faulty',
    embed: async (texts) => {
      if (fails(texts)) throw new Error('onnxruntime: session lost');
      return texts.map(() => new Float32Array([1]));
    },
    ...extra,
  });
  const tools = [tool('read_file', 'Read a file from disk'), tool('send_email', 'Send an email message')];
  /** Lets every pending promise (and its unhandled-rejection report) run. */
  const drain = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('falls back to lexical search for good when background indexing rejects, and says so once', async () => {
    const lines: string[] = [];
    const index = new ToolIndex(Promise.resolve(faulty(() => true)), { log: (line) => lines.push(line) });
    index.replace('srv', tools);
    expect(await index.settled()).toBe('lexical');
    index.replace('more', [tool('fetch_page', 'Fetch a web page', 'more')]);
    expect(await index.settled()).toBe('lexical');
    expect((await index.search('send an email'))[0]?.name).toBe('srv__send_email');
    await drain();
    expect(unhandled).toEqual([]);
    expect(index.mode).toBe('lexical');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/faulty.*session lost.*lexical/);
  });

  it('answers the search in progress lexically when the query embedding rejects, and says so once', async () => {
    const lines: string[] = [];
    // Tool texts carry their qualified name (`srv__…`); a query does not.
    const index = new ToolIndex(Promise.resolve(faulty((texts) => texts.some((text) => !text.includes('__')))), {
      log: (line) => lines.push(line),
      ranking: indexTextEmbedding,
    });
    index.replace('srv', tools);
    expect(await index.settled()).toBe('hybrid');
    expect((await index.search('send an email'))[0]?.name).toBe('srv__send_email');
    expect(index.mode).toBe('lexical');
    expect((await index.search('read a file'))[0]?.name).toBe('srv__read_file');
    await drain();
    expect(unhandled).toEqual([]);
    expect(lines).toHaveLength(1);
  });

  it('answers lexically when the similarity product rejects, and says so once', async () => {
    const lines: string[] = [];
    const similarities = vi.fn(async () => {
      throw new Error('matmul failed');
    });
    const index = new ToolIndex(Promise.resolve(faulty(() => false, { similarities })), {
      log: (line) => lines.push(line),
    });
    index.replace('srv', tools);
    expect(await index.settled()).toBe('hybrid');
    expect((await index.search('send an email'))[0]?.name).toBe('srv__send_email');
    expect((await index.search('read a file'))[0]?.name).toBe('srv__read_file');
    await drain();
    expect(unhandled).toEqual([]);
    expect(index.mode).toBe('lexical');
    expect(similarities).toHaveBeenCalledTimes(1);
    expect(lines).toEqual([expect.stringMatching(/matmul failed/)]);
  });

  it('logs once when a query and the background indexing fail together', async () => {
    const lines: string[] = [];
    let failing = false;
    const index = new ToolIndex(Promise.resolve(faulty(() => failing)), { log: (line) => lines.push(line) });
    index.replace('srv', tools);
    expect(await index.settled()).toBe('hybrid');
    failing = true;
    index.replace('more', [tool('fetch_page', 'Fetch a web page', 'more')]);
    const hits = await index.search('fetch a web page');
    expect(await index.settled()).toBe('lexical');
    expect(hits[0]?.name).toBe('more__fetch_page');
    await drain();
    expect(unhandled).toEqual([]);
    expect(lines).toHaveLength(1);
  });

  it('treats a model whose loading rejects like one that is unavailable', async () => {
    const lines: string[] = [];
    const index = new ToolIndex(Promise.reject(new Error('worker crashed')), { log: (line) => lines.push(line) });
    index.replace('srv', tools);
    expect(await index.settled()).toBe('lexical');
    expect((await index.search('send an email'))[0]?.name).toBe('srv__send_email');
    await drain();
    expect(unhandled).toEqual([]);
    expect(lines).toEqual([expect.stringMatching(/worker crashed/)]);
  });
});

describe('intent words (issue 17)', () => {
  it('maps everyday phrasings to the verbs tools are named with', () => {
    expect(intentWords('get rid of the tmp_import collection')).toContain('delete');
    expect(intentWords('what fields does a deal have?')).toContain('get');
    expect(intentWords('add a row to Contacts')).toContain('create');
    expect(intentWords('rename the field')).toContain('update');
    expect(intentWords('kittens')).toBe('');
  });

  it('tells tools of one server apart by the action the query asks for', async () => {
    const index = new ToolIndex();
    index.replace('crm', [
      tool('list_records', 'Records of a table in the CRM base', 'crm'),
      tool('delete_records', 'Records of a table in the CRM base', 'crm'),
      tool('create_records', 'Records of a table in the CRM base', 'crm'),
    ]);
    expect((await index.search('get rid of the records in the CRM table'))[0]?.name).toBe('crm__delete_records');
    expect((await index.search('add records to the CRM table'))[0]?.name).toBe('crm__create_records');
    // Without intent words the three tie on the description and the name decides nothing.
    const plain = new ToolIndex(undefined, { ranking: { intentWords: false } });
    plain.replace('crm', [
      tool('list_records', 'Records of a table in the CRM base', 'crm'),
      tool('delete_records', 'Records of a table in the CRM base', 'crm'),
    ]);
    const [first, second] = await plain.search('get rid of the records in the CRM table');
    expect(first?.score).toBe(second?.score);
  });
});
