import {
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Node as YamlNode,
} from 'yaml';
import { EnvoyConfigError } from './errors.js';

/**
 * Most aliases followed while reading one file: what bounds alias expansion
 * ("billion laughs"), as the `yaml` package's own `maxAliasCount` does for toJS.
 */
export const MAX_ALIASES = 1_000;
/** Most YAML nodes read from one file: a backstop (a 1 MiB file without aliases holds far fewer). */
export const MAX_NODES = 2_000_000;

/** A node of the parsed document (the `yaml` package's type). */
export type { YamlNode };

/** A JSON value (what `metadata` holds: a google.protobuf.Struct's values). */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Deepest nesting read in a JSON value (`metadata`). */
export const MAX_JSON_DEPTH = 32;

/**
 * One envoyproxy/ratelimit config file, parsed as their yaml.v2 reads it
 * (YAML 1.1: yes/no are booleans; duplicate keys refused), with typed access
 * to its nodes: each read checks the node's type, counts it (so alias
 * expansion is bounded) and, on a problem, throws an {@link EnvoyConfigError}
 * naming the file, the YAML path and the line.
 */
export class YamlReader {
  private readonly doc: Document;
  private readonly lines = new LineCounter();
  private nodes = 0;
  private aliases = 0;

  constructor(
    readonly file: string,
    text: string,
  ) {
    this.doc = parseDocument(text, {
      version: '1.1',
      uniqueKeys: true,
      lineCounter: this.lines,
      prettyErrors: false,
    });
    const err = this.doc.errors[0];
    if (err !== undefined) {
      const line = err.linePos?.[0]?.line;
      const reason = err.code === 'DUPLICATE_KEY' ? 'duplicate key in a mapping' : 'not valid YAML';
      this.fail('', `${reason}: ${err.message.split('\n')[0]}`, line);
    }
  }

  /** The document's top node; null for an empty file. */
  root(): YamlNode | null {
    return this.resolve(this.doc.contents, '');
  }

  /** The node, aliases followed; null for an absent or null node. */
  resolve(node: unknown, path: string): YamlNode | null {
    if (++this.nodes > MAX_NODES) this.fail(path, `more than ${MAX_NODES} YAML nodes`);
    if (node === null || node === undefined) return null;
    if (isAlias(node)) {
      if (++this.aliases > MAX_ALIASES) {
        this.fail(path, `more than ${MAX_ALIASES} aliases followed (alias expansion)`, this.lineOf(node));
      }
      const target = node.resolve(this.doc);
      if (target === undefined) this.fail(path, `unresolved alias *${node.source}`, this.lineOf(node));
      return this.resolve(target, path);
    }
    if (isScalar(node) && node.value === null) return null;
    return node as YamlNode;
  }

  /** A mapping's fields by name; `allowed` undefined accepts any string keys (metadata). */
  mapping(
    node: YamlNode,
    path: string,
    allowed: readonly string[] | undefined,
  ): Map<string, YamlNode | null> {
    if (!isMap(node)) this.fail(path, `must be a mapping (got ${kind(node)})`, this.lineOf(node));
    const out = new Map<string, YamlNode | null>();
    for (const pair of node.items) {
      const k = this.resolve(pair.key, path);
      if (k === null || !isScalar(k) || typeof k.value !== 'string') {
        this.fail(
          path,
          `config error, key is not of type string: ${String(isScalar(k) ? k.value : kind(k))}`,
          this.lineOf(k),
        );
      }
      const name = k.value as string;
      const p = path === '' ? name : `${path}.${name}`;
      if (allowed !== undefined && !allowed.includes(name)) {
        this.fail(
          p,
          `config error, unknown key '${name}' (expected one of: ${allowed.join(', ')})`,
          this.lineOf(k),
        );
      }
      out.set(name, this.resolve(pair.value, p));
    }
    return out;
  }

