/**
 * Just enough reading of the Dockerfile and compose.yaml for tests to assert their facts. There is
 * no YAML parser among the dependencies, so compose.yaml is read by lines and indentation (the file
 * uses block style only).
 */

export interface Instruction {
  /** Upper-cased keyword: FROM, RUN, ENV, ... */
  keyword: string;
  args: string;
  /** Index of the FROM stage it belongs to (0 = first stage). */
  stage: number;
}

/** Dockerfile instructions, continuation lines joined, comments dropped. */
export function dockerInstructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let stage = -1;
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const m = /^(\w+)\s+(.*)$/.exec(full);
    if (!m) throw new Error(`not a Dockerfile instruction: ${full}`);
    const keyword = m[1]!.toUpperCase();
    if (keyword === 'FROM') stage++;
    out.push({ keyword, args: m[2]!, stage });
  }
  return out;
}

/** `--name=value` flags at the start of an instruction's arguments, and what follows them. */
export function flagsOf(args: string): { flags: Record<string, string>; rest: string } {
  const flags: Record<string, string> = {};
  let rest = args;
  for (let m = /^--([\w-]+)=(\S+)\s*/.exec(rest); m; m = /^--([\w-]+)=(\S+)\s*/.exec(rest)) {
    flags[m[1]!] = m[2]!;
    rest = rest.slice(m[0].length);
  }
  return { flags, rest };
}

/** `KEY=VALUE KEY2=VALUE2` of an ENV instruction (unquoted values). */
export function envPairs(args: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of args.split(/\s+/)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`ENV in KEY=VALUE form expected, got ${pair}`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

interface YamlLine {
  indent: number;
  text: string;
}

function yamlLines(text: string): YamlLine[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.trim().startsWith('#'))
    .map((l) => ({ indent: l.length - l.trimStart().length, text: l.trim() }));
}

/** The lines nested under a key path (indentation decides nesting); throws when a key is missing. */
function descend(text: string, path: string[]): YamlLine[] {
  let lines = yamlLines(text);
  path.forEach((key, depth) => {
    const base = Math.min(...lines.map((l) => l.indent));
    const at = lines.findIndex((l) => l.indent === base && (l.text === `${key}:` || l.text.startsWith(`${key}: `)));
    if (at < 0) throw new Error(`compose.yaml: no key ${path.slice(0, depth + 1).join('.')}`);
    const end = lines.findIndex((l, i) => i > at && l.indent <= lines[at]!.indent);
    lines = lines.slice(at + 1, end < 0 ? undefined : end);
  });
  return lines;
}

/** Every line nested under a key path, e.g. ['services', 'gateway', 'volumes'], trimmed. */
export function yamlBlock(text: string, path: string[]): string[] {
  return descend(text, path).map((l) => l.text);
}

/** The lines one level under a key path (not their own nested lines). */
function yamlDirectChildren(text: string, path: string[]): string[] {
  const lines = descend(text, path);
  const base = Math.min(...lines.map((l) => l.indent));
  return lines.filter((l) => l.indent === base).map((l) => l.text);
}

/** The scalar value of `key: value` at a key path. */
export function yamlValue(text: string, path: string[]): string {
  const key = path[path.length - 1]!;
  const line = yamlDirectChildren(text, path.slice(0, -1)).find((l) => l.startsWith(`${key}: `));
  if (!line) throw new Error(`compose.yaml: no value at ${path.join('.')}`);
  return unquote(line.slice(key.length + 2).trim());
}

/** The `- item` entries of a list at a key path. */
export function yamlList(text: string, path: string[]): string[] {
  return yamlDirectChildren(text, path)
    .filter((l) => l.startsWith('- '))
    .map((l) => unquote(l.slice(2).trim()));
}

function unquote(s: string): string {
  return /^(["']).*\1$/.test(s) ? s.slice(1, -1) : s;
}

/** The `key: value` pairs one level under a key path (a map such as `environment`), unquoted. */
export function yamlMap(text: string, path: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of yamlDirectChildren(text, path)) {
    const m = /^([\w.-]+):\s*(.*)$/.exec(line);
    if (!m) throw new Error(`compose.yaml: not a key: value pair under ${path.join('.')}: ${line}`);
    out[m[1]!] = unquote(m[2]!.trim());
  }
  return out;
}

/** A `${VAR:?message}` (or `${VAR?message}`) whose variable is missing: compose refuses to start with the message. */
export interface MissingVariable {
  variable: string;
  message: string;
}

/**
 * Compose's interpolation of one value against the shell (or .env) environment: `${VAR}`, `$VAR`,
 * `${VAR:-default}` (unset or empty), `${VAR-default}` (unset), `${VAR:?message}` (error when unset
 * or empty), `${VAR?message}` (error when unset), `$$` (a literal `$`). Errors are collected, not thrown.
 */
export function interpolate(value: string, env: Record<string, string | undefined>, missing: MissingVariable[] = []): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name?: string, colon?: string, op?: string, arg?: string, bare?: string) => {
    if (whole === '$$') return '$';
    if (bare !== undefined) return env[bare] ?? '';
    const v = env[name!];
    const absent = v === undefined || (colon === ':' && v === '');
    if (op === '-') return absent ? arg! : v!;
    if (op === '?') {
      if (absent) missing.push({ variable: name!, message: arg! });
      return v ?? '';
    }
    return v ?? '';
  });
}

/** A service's `environment` as compose hands it to the container, and what compose would refuse. */
export function composeEnvironment(text: string, service: string[], shell: Record<string, string | undefined>): { env: Record<string, string>; missing: MissingVariable[] } {
  const missing: MissingVariable[] = [];
  const env = Object.fromEntries(Object.entries(yamlMap(text, [...service, 'environment'])).map(([k, v]) => [k, interpolate(v, shell, missing)]));
  return { env, missing };
}
