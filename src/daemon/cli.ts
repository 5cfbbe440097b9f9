import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { isRateMeshError } from '../errors.js';
import { LOG_LEVELS, loadConfig, NODE_FLAGS, parseNodeArgs } from './config.js';
import { type Daemon, startDaemon } from './daemon.js';

/** Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration. */
export const EXIT = { OK: 0, FAILURE: 1, USAGE: 2 } as const;

const MAIN_HELP = `ratemesh — a store-less peer-to-peer rate limiter mesh

Usage:
  ratemesh node --config <file.yaml> [flags]   run a mesh node with the HTTP check API
  ratemesh keygen --out <file> [--force]       write a new libp2p private key (Ed25519)
  ratemesh psk --out <file> [--force]          write a new pnet swarm key for a private mesh
  ratemesh help [command]

Run 'ratemesh node --help' for the node's flags and endpoints.
`;

function nodeHelp(): string {
  const rows = Object.entries(NODE_FLAGS).map(([name, f]) => {
    const left = `  --${name} ${f.arg}`;
    return `${left.padEnd(34)}${f.help}\n${''.padEnd(34)}env ${f.env}`;
  });
  return `Usage: ratemesh node --config <file.yaml> [flags]

Runs one mesh node and serves its HTTP API. Precedence: flag, environment
variable, config file, default. The config file (YAML or JSON; see
examples/daemon.yaml) holds http, mesh, log, stats and policies (or policyFile);
for Envoy, envoy (envoyproxy/ratelimit config files) with grpc (the RLS v3
server: its address, its HTTP/2 transport and the transport's caps and
timeouts, such as maxConnections and idleTimeoutMs; see examples/envoy/ and
docs/envoy.md). --grpc-transport, then RATEMESH_GRPC_TRANSPORT, override
grpc.transport.

Flags:
${rows.join('\n')}
  -h, --help                      this help

Endpoints:
  POST /v1/check   {"policy":"api","key":"ip:1.2.3.4","cost":1}  (or "keys":[...],
                   or "checks":[{"policy":..,"key":..}]) -> the decision as JSON;
                   200 when allowed, 429 when limited (with Retry-After)
  POST /v1/check/batch  {"requests":[<a /v1/check body>, ...]} (1..1000) -> 200 with
                   {"decisions":[...]}: each decided in order, each with its status
  GET  /v1/peers   peer id, multiaddrs and peers with freshness and clock offset
  GET  /v1/stats   hottest keys by admitted rate (?top=N) and mesh counters
  GET  /livez      liveness probe: 200 while the node runs (partitions and draining
                   included); 503 only once the limiter stopped outside a drain
  GET  /readyz     readiness probe: 200 when the node can decide (the L/N fallback
                   included: a single replica and the first pod are ready); 503
                   while draining, before start, and while joining: when discovery
                   finds other members, until the first sync answer (at most 10 s)
  GET  /healthz    the mesh view: 200 when started with a view of the mesh, else 503
                   with a reason (for monitoring, not a probe)
  GET  /metrics    Prometheus exposition
  GET  /v1/limits  the limits in force: policies with their versions, Envoy domains
                   and descriptors, the last config reload

Log levels: ${LOG_LEVELS.join(', ')}. Logs are JSON lines on stdout; the line
"ratemesh node started" carries "http" (the bound URL) and "peerId".
SIGTERM or SIGINT drains: /readyz fails at once, requests are still served for
--shutdown-delay-ms (default 0; 5000 on Kubernetes), then the listeners close,
in-flight requests finish within --drain-timeout-ms (10000), the farewell is
sent to the peers, and the process exits 0.
SIGHUP reloads the config (the config, policy and Envoy files are also watched):
policies and descriptors change at once, the counts of unchanged policies are
kept; an invalid config, or a change to a setting that needs a restart (listen
addresses, ports, keys, bootstrap, gossip timing), is refused and logged with
the file and field, and the old config keeps serving.
Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration.
`;
}

/** Output streams and process hooks, injectable for tests. */
export interface CliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
}

const defaultIo = (): CliIo => ({
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  env: process.env,
  cwd: process.cwd(),
});

/**
 * Runs the CLI. For `node` it resolves once the daemon has started and
 * installs signal handlers that drain and exit; other commands resolve with
 * their exit code.
 */
export async function main(argv: readonly string[], io: CliIo = defaultIo()): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case '-h':
    case '--help':
      io.stdout(MAIN_HELP);
      return command === undefined ? EXIT.USAGE : EXIT.OK;
    case 'help':
      io.stdout(rest[0] === 'node' ? nodeHelp() : MAIN_HELP);
      return EXIT.OK;
    case 'node':
      return runNode(rest, io);
    case 'keygen':
    case 'psk':
      return writeKey(command, rest, io);
    default:
      io.stderr(`ratemesh: unknown command ${JSON.stringify(command)}\n\n${MAIN_HELP}`);
      return EXIT.USAGE;
  }
}

