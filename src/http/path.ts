/**
 * The path route rules are matched against. Frameworks route `/Login`,
 * `/login/`, `//login` and `/%6Cogin` to the same handler in some
 * configurations (Express is case-insensitive and ignores a trailing slash by
 * default), so a rule on `/login` must see all of them as `/login`, or a client
 * could step around a limit by respelling the URL. Normalising errs towards
 * limiting: two routes a framework keeps apart may share a rule, never the
 * reverse.
 */

/** Longest path examined; the rest is ignored (a longer path still matches on its first part). */
export const MAX_PATH_LENGTH = 2048;

/**
 * The pathname of a request target, normalised: query and fragment cut,
 * percent-escapes decoded (left as they are if malformed), runs of `/`
 * collapsed, a trailing `/` dropped (except for `/` itself). Case is kept;
 * see {@link foldCase}. Already-normal paths are returned without copying.
 */
export function normalizePath(url: string | undefined): string {
  if (url === undefined || url.length === 0) return '/';
  let end = url.length;
  let clean = true;
  for (let i = 0; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 0x3f /* ? */ || c === 0x23 /* # */) {
      end = i;
      break;
    }
    if (c === 0x25 /* % */ || (c === 0x2f /* / */ && url.charCodeAt(i + 1) === 0x2f)) clean = false;
  }
  if (end > MAX_PATH_LENGTH) {
    end = MAX_PATH_LENGTH;
    clean = false;
  }
  let p = end === url.length ? url : url.slice(0, end);
  if (p.length > 1 && p.charCodeAt(p.length - 1) === 0x2f) clean = false;
  if (p.charCodeAt(0) !== 0x2f) clean = false;
  if (clean) return p;
  if (p.includes('%')) {
    try {
      p = decodeURIComponent(p);
    } catch {
      // A malformed escape: match on the path as sent.
    }
  }
  p = p.replace(/\/{2,}/g, '/');
  if (p.charCodeAt(0) !== 0x2f) p = `/${p}`;
  while (p.length > 1 && p.charCodeAt(p.length - 1) === 0x2f) p = p.slice(0, -1);
  return p;
}

/** Lower-cases ASCII letters; returns `s` itself when it has none upper-case. */
export function foldCase(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return s.toLowerCase();
  }
  return s;
}
