/** Options are validated once, at construction, with the field named. */
import { describe, expect, it } from 'vitest';
import { isRateMeshError } from '../../src/errors.js';
import { rateMeshExpress, rateMeshFastify, rateMeshGuard } from '../../src/http/index.js';
import { makeLimiter } from './harness.js';

const limiter = makeLimiter([
  { name: 'per-ip', limit: 5, windowMs: 10_000 },
  { name: 'login', limit: 5, windowMs: 60_000 },
]);

const cases: [string, Record<string, unknown>, string][] = [
  ['no limiter', { policies: ['per-ip'] }, 'limiter'],
  ['limiter of the wrong shape', { limiter: {}, policies: ['per-ip'] }, 'limiter'],
  ['no policies or routes', { limiter }, 'policies'],
  ['unknown policy', { limiter, policies: ['per-ip', 'nope'] }, 'policies[1]'],
  ['policy twice', { limiter, policies: ['per-ip', 'per-ip'] }, 'policies[1]'],
  ['bad key source', { limiter, policies: [{ policy: 'per-ip', by: 'cookie' }] }, 'policies[0].by'],
  [
    'account binding without account()',
    { limiter, policies: [{ policy: 'per-ip', by: 'account' }] },
    'policies[0].by',
  ],
  ['unknown option (typo)', { limiter, policies: ['per-ip'], standardHeader: 'draft-7' }, 'standardHeader'],
  ['standardHeaders', { limiter, policies: ['per-ip'], standardHeaders: 'draft-9' }, 'standardHeaders'],
  ['legacyHeaders', { limiter, policies: ['per-ip'], legacyHeaders: 'yes' }, 'legacyHeaders'],
  ['statusCode', { limiter, policies: ['per-ip'], statusCode: 200 }, 'statusCode'],
  ['ipv6Subnet', { limiter, policies: ['per-ip'], ipv6Subnet: 129 }, 'ipv6Subnet'],
  [
    'trustProxy',
    { limiter, policies: ['per-ip'], trustProxy: ['10.0.0.0/8', '10.0.0.0/40'] },
    'trustProxy[1]',
  ],
  ['proxyHeader', { limiter, policies: ['per-ip'], proxyHeader: 'x-real-ip' }, 'proxyHeader'],
  ['keyGenerator', { limiter, policies: ['per-ip'], keyGenerator: 'ip' }, 'keyGenerator'],
  ['skip', { limiter, policies: ['per-ip'], skip: true }, 'skip'],
  ['handler', { limiter, policies: ['per-ip'], handler: {} }, 'handler'],
  ['message', { limiter, policies: ['per-ip'], message: 42 }, 'message'],
  ['failureMode', { limiter, policies: ['per-ip'], failureMode: 'ajar' }, 'failureMode'],
  ['maxInFlight', { limiter, policies: ['per-ip'], maxInFlight: 0 }, 'maxInFlight'],
  ['maxInFlight fraction', { limiter, policies: ['per-ip'], maxInFlight: 1.5 }, 'maxInFlight'],
  ['logger', { limiter, policies: ['per-ip'], logger: console.log }, 'logger'],
  ['route path', { limiter, routes: [{ path: 'login', policies: ['login'] }] }, 'routes[0].path'],
  ['route regexp /g', { limiter, routes: [{ path: /login/g, policies: ['login'] }] }, 'routes[0].path'],
  [
    'route method',
    { limiter, routes: [{ method: 'GE T', path: '/', policies: ['login'] }] },
    'routes[0].method[0]',
  ],
  ['route policy', { limiter, routes: [{ path: '/', policies: ['login', 'x'] }] }, 'routes[0].policies[1]'],
  [
    'route failureMode',
    { limiter, routes: [{ path: '/', policies: ['login'], failureMode: 1 }] },
    'routes[0].failureMode',
  ],
  [
    'route unknown field',
    { limiter, routes: [{ path: '/', policies: ['login'], limit: 3 }] },
    'routes[0].limit',
  ],
];

describe.each([
  ['node', rateMeshGuard],
  ['express', rateMeshExpress],
  ['fastify', rateMeshFastify],
] as const)('%s', (fw, make) => {
  // Fastify routes may bring their own rules (config.rateMesh), so none at the top level is valid there.
  const apply = fw === 'fastify' ? cases.filter(([name]) => name !== 'no policies or routes') : cases;
  it.each(apply.map(([name, options, field]) => [name, field, options] as const))(
    '%s → CONFIG_INVALID naming %s',
    (_name, field, options) => {
      let caught: unknown;
      try {
        // biome-ignore lint/suspicious/noExplicitAny: deliberately invalid input
        make(options as any);
      } catch (err) {
        caught = err;
      }
      expect(isRateMeshError(caught, 'ERR_CONFIG_INVALID')).toBe(true);
      expect((caught as { field: string }).field).toBe(field);
      expect((caught as Error).message).toContain(field);
    },
  );

  it('accepts a full, valid configuration', () => {
    expect(() =>
      make({
        limiter,
        policies: ['per-ip'],
        routes: [
          {
            method: ['POST'],
            path: '/login',
            policies: [{ policy: 'login', by: 'ip' }],
            failureMode: 'closed',
          },
        ],
        standardHeaders: 'draft-8',
        legacyHeaders: true,
        ipv6Subnet: 56,
        trustProxy: ['10.0.0.0/8', '::1'],
        maxInFlight: 100,
        logger: false,
      }),
    ).not.toThrow();
  });
});