async function runNode(argv: readonly string[], io: CliIo): Promise<number> {
  let config: ReturnType<typeof loadConfig>;
  try {
    if (parseNodeArgs(argv).help) {
      io.stdout(nodeHelp());
      return EXIT.OK;
    }
    config = loadConfig({ argv, env: io.env, cwd: io.cwd });
  } catch (err) {
    io.stderr(`ratemesh: invalid configuration: ${describe(err)}\n`);
    return EXIT.USAGE;
  }

  const logger = pino({ name: 'ratemesh', level: config.log.level });
  let daemon: Daemon;
  try {
    daemon = await startDaemon({
      config,
      logger,
      meshLogger: logger.child({ component: 'mesh' }),
      // a reload reads the same flags, environment and files again
      load: () => loadConfig({ argv, env: io.env, cwd: io.cwd }),
    });
  } catch (err) {
    if (isRateMeshError(err)) {
      io.stderr(`ratemesh: invalid configuration: ${describe(err)}\n`);
      return EXIT.USAGE;
    }
    logger.fatal({ err: { message: describe(err) } }, 'failed to start');
    io.stderr(`ratemesh: failed to start: ${describe(err)}\n`);
    return EXIT.FAILURE;
  }

  let signals = 0;
  let stopped = false;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      // Handlers stay installed until exit, so a late signal never kills the process mid-exit.
      if (stopped) process.exit(EXIT.OK);
      logger.warn({ signal }, 'second signal: exiting without draining');
      process.exit(EXIT.FAILURE);
    }
    logger.info({ signal }, 'signal received: draining');
    // If stopping hangs, the process still ends.
    setTimeout(
      () => {
        logger.error({}, 'stop did not finish in time: exiting');
        process.exit(EXIT.FAILURE);
      },
      (config.http.shutdownDelayMs ?? 0) + config.http.drainTimeoutMs + 10_000,
    ).unref();
    daemon.stop().then(
      () => {
        stopped = true;
        process.exitCode = EXIT.OK;
        // Handles the limiter should have closed must not keep the process up.
        setTimeout(() => {
          logger.warn({}, 'handles still open after stop: exiting anyway');
          process.exit(EXIT.OK);
        }, 2_000).unref();
      },
      (err: unknown) => {
        logger.error({ err: { message: describe(err) } }, 'stop failed');
        process.exit(EXIT.FAILURE);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // SIGHUP reloads the config (the files are also watched): see Daemon.reload
  process.on('SIGHUP', () => {
    if (signals === 0) daemon.reload('SIGHUP');
  });
  return EXIT.OK;
}

async function writeKey(command: 'keygen' | 'psk', argv: readonly string[], io: CliIo): Promise<number> {
  let out: string;
  let force: boolean;
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        out: { type: 'string', short: 'o' },
        force: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
    if (values.help) {
      io.stdout(`Usage: ratemesh ${command} --out <file> [--force]\n`);
      return EXIT.OK;
    }
    if (values.out === undefined) throw new Error('--out <file> is required');
    out = resolve(io.cwd, values.out);
    force = values.force === true;
  } catch (err) {
    io.stderr(`ratemesh ${command}: ${describe(err)}\n`);
    return EXIT.USAGE;
  }
  try {
    if (command === 'keygen') {
      const { generateKeyPair, privateKeyToProtobuf } = await import('@libp2p/crypto/keys');
      const key = await generateKeyPair('Ed25519');
      writeFileSync(out, privateKeyToProtobuf(key), { mode: 0o600, flag: force ? 'w' : 'wx' });
      io.stdout(`${JSON.stringify({ keyFile: out, peerId: key.publicKey.toString() })}\n`);
    } else {
      const { generateKey } = await import('@libp2p/pnet');
      const psk = new Uint8Array(95);
      generateKey(psk);
      writeFileSync(out, psk, { mode: 0o600, flag: force ? 'w' : 'wx' });
      io.stdout(`${JSON.stringify({ pskFile: out })}\n`);
    }
  } catch (err) {
    io.stderr(`ratemesh ${command}: cannot write ${out}: ${describe(err)}\n`);
    return EXIT.FAILURE;
  }
  return EXIT.OK;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs `main` when this file is the entry point (`tsx src/daemon/cli.ts`, `node dist/daemon/cli.js`). */
export function runAsScript(argv = process.argv.slice(2)): void {
  main(argv).then(
    (code) => {
      if (code !== EXIT.OK) process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`ratemesh: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = EXIT.FAILURE;
    },
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  runAsScript();
}
