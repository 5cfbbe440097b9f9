import { readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { MAX_BUCKETS } from '../policy/constants.js';
import { boolean, fail, integer, objectOf, oneOf, string } from '../validate.js';
import {
  ENVOY_ALGORITHMS,
  type EnvoyAlgorithm,
  type EnvoyConfig,
  type EnvoyConfigSource,
  parseEnvoyConfig,
} from './config.js';
import { GRPC_DEFAULTS, type RlsServerOptions } from './grpc-server.js';
import { GRPC_TRANSPORTS, type GrpcTransport, MAX_CONNECTIONS } from './grpc-transport.js';
import { H2_LIMITS, type H2Limits } from './h2.js';
import { type CountHits, DEFAULT_HEADER_NAMES } from './service.js';

const COUNT_HITS: readonly CountHits[] = ['every', 'stop-when-over', 'when-allowed'];

/** The daemon's `envoy` section: envoyproxy/ratelimit config files, loaded and validated. */
export interface EnvoyDaemonConfig {
  /** The config files read, absolute, in load order (a folder gives its *.yaml / *.yml files, sorted). */
  files: string[];
  /**
   * The folders named in `files`, absolute: watched, so a config file added to one is loaded
   * without a signal (as envoyproxy/ratelimit watches its runtime folder).
   */
  dirs: string[];
  algorithm: EnvoyAlgorithm;
  buckets: number;
  mergeDomains: boolean;
  /** The loaded descriptor trees and the ratemesh policies they need. */
  config: EnvoyConfig;
}

/** The daemon's `grpc` section: the Envoy RLS v3 server. */
export interface GrpcDaemonConfig {
  host: string;
  port: number;
  maxMessageBytes: number;
  /** The draft RateLimit headers in `response_headers_to_add`, with these names; off when undefined. */
  responseHeaders: { limit: string; remaining: string; reset: string } | undefined;
  /** `ok` (no limit, as envoyproxy/ratelimit; default) or `error` (NOT_FOUND). */
  unknownDomain: 'error' | 'ok';
  /** Which hits count ({@link CountHits}); default `every`, as envoyproxy/ratelimit. */
  countHits: CountHits;
  /** Answer with `dynamic_metadata` (their `RESPONSE_DYNAMIC_METADATA`); default false. */
  dynamicMetadata: boolean;
  /** Apply `limit` overrides sent in requests, as envoyproxy/ratelimit does (default true); false: INVALID_ARGUMENT. */
  limitOverrides: boolean;
  /**
   * The HTTP/2 under the server: `ratemesh` (its own, h2.ts; default) or `node:http2` (the
   * fallback). `--grpc-transport` and RATEMESH_GRPC_TRANSPORT override it (config.ts).
   */
  transport: GrpcTransport;
  /** Connections open at once; one more is refused (GOAWAY ENHANCE_YOUR_CALM on `ratemesh`). */
  maxConnections: number;
  /** Calls in flight on one connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** A request not fully arrived after this long is answered DEADLINE_EXCEEDED. */
  requestTimeoutMs: number;
  /** The HTTP/2 caps and timeouts (`grpc.maxContinuations` ... `grpc.maxUnreadBytes`), every one filled. */
  limits: H2Limits;
}

/**
 * The range of each HTTP/2 cap and timeout in the `grpc` section (their defaults: H2_LIMITS).
 * Timeouts are checked every 250 ms, so none is shorter; SETTINGS entries from 8 (a client's
 * first SETTINGS carries up to 7 defined ones) to 2,730 (what one 16 KiB frame holds).
 */
export const GRPC_LIMIT_RANGES: Readonly<Record<keyof H2Limits, readonly [min: number, max: number]>> = {
  maxContinuations: [1, 1024],
  maxSettingsEntries: [8, 2730],
  nuisancePerTick: [100, 1_000_000],
  headerFramesPerTick: [100, 1_000_000],
  prefaceTimeoutMs: [250, 600_000],
  frameTimeoutMs: [250, 600_000],
  idleTimeoutMs: [250, 86_400_000],
  stallTimeoutMs: [250, 3_600_000],
  maxUnreadBytes: [64 * 1024, 256 * 1024 * 1024],
};
const LIMIT_FIELDS = Object.keys(GRPC_LIMIT_RANGES) as (keyof H2Limits)[];

/**
 * The limits the node:http2 fallback does not apply (nghttp2 has its own): set away from their
 * defaults with that transport, the daemon warns. It applies maxConnections, maxConcurrentStreams,
 * requestTimeoutMs, maxSettingsEntries, prefaceTimeoutMs, idleTimeoutMs and stallTimeoutMs (to
 * replies; grpc-transport-node.ts).
 */
export const NOT_ON_NODE_HTTP2: readonly (keyof H2Limits)[] = [
  'maxContinuations',
  'nuisancePerTick',
  'headerFramesPerTick',
  'frameTimeoutMs',
  'maxUnreadBytes',
];

/** Most envoy config files read. */
const MAX_FILES = 256;

const ENVOY_FIELDS = ['files', 'algorithm', 'buckets', 'mergeDomains'] as const;
const GRPC_FIELDS = [
  'host',
  'port',
  'maxMessageBytes',
  'responseHeaders',
  'unknownDomain',
  'countHits',
  'limitOverrides',
  'dynamicMetadata',
  'transport',
  'maxConnections',
  'maxConcurrentStreams',
  'requestTimeoutMs',
  ...LIMIT_FIELDS,
];

/** Lists a folder's entries, or returns undefined when `path` is not a folder. Injectable for tests. */
export type ListDir = (path: string) => string[] | undefined;

/** The real file system's {@link ListDir}. */
export const listDir: ListDir = (path) => {
  try {
    if (!statSync(path).isDirectory()) return undefined;
  } catch {
    return undefined;
  }
  return readdirSync(path);
};

/**
 * Validates the `envoy` section of the daemon config and loads its files
 * now, so a bad descriptor stops the daemon before it starts. `files` are
 * relative to `baseDir`; a folder stands for its `*.yaml` and `*.yml` files
 * in name order (as envoyproxy/ratelimit loads its config folder).
 */
export function parseEnvoySection(
  raw: unknown,
  baseDir: string,
  read: (path: string) => Buffer,
  list: ListDir = listDir,
): EnvoyDaemonConfig {
  const s = objectOf(raw, 'config.envoy', ENVOY_FIELDS);
  if (s.files === undefined)
    fail('config.envoy.files', 'is required: a list of envoyproxy/ratelimit config files or folders');
  if (!Array.isArray(s.files) || s.files.length === 0) {
    fail('config.envoy.files', 'must be a non-empty list of files or folders');
  }
  const algorithm =
    s.algorithm === undefined
      ? 'sliding-window'
      : oneOf(s.algorithm, 'config.envoy.algorithm', ENVOY_ALGORITHMS);
  const buckets = s.buckets === undefined ? 10 : integer(s.buckets, 'config.envoy.buckets', 1, MAX_BUCKETS);
  const mergeDomains =
    s.mergeDomains === undefined ? false : boolean(s.mergeDomains, 'config.envoy.mergeDomains');

  const files: string[] = [];
  const dirs: string[] = [];
  s.files.forEach((entry: unknown, i: number) => {
    const path = resolve(baseDir, string(entry, `config.envoy.files[${i}]`));
    const names = list(path);
    if (names === undefined) files.push(path);
    else {
      dirs.push(path);
      const yaml = configNames(names);
      if (yaml.length === 0)
        fail(`config.envoy.files[${i}]`, `the folder ${path} holds no .yaml or .yml file`);
      for (const n of yaml) files.push(join(path, n));
    }
  });
  if (files.length > MAX_FILES) fail('config.envoy.files', `more than ${MAX_FILES} files`);

  const sources: EnvoyConfigSource[] = files.map((file, i) => {
    let buf: Buffer;
    try {
      buf = read(file);
    } catch (err) {
      return fail(
        `config.envoy.files[${i}]`,
        `cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return { file, text: buf.toString('utf8') };
  });
  const config = parseEnvoyConfig(sources, { algorithm, buckets, mergeDomains });
  return { files, dirs, algorithm, buckets, mergeDomains, config };
}

/** The config files among a folder's entries, in load order: `*.yaml` and `*.yml`, not hidden, by name. */
export function configNames(names: readonly string[]): string[] {
  return names.filter((n) => /\.ya?ml$/i.test(n) && !n.startsWith('.')).sort();
}

/** Validates the `grpc` section of the daemon config. */
export function parseGrpcSection(raw: unknown): GrpcDaemonConfig {
  const s = objectOf(raw, 'config.grpc', GRPC_FIELDS);
  if (s.port === undefined)
    fail('config.grpc.port', 'is required: the port of the Envoy RLS gRPC server (0 picks one)');
  const port = integer(s.port, 'config.grpc.port', 0, 65535);
  const host = s.host === undefined ? GRPC_DEFAULTS.host : string(s.host, 'config.grpc.host', 253);
  const maxMessageBytes =
    s.maxMessageBytes === undefined
      ? GRPC_DEFAULTS.maxMessageBytes
      : integer(s.maxMessageBytes, 'config.grpc.maxMessageBytes', 1024, 4 * 1024 * 1024);
  let responseHeaders: GrpcDaemonConfig['responseHeaders'];
  const h = s.responseHeaders;
  if (h === true) responseHeaders = { ...DEFAULT_HEADER_NAMES };
  else if (h !== undefined && h !== false) {
    const o = objectOf(h, 'config.grpc.responseHeaders', ['limit', 'remaining', 'reset']);
    const name = (v: unknown, field: string, dflt: string): string => {
      if (v === undefined) return dflt;
      const t = string(v, `config.grpc.responseHeaders.${field}`, 256);
      if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(t))
        fail(`config.grpc.responseHeaders.${field}`, 'must be an HTTP header name');
      return t;
    };
    responseHeaders = {
      limit: name(o.limit, 'limit', DEFAULT_HEADER_NAMES.limit),
      remaining: name(o.remaining, 'remaining', DEFAULT_HEADER_NAMES.remaining),
      reset: name(o.reset, 'reset', DEFAULT_HEADER_NAMES.reset),
    };
  }
  const unknownDomain =
    s.unknownDomain === undefined
      ? 'ok'
      : oneOf(s.unknownDomain, 'config.grpc.unknownDomain', ['error', 'ok'] as const);
  const countHits =
    s.countHits === undefined ? 'every' : oneOf(s.countHits, 'config.grpc.countHits', COUNT_HITS);
  const limitOverrides =
    s.limitOverrides === undefined ? true : boolean(s.limitOverrides, 'config.grpc.limitOverrides');
  const dynamicMetadata =
    s.dynamicMetadata === undefined ? false : boolean(s.dynamicMetadata, 'config.grpc.dynamicMetadata');
  const transport =
    s.transport === undefined ? 'ratemesh' : oneOf(s.transport, 'config.grpc.transport', GRPC_TRANSPORTS);
  const maxConnections =
    s.maxConnections === undefined
      ? MAX_CONNECTIONS
      : integer(s.maxConnections, 'config.grpc.maxConnections', 1, 1_000_000);
  const maxConcurrentStreams =
    s.maxConcurrentStreams === undefined
      ? GRPC_DEFAULTS.maxConcurrentStreams
      : integer(s.maxConcurrentStreams, 'config.grpc.maxConcurrentStreams', 1, 65_535);
  const requestTimeoutMs =
    s.requestTimeoutMs === undefined
      ? GRPC_DEFAULTS.requestTimeoutMs
      : integer(s.requestTimeoutMs, 'config.grpc.requestTimeoutMs', 250, 600_000);
  const limits: H2Limits = { ...H2_LIMITS };
  for (const k of LIMIT_FIELDS) {
    const [min, max] = GRPC_LIMIT_RANGES[k];
    if (s[k] !== undefined) limits[k] = integer(s[k], `config.grpc.${k}`, min, max);
  }
  return {
    host,
    port,
    maxMessageBytes,
    responseHeaders,
    unknownDomain,
    countHits,
    limitOverrides,
    dynamicMetadata,
    transport,
    maxConnections,
    maxConcurrentStreams,
    requestTimeoutMs,
    limits,
  };
}

/** What the `grpc` section sets of the RLS server's options: its address and its transport's caps. */
export function rlsServerOptions(
  grpc: GrpcDaemonConfig,
): Required<
  Pick<
    RlsServerOptions,
    | 'host'
    | 'port'
    | 'maxMessageBytes'
    | 'maxConcurrentStreams'
    | 'requestTimeoutMs'
    | 'maxConnections'
    | 'limits'
    | 'transport'
  >
> {
  return {
    host: grpc.host,
    port: grpc.port,
    maxMessageBytes: grpc.maxMessageBytes,
    maxConcurrentStreams: grpc.maxConcurrentStreams,
    requestTimeoutMs: grpc.requestTimeoutMs,
    maxConnections: grpc.maxConnections,
    limits: { ...grpc.limits },
    transport: grpc.transport,
  };
}

/** The `grpc` limits set away from their defaults that the node:http2 fallback does not apply. */
export function ignoredOnNodeHttp2(grpc: GrpcDaemonConfig): string[] {
  if (grpc.transport !== 'node:http2') return [];
  return NOT_ON_NODE_HTTP2.filter((k) => grpc.limits[k] !== H2_LIMITS[k]).map((k) => `grpc.${k}`);
}
