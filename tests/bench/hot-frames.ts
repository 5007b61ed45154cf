import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';

/**
 * Reads a `node --cpu-prof` profile and prints where the time went: the hottest frames by self
 * time, self time summed per place (the project's own code by folder, each package, Node's
 * internals, garbage collection), and the project's own frames by total time (themselves and what
 * they call). `npx tsx tests/bench/hot-frames.ts FILE.cpuprofile [--top 25]`.
 */
const profileSchema = z.object({
  nodes: z.array(
    z.object({
      id: z.number(),
      callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.number() }),
      children: z.array(z.number()).optional(),
    }),
  ),
  samples: z.array(z.number()),
  timeDeltas: z.array(z.number()),
});

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' } } });
const file = positionals[0];
if (file === undefined) throw new Error('usage: hot-frames.ts FILE.cpuprofile [--top N]');
const profile = profileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
const top = Number(values.top ?? 25);

const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, position) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[position] ?? 0));
});
const total = [...selfUs.values()].reduce((sum, value) => sum + value, 0);

/** Where a frame's code lives: `proxy/http`, a package name, `node:internal`, or the frame's own name for V8's. */
function placeOf(url: string, functionName: string): string {
  const packagePath = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (packagePath?.[1]) return packagePath[1];
  const own = /\/(proxy|lib|tests|shop-agent|identity)\/([^/]+)\//.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  if (url.startsWith('node:')) return 'node:internal';
  return url === '' ? `(${functionName.replace(/[()]/g, '')})` : url;
}

const parents = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
const keyOf = (id: number) => {
  const frame = frames.get(id);
  if (!frame) return '';
  const where = frame.url.replace(/^.*\/(node_modules|proxy|lib)\//, '$1/');
  return `${frame.functionName || '(anonymous)'}  ${where}:${frame.lineNumber + 1}`;
};

const byFrame = new Map<string, number>();
const byPlace = new Map<string, number>();
const ownTotal = new Map<string, number>();
for (const [id, us] of selfUs) {
  const frame = frames.get(id);
  if (!frame) continue;
  byFrame.set(keyOf(id), (byFrame.get(keyOf(id)) ?? 0) + us);
  const place = placeOf(frame.url, frame.functionName);
  byPlace.set(place, (byPlace.get(place) ?? 0) + us);
  // Total time: each of the project's frames on this sample's stack, counted once per stack.
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
    const key = keyOf(at);
    const url = frames.get(at)?.url ?? '';
    if (!url.includes('/node_modules/') && /\/(proxy|lib)\//.test(url) && !seen.has(key)) {
      seen.add(key);
      ownTotal.set(key, (ownTotal.get(key) ?? 0) + us);
    }
  }
}
const percent = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)} %`;
const print = (title: string, entries: Map<string, number>) => {
  process.stdout.write(`${title}\n`);
  for (const [key, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${percent(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${key}\n`);
  }
};
process.stdout.write(`${file}: ${(total / 1e6).toFixed(2)} s sampled\n`);
print('self time by frame', byFrame);
print('self time by place', byPlace);
print("the project's own frames by total time", ownTotal);
