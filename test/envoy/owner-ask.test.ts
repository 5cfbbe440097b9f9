import { describe, expect, it } from 'vitest';
import { RlsService } from '../../src/envoy/service.js';
import type { Decision, KeyOutcome, PolicyKey } from '../../src/types.js';
import { config, EngineLimiter, entries } from './helpers.js';

const YAML = `
domain: web
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
`;

/** A limiter whose every key is owned elsewhere: checkOrAsk answers later, from its engine (the "owner"). */
class AskingLimiter extends EngineLimiter {
  asked = 0;
  checkOrAsk(
    pairs: readonly PolicyKey[],
    cost: number | readonly number[] = 1,
  ): Promise<Decision & { outcomes: KeyOutcome[] }> {
    this.asked++;
    return new Promise((r) => setTimeout(() => r(this.engine.checkAll(pairs, cost)), 5));
  }
}

const req = (user: string) => ({
  domain: 'web',
  hits_addend: 0,
  descriptors: [{ entries: entries(`user=${user}`), limit: null, hits_addend: null }],
});

describe('Envoy RLS, a descriptor key owned on another node (issue 27)', () => {
  it('shouldRateLimitOrAsk waits for the owner: OK, OK, OK, then OVER_LIMIT', async () => {
    const cfg = config(YAML);
    const limiter = new AskingLimiter(cfg.policies);
    await limiter.start();
    // owners answer all or nothing: keys placed on owners are asked under countHits 'when-allowed'
    const service = new RlsService({ config: cfg, limiter, countHits: 'when-allowed' });
    const codes: string[] = [];
    for (let i = 0; i < 4; i++) {
      const p = service.shouldRateLimitOrAsk(req('alice'));
      expect(p).toBeInstanceOf(Promise);
      const r = await p;
      if (!r.ok) throw new Error(r.message);
      codes.push(r.response.overall_code);
    }
    expect(codes).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
    expect(limiter.asked).toBe(4);
  });

  it('stays synchronous on a limiter without owners', () => {
    const cfg = config(YAML);
    const limiter = new EngineLimiter(cfg.policies);
    void limiter.start();
    // owners answer all or nothing: keys placed on owners are asked under countHits 'when-allowed'
    const service = new RlsService({ config: cfg, limiter, countHits: 'when-allowed' });
    const r = service.shouldRateLimitOrAsk(req('bob'));
    expect(r).not.toBeInstanceOf(Promise);
  });
});