  /** A list of mappings (their loader refuses a list of anything else). */
  sequence(node: YamlNode, path: string): YamlNode[] {
    if (!isSeq(node)) this.fail(path, `must be a list (got ${kind(node)})`, this.lineOf(node));
    const out: YamlNode[] = [];
    for (let i = 0; i < node.items.length; i++) {
      const item = this.resolve(node.items[i], `${path}[${i}]`);
      if (item === null || !isMap(item)) {
        this.fail(
          `${path}[${i}]`,
          `config error, yaml file contains list of type other than map: ${item === null ? 'null' : kind(item)}`,
          this.lineOf(item ?? node),
        );
      }
      out.push(item);
    }
    return out;
  }

  /** A string field; integers and booleans are read as written (`value: 2061234567`), as yaml.v2 does. */
  optString(node: YamlNode | null, path: string): string | undefined {
    if (node === null) return undefined;
    if (!isScalar(node)) this.fail(path, `must be a string (got ${kind(node)})`, this.lineOf(node));
    const v = node.value;
    if (typeof v === 'string') return v;
    if ((typeof v === 'number' && Number.isInteger(v)) || typeof v === 'boolean')
      return node.source ?? String(v);
    this.fail(
      path,
      `must be a string (got ${kind(node)}; floats are refused as envoyproxy/ratelimit refuses them)`,
      this.lineOf(node),
    );
  }

  /** A boolean field, or undefined when absent. */
  optBool(node: YamlNode | null, path: string): boolean | undefined {
    if (node === null) return undefined;
    if (!isScalar(node) || typeof node.value !== 'boolean') {
      this.fail(path, `must be true or false (got ${kind(node)})`, this.lineOf(node));
    }
    return node.value as boolean;
  }

  /** An integer 0..2^32-1 (their uint32 fields). */
  uint32(node: YamlNode, path: string): number {
    const v = isScalar(node) ? node.value : undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffff_ffff) {
      this.fail(path, `must be an integer 0..4294967295 (got ${kind(node)})`, this.lineOf(node));
    }
    return v;
  }

  /**
   * A node as a JSON value (`metadata`, which their loader turns into a
   * google.protobuf.Struct): strings, numbers, booleans, null, lists, and
   * mappings with string keys, at most {@link MAX_JSON_DEPTH} deep.
   */
  json(node: YamlNode | null, path: string, depth = 0): JsonValue {
    if (depth > MAX_JSON_DEPTH)
      this.fail(path, `nests deeper than ${MAX_JSON_DEPTH} levels`, this.lineOf(node));
    if (node === null) return null;
    if (isMap(node)) {
      const out: { [key: string]: JsonValue } = {};
      for (const [k, v] of this.mapping(node, path, undefined)) {
        out[k] = this.json(v, path === '' ? k : `${path}.${k}`, depth + 1);
      }
      return out;
    }
    if (isSeq(node)) {
      return node.items.map((item, i) =>
        this.json(this.resolve(item, `${path}[${i}]`), `${path}[${i}]`, depth + 1),
      );
    }
    if (isScalar(node)) {
      const v = node.value;
      if (typeof v === 'string' || typeof v === 'boolean') return v;
      if (typeof v === 'number' && Number.isFinite(v)) return v;
    }
    this.fail(
      path,
      `must be a string, number, boolean, list or mapping (got ${kind(node)})`,
      this.lineOf(node),
    );
  }

  /** The 1-based line a node starts on, when known. */
  lineOf(node: unknown): number | undefined {
    const range = (node as { range?: [number, number, number] } | null)?.range;
    return range === undefined ? undefined : this.lines.linePos(range[0]).line;
  }

  /** Throws the {@link EnvoyConfigError} for this file. */
  fail(path: string, reason: string, line?: number): never {
    throw new EnvoyConfigError(this.file, path === '' ? '(document)' : path, reason, line);
  }
}

/** A short description of a node for messages: its kind and, for a scalar, its value. */
export function kind(node: unknown): string {
  if (node === null || node === undefined) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    const v = node.value;
    const text = JSON.stringify(v) ?? String(v);
    return `${typeof v} ${text.length > 40 ? `${text.slice(0, 37)}...` : text}`;
  }
  return 'an unknown node';
}
