import picomatch from 'picomatch';

// Tool and server names are not paths: picomatch's `*` and `?` stop at `/`, so a downstream
// tool named `delete_a/b` would slip past a deny glob `*__delete_*`. Every `/` (in the name and
// in the glob alike) becomes this private-use character before matching, which leaves picomatch
// no path separator to respect. A name that really contains the character matches like one
// with a `/` in its place: for deny and hide globs that can only hide more, never less.
const slashStandIn = '\uE000';

function withoutSlashes(text: string): string {
  return text.replaceAll('/', slashStandIn);
}

/**
 * Compiles globs over tool or server names into one predicate, treating `/` as an ordinary
 * character (`*` matches across it, `?` matches it). Callers validate the globs first
 * (`globProblem`), so a glob picomatch cannot compile never becomes a silent no-match.
 */
export function matchNameGlob(globs: readonly string[]): (name: string) => boolean {
  if (globs.length === 0) return () => false;
  const matches = picomatch(globs.map(withoutSlashes), { dot: true });
  return function matchNameGlob(name) {
    return matches(withoutSlashes(name));
  };
}
