import { generateKeyPair, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import { describe, expect, it } from 'vitest';
import { DAEMON_DEFAULTS, loadConfig, parseHostPort } from '../../src/daemon/config.js';
import { isRateMeshError } from '../../src/errors.js';

const POLICIES = 'policies:\n  - { name: api, limit: 10, windowMs: 1000 }\n';

/** loadConfig over an in-memory file system rooted at /cfg. */
function load(files: Record<string, string | Uint8Array>, argv: string[], env: Record<string, string> = {}) {
  return loadConfig({
    argv,
    env,
    cwd: '/cfg',
    readFile: (p) => {
      const f = files[p];
      if (f === undefined) throw new Error('ENOENT: no such file');
      return Buffer.from(f);
    },
  });
}

/** The error a load throws, as `field: message`. */
function errorOf(fn: () => unknown): { field: string | undefined; message: string; code: string } {
  try {
    fn();
  } catch (err) {
    if (isRateMeshError(err)) return { field: err.field, message: err.message, code: err.code };
    throw err;
  }
  throw new Error('expected an error');
}

describe('config file', () => {
  it('loads a minimal file with defaults filled', () => {
    const cfg = load({ '/cfg/a.yaml': POLICIES }, ['--config', 'a.yaml']);
    expect(cfg.configFile).toBe('/cfg/a.yaml');
    expect(cfg.http).toEqual({
      host: DAEMON_DEFAULTS.httpHost,
      port: DAEMON_DEFAULTS.httpPort,
      maxBodyBytes: 16384,
      drainTimeoutMs: 10_000,
    });
    expect(cfg.mesh.bootstrap).toEqual([]);
    expect(cfg.mesh.listen).toBeUndefined();
    expect(cfg.log.level).toBe('info');
    expect(cfg.policies).toEqual([{ name: 'api', limit: 10, windowMs: 1000 }]);
  });

  it('loads JSON too', () => {
    const json = JSON.stringify({ http: { port: 0 }, policies: [{ name: 'a', limit: 1, windowMs: 10 }] });
    const cfg = load({ '/cfg/a.json': json }, ['--config', '/cfg/a.json']);
    expect(cfg.http.port).toBe(0);
  });

  it('loads the example config', async () => {
    const { readFileSync } = await import('node:fs');
    const text = readFileSync(new URL('../../examples/daemon.yaml', import.meta.url));
    const cfg = load({ '/cfg/daemon.yaml': text }, ['--config', 'daemon.yaml']);
    expect(cfg.policies.map((p) => p.name)).toEqual(['api', 'login']);
    expect(cfg.mesh.listen).toEqual(['/ip4/127.0.0.1/tcp/4001']);
    expect(cfg.mesh.fastGossipIntervalMs).toBe('auto');
  });

  it('takes fastGossipIntervalMs as auto, 0 or ms, and passes it to the mesh unset when absent', () => {
    const at = (v: string) =>
      load({ '/cfg/a.yaml': `${POLICIES}mesh: { fastGossipIntervalMs: ${v} }\n` }, ['--config', 'a.yaml'])
        .mesh.fastGossipIntervalMs;
    expect(at('auto')).toBe('auto');
    expect(at('0')).toBe(0);
    expect(at('20')).toBe(20);
    expect(
      load({ '/cfg/a.yaml': POLICIES }, ['--config', 'a.yaml']).mesh.fastGossipIntervalMs,
    ).toBeUndefined();
  });

  const bad: [string, string, string, RegExp][] = [
    ['not an object', '[1, 2]', 'config', /must be an object/],
    ['unknown top field', `${POLICIES}htpp: {}\n`, 'config.htpp', /unknown field/],
    ['unknown http field', `${POLICIES}http: { prot: 1 }\n`, 'config.http.prot', /unknown field/],
    [
      'port not a number',
      `${POLICIES}http: { port: x }\n`,
      'config.http.port',
      /must be an integer 0\.\.65535 \(got "x"\)/,
    ],
    ['port too large', `${POLICIES}http: { port: 70000 }\n`, 'config.http.port', /got 70000/],
    ['port fractional', `${POLICIES}http: { port: 80.5 }\n`, 'config.http.port', /integer/],
    ['host with a space', `${POLICIES}http: { host: "a b" }\n`, 'config.http.host', /host name/],
    ['body cap too small', `${POLICIES}http: { maxBodyBytes: 1 }\n`, 'config.http.maxBodyBytes', /256\.\./],
    ['http not an object', `${POLICIES}http: 8080\n`, 'config.http', /must be an object/],
    ['listen not a list', `${POLICIES}mesh: { listen: /ip4/1 }\n`, 'config.mesh.listen', /list of strings/],
    [
      'bootstrap entry not a string',
      `${POLICIES}mesh: { bootstrap: [1] }\n`,
      'config.mesh.bootstrap[0]',
      /non-empty string/,
    ],
    [
      'gossip zero',
      `${POLICIES}mesh: { gossipIntervalMs: 0 }\n`,
      'config.mesh.gossipIntervalMs',
      /1\.\.60000/,
    ],
    ['loss above 1', `${POLICIES}mesh: { injectLoss: 1.5 }\n`, 'config.mesh.injectLoss', /0\.\.1/],
    [
      'fast gossip a word',
      `${POLICIES}mesh: { fastGossipIntervalMs: fast }\n`,
      'config.mesh.fastGossipIntervalMs',
      /'auto' or whole ms 0\.\.60000/,
    ],
    ['negative delay', `${POLICIES}mesh: { injectDelayMs: -1 }\n`, 'config.mesh.injectDelayMs', /0\.\.60000/],
    ['unknown mesh field', `${POLICIES}mesh: { gossip: 5 }\n`, 'config.mesh.gossip', /unknown field/],
    ['bad log level', `${POLICIES}log: { level: loud }\n`, 'config.log.level', /one of fatal, error/],
    ['hot keys zero', `${POLICIES}stats: { hotKeys: 0 }\n`, 'config.stats.hotKeys', /1\.\.10000/],
    ['no policies', 'http: { port: 1 }\n', 'config.policies', /no policies/],
    ['empty policies', 'policies: []\n', 'config.policies', /at least one/],
    [
      'policy limit bad',
      'policies:\n  - { name: api, limit: -1, windowMs: 1000 }\n',
      'config.policies[0].limit',
      /got -1/,
    ],
    [
      'policy unknown field',
      'policies:\n  - { name: api, limit: 1, windowMs: 1000, limt: 2 }\n',
      'config.policies[0].limt',
      /.+/,
    ],
    [
      'policy duplicate',
      'policies:\n  - { name: a, limit: 1, windowMs: 9 }\n  - { name: a, limit: 1, windowMs: 9 }\n',
      'config.policies[1].name',
      /unique/,
    ],
    ['policies and policyFile', `${POLICIES}policyFile: p.yaml\n`, 'config.policyFile', /not both/],
    ['duplicate key', `${POLICIES}http: { port: 1 }\nhttp: { port: 2 }\n`, '--config', /not valid YAML/],
    ['bad YAML', 'http: [\n', '--config', /not valid YAML/],
  ];
  it.each(bad)('%s → names %s', (_name, text, field, message) => {
    const e = errorOf(() => load({ '/cfg/c.yaml': text }, ['--config', 'c.yaml']));
    expect(e.field).toBe(field);
    expect(e.message.startsWith(`${field}: `)).toBe(true);
    expect(e.message).toMatch(message);
  });

  it('a missing file is named by the flag or variable that pointed at it', () => {
    expect(errorOf(() => load({}, ['--config', 'nope.yaml']))).toMatchObject({
      field: '--config',
      message: expect.stringMatching(/cannot read \/cfg\/nope\.yaml/),
    });
    expect(errorOf(() => load({}, [], { RATEMESH_CONFIG: 'nope.yaml' })).field).toBe('RATEMESH_CONFIG');
  });

  it('the exact message format of the brief', () => {
    const e = errorOf(() =>
      load({ '/cfg/c.yaml': `${POLICIES}http: { port: x }\n` }, ['--config', 'c.yaml']),
    );
    expect(e.message).toBe('config.http.port: must be an integer 0..65535 (got "x")');
    expect(e.code).toBe('ERR_CONFIG_INVALID');
  });

  it('a policy file holds a list or {policies}; its errors say which file', () => {
    const files = {
      '/cfg/c.yaml': 'policyFile: pol/p.yaml\n',
      '/cfg/pol/p.yaml': '- { name: x, limit: 5, windowMs: 100 }\n',
      '/cfg/q.yaml': 'policies:\n  - { name: y, limit: 5, windowMs: 0 }\n',
    };
    expect(load(files, ['--config', 'c.yaml']).policies[0]?.name).toBe('x');
    const e = errorOf(() => load(files, ['--policy-file', 'q.yaml']));
    expect(e.field).toBe('policies[0].windowMs');
    expect(e.message).toMatch(/\(in \/cfg\/q\.yaml\)/);
  });
});

describe('flags and environment', () => {
  const files = {
    '/cfg/c.yaml': `${POLICIES}http: { host: 0.0.0.0, port: 9000 }\nmesh: { bootstrap: [/ip4/10.0.0.1/tcp/1], gossipIntervalMs: 50 }\nlog: { level: warn }\n`,
    '/cfg/other.yaml': '- { name: other, limit: 1, windowMs: 10 }\n',
  };

  it('flags override the file', () => {
    const cfg = load(files, [
      '--config',
      'c.yaml',
      '--http',
      '127.0.0.1:0',
      '--gossip-ms',
      '25',
      '--bootstrap',
      '/ip4/10.0.0.2/tcp/1,/ip4/10.0.0.3/tcp/1',
      '--bootstrap',
      'dns:ratemesh:4001',
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
      '--log-level',
      'debug',
      '--policy-file',
      'other.yaml',
      '--inject-delay-ms',
      '5',
      '--inject-loss',
      '0.2',
    ]);
    expect(cfg.http.host).toBe('127.0.0.1');
    expect(cfg.http.port).toBe(0);
    expect(cfg.mesh.gossipIntervalMs).toBe(25);
    expect(cfg.mesh.bootstrap).toEqual(['/ip4/10.0.0.2/tcp/1', '/ip4/10.0.0.3/tcp/1', 'dns:ratemesh:4001']);
    expect(cfg.mesh.listen).toEqual(['/ip4/127.0.0.1/tcp/0']);
    expect(cfg.log.level).toBe('debug');
    expect(cfg.policies.map((p) => p.name)).toEqual(['other']);
    expect(cfg.mesh.injectDelayMs).toBe(5);
    expect(cfg.mesh.injectLoss).toBe(0.2);
  });

  it('environment variables override the file; flags override them', () => {
    const env = {
      RATEMESH_CONFIG: 'c.yaml',
      RATEMESH_HTTP: '127.0.0.2:7000',
      RATEMESH_GOSSIP_MS: '30',
      RATEMESH_BOOTSTRAP: 'a,b',
    };
    const cfg = load(files, [], env);
    expect(cfg.http).toMatchObject({ host: '127.0.0.2', port: 7000 });
    expect(cfg.mesh.gossipIntervalMs).toBe(30);
    expect(cfg.mesh.bootstrap).toEqual(['a', 'b']);
    expect(cfg.log.level).toBe('warn');
    const cfg2 = load(files, ['--http', '127.0.0.3:1', '--gossip-ms', '40'], env);
    expect(cfg2.http).toMatchObject({ host: '127.0.0.3', port: 1 });
    expect(cfg2.mesh.gossipIntervalMs).toBe(40);
  });

  it('without a config file, --policy-file is enough', () => {
    const cfg = load(files, ['--policy-file', 'other.yaml']);
    expect(cfg.configFile).toBeUndefined();
    expect(cfg.policies[0]?.name).toBe('other');
  });

  const badFlags: [string[], Record<string, string>, string, RegExp][] = [
    [['--http', 'localhost'], {}, '--http', /host:port/],
    [['--http', '127.0.0.1:99999'], {}, '--http', /0\.\.65535/],
    [['--gossip-ms', 'fast'], {}, '--gossip-ms', /must be a number \(got "fast"\)/],
    [['--gossip-ms', '0'], {}, '--gossip-ms', /1\.\.60000/],
    [['--inject-loss', '2'], {}, '--inject-loss', /0\.\.1/],
    [['--log-level', 'chatty'], {}, '--log-level', /one of/],
    [['--http', '1.2.3.4:1', '--http', '1.2.3.4:2'], {}, '--http', /more than once/],
    [['--frobnicate'], {}, 'argv', /Unknown option '--frobnicate'/],
    [['stray'], {}, 'argv', /positional/],
    [[], { RATEMESH_GOSSIP_MS: '-5' }, 'RATEMESH_GOSSIP_MS', /1\.\.60000/],
    [[], { RATEMESH_HTTP: 'nope' }, 'RATEMESH_HTTP', /host:port/],
    [[], { RATEMESH_LOG_LEVEL: 'x' }, 'RATEMESH_LOG_LEVEL', /one of/],
  ];
  it.each(badFlags)('%j %j → names %s', (argv, env, field, message) => {
    const e = errorOf(() => load(files, ['--config', 'c.yaml', ...argv], env));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(message);
  });

  it('no config and no policy file is an error naming --config', () => {
    expect(errorOf(() => load({}, [])).field).toBe('--config');
  });

  it('parses host:port forms', () => {
    expect(parseHostPort('[::1]:80', 'x')).toEqual({ host: '::1', port: 80 });
    expect(parseHostPort('example.org:0', 'x')).toEqual({ host: 'example.org', port: 0 });
    expect(() => parseHostPort('::1:80', 'x')).toThrow(/host:port/);
  });
});

describe('key files', () => {
  it('reads a libp2p private key and a swarm key; rejects garbage naming the source', async () => {
    const key = privateKeyToProtobuf(await generateKeyPair('Ed25519'));
    const psk = `/key/swarm/psk/1.0.0/\n/base16/\n${'ab'.repeat(32)}\n`;
    const files = {
      '/cfg/c.yaml': `${POLICIES}mesh: { keyFile: k.bin, pskFile: s.key }\n`,
      '/cfg/k.bin': key,
      '/cfg/s.key': psk,
      '/cfg/junk': 'hello',
    };
    const cfg = load(files, ['--config', 'c.yaml']);
    expect(cfg.mesh.privateKey).toEqual(key);
    expect(Buffer.from(cfg.mesh.psk ?? []).toString()).toBe(psk);

    expect(errorOf(() => load(files, ['--config', 'c.yaml', '--key-file', 'junk']))).toMatchObject({
      field: '--key-file',
      message: expect.stringMatching(/not a protobuf-encoded libp2p private key/),
    });
    expect(errorOf(() => load(files, ['--config', 'c.yaml'], { RATEMESH_PSK_FILE: 'junk' }))).toMatchObject({
      field: 'RATEMESH_PSK_FILE',
      message: expect.stringMatching(/swarm key/),
    });
    const files2 = { ...files, '/cfg/c.yaml': `${POLICIES}mesh: { keyFile: missing }\n` };
    expect(errorOf(() => load(files2, ['--config', 'c.yaml'])).field).toBe('config.mesh.keyFile');
  });
});
