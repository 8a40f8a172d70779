// Passwords never leave the library in text (R13.3): every message that may quote a connection
// string passes through here. Pure string work, so the domain's own errors can use it.

const MASK = '***';

/** libpq key=value: `password=secret`, `password = 'a b'` (quoted values may hold spaces and \'). */
const KEY_VALUE = /\b(password|pass|pwd)(\s*=\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|[^\s&;,'"]+)/gi;
/** URL query form: `?password=secret&...`. */
const QUERY = /([?&](?:password|pass|pwd)=)[^&#\s]*/gi;
/** URL userinfo, with or without a scheme: `postgres://user:secret@host`, `user:secret@host`. */
const USERINFO = /((?:[a-z][a-z0-9+.-]*:\/\/)?(?<![\w.%+-])[^\s:@/'"=]*):(?!\/\/)[^\s'"]+@/gi;

/**
 * `text` with every password it may hold replaced by ***: the value of a libpq `password=`
 * key, a URL's password (with a scheme or without), a `password` query parameter, and every
 * occurrence of the `secrets` given (the passwords of the caller's own options).
 */
export const redactSecrets = (text: string, secrets: readonly string[] = []): string => {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 2) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) out = out.split(form).join(MASK);
  }
  return out
    .replace(KEY_VALUE, (_m, key: string, eq: string) => `${key}${eq}${MASK}`)
    .replace(QUERY, `$1${MASK}`)
    .replace(USERINFO, `$1:${MASK}@`);
};

/** The password a connection string carries in any of its forms (for `redactSecrets`), if any. */
export const passwordsOf = (connectionString: string | undefined, password?: unknown): string[] => {
  const found: string[] = typeof password === 'string' && password !== '' ? [password] : [];
  if (connectionString === undefined) return found;
  for (const m of connectionString.matchAll(KEY_VALUE)) {
    const raw = m[3] ?? '';
    found.push(raw.startsWith("'") || raw.startsWith('"') ? raw.slice(1, raw.length - (raw.endsWith(raw[0]!) && raw.length > 1 ? 1 : 0)).replace(/\\(.)/g, '$1') : raw);
  }
  for (const m of connectionString.matchAll(/[?&](?:password|pass|pwd)=([^&#\s]*)/gi)) found.push(m[1] ?? '');
  // userinfo: between the first ':' after the scheme's '//' (or the start) and the last '@' before the host
  const rest = connectionString.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const authority = rest.slice(0, rest.includes('?') ? rest.indexOf('?') : rest.length);
  const userinfo = authority.slice(0, Math.max(authority.lastIndexOf('@'), 0));
  const colon = userinfo.indexOf(':');
  if (colon >= 0 && !/\s/.test(userinfo)) found.push(userinfo.slice(colon + 1));
  const decoded = found.flatMap((p) => {
    try {
      return [p, decodeURIComponent(p)];
    } catch {
      return [p];
    }
  });
  return [...new Set(decoded.filter((p) => p.length > 0))];
};
