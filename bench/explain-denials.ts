/**
 * One denied request of each kind, with `explain`'s numbers (issue 26: "a distinct rule for every
 * place that denies"; `Engine.explain`, `GET /v1/explain`). Each case is set up on the production
 * engine with time passed in (a manual clock or the simulator), so the output is the same on every
 * run. The script checks that each case is denied by the rule it names and that `explain` agrees
 * with the `check` that follows; it exits non-zero otherwise.
 *
 *   npm run explain:denials              one block per rule: the decision, then explain's JSON
 *   npm run explain:denials -- --brief   the decision and explain's reason only
 */
import { ManualClock } from '../src/clock.js';
import { Engine } from '../src/decision/engine.js';
import { OwnerSim } from '../src/sim/owner-sim.js';
import { Simulator } from '../src/sim/simulator.js';
import type { Decision, DecisionRule, Explanation, PolicySpec } from '../src/types.js';

const T0 = 1_700_000_000_000;
const brief = process.argv.includes('--brief');

interface Case {
  rule: DecisionRule;
  setup: string;
  decision: Decision;
  explanation?: Explanation;
}

/** `n` checks of (policy, key) on `e` now; how many were admitted. */
function spend(e: Engine, policy: string, key: string, n: number): number {
  let admitted = 0;
  for (let i = 0; i < n; i++) if (e.check(policy, key).allowed) admitted++;
  return admitted;
}

/** explain, then the check it explains: the two must agree. */
function explained(e: Engine, policy: string, key: string, cost = 1): { x: Explanation; d: Decision } {
  const x = e.explain(policy, key, cost);
  const d = e.check(policy, key, cost);
  if (x.allowed !== d.allowed || x.rule !== d.rule || x.retryAfterMs !== d.retryAfterMs)
    throw new Error(`explain (${x.rule}, ${x.retryAfterMs}) and check (${d.rule}, ${d.retryAfterMs}) differ`);
  return { x, d };
}

function cases(): Case[] {
  const out: Case[] = [];
  const clock = new ManualClock(T0);
  const policies: PolicySpec[] = [
    { name: 'api', limit: 10, windowMs: 1000, maxCost: 20 },
    {
      name: 'front',
      limit: 100,
      windowMs: 1000,
      local: { algorithm: 'token-bucket', limit: 2, windowMs: 1000 },
    },
    { name: 'per-node', scope: 'local', limit: 1, windowMs: 1000 },
  ];
  {
    const e = new Engine({ policies, clock, nodeId: 'alone', gossipIntervalMs: 100 });
    spend(e, 'api', 'k', 10);
    const { x, d } = explained(e, 'api', 'k');
    out.push({
      rule: 'global-limit',
      setup: 'one node, L = 10 per 1 s, 10 admitted',
      decision: d,
      explanation: x,
    });
    const c = explained(e, 'api', 'big', 11);
    out.push({
      rule: 'cost-exceeds-limit',
      setup: 'a request of cost 11 on L = 10 (maxCost 20)',
      decision: c.d,
      explanation: c.x,
    });
    spend(e, 'front', 'k', 2);
    const f = explained(e, 'front', 'k');
    out.push({
      rule: 'local-limit',
      setup: 'a global policy (L = 100) with a token bucket of 2 in front, 2 taken',
      decision: f.d,
      explanation: f.x,
    });
    spend(e, 'per-node', 'k', 1);
    const l = explained(e, 'per-node', 'k');
    out.push({
      rule: 'local-limit',
      setup: 'a local-scope policy of L = 1, 1 taken',
      decision: l.d,
      explanation: l.x,
    });
  }
  {
    // three nodes gossiping for 2 s; 150 requests at once on a fresh key, round robin
    const sim = new Simulator({
      nodes: 3,
      policies: [{ name: 'p', limit: 50, windowMs: 10_000 }],
      gossipIntervalMs: 100,
      delayMs: 10,
    });
    sim.runUntil(2_000);
    let admitted = 0;
    for (let i = 0; i < 150; i++) if (sim.request(i % 3, 'p', 'k').allowed) admitted++;
    const e = sim.engines[0]!;
    const x = e.explain('p', 'k');
    const d = sim.request(0, 'p', 'k');
    out.push({
      rule: 'headroom-share',
      setup: `3 nodes (g = 100 ms, d = 10 ms), L = 50 per 10 s, 150 requests at once round robin on a fresh key (${admitted} admitted)`,
      decision: d,
      explanation: x,
    });
  }
  {
    // a node told to expect 3 members, one heard, that has not heard it yet: the start gate
    const e = new Engine({ policies, clock, nodeId: 'new', gossipIntervalMs: 100, expectedMembers: 3 });
    const peer = new Engine({ policies, clock, nodeId: 'running', gossipIntervalMs: 100 });
    e.receiveGossip(peer.nodeId, peer.buildGossip());
    const { x, d } = explained(e, 'api', 'k');
    out.push({
      rule: 'starting',
      setup: 'expectedMembers 3, one member heard, none has heard this node yet',
      decision: d,
      explanation: x,
    });
  }
  {
    // no member heard yet, 2.5 s into the mesh's join wait of 10 s: the Retry-After is the rest of it
    const e = new Engine({ policies, clock, nodeId: 'first', gossipIntervalMs: 100, expectedMembers: 3 });
    e.joinWaitEnds(clock.now() + 7_500);
    const { x, d } = explained(e, 'api', 'k');
    out.push({
      rule: 'starting',
      setup: "expectedMembers 3, no member heard, 7.5 s left of the mesh's join wait",
      decision: d,
      explanation: x,
    });
  }
  {
    // a node told to expect 5 members that has heard none once the mesh said it joined: L/N
    const e = new Engine({ policies, clock, nodeId: 'lonely', gossipIntervalMs: 100, expectedMembers: 5 });
    e.joined();
    spend(e, 'api', 'k', 2);
    const { x, d } = explained(e, 'api', 'k');
    out.push({
      rule: 'fallback-share',
      setup:
        'expectedMembers 5, no peer heard when the mesh says it joined (its join timeout): L/N = 2, 2 taken',
      decision: d,
      explanation: x,
    });
  }
  {
    // d admits 9 and stops; s joins from a's and b's answers, which name d: s holds L/N until d is heard
    const P: PolicySpec[] = [{ name: 'p', limit: 12, windowMs: 10_000, buckets: 10 }];
    const c = new ManualClock(T0);
    const [a, b, dd] = ['a', 'b', 'd'].map(
      (id) => new Engine({ gossipIntervalMs: 10, policies: P, clock: c, nodeId: id }),
    );
    const round = (from: Engine[], to: Engine[]) => {
      for (const f of from) {
        const bytes = f.buildGossip();
        for (const t of to) if (t !== f) t.receiveGossip(f.nodeId, bytes);
      }
    };
    round([a!, b!, dd!], [a!, b!, dd!]);
    spend(dd!, 'p', 'k', 9);
    round([dd!], [a!, b!]);
    const s = new Engine({ gossipIntervalMs: 10, policies: P, clock: c, nodeId: 's' });
    for (const f of [a!, b!]) {
      const res = f.answerSync(s.nodeId, s.buildSyncRequest());
      if (!(res instanceof Uint8Array)) throw new Error('no sync answer');
      s.receiveSyncResponse(f.nodeId, res);
    }
    round([a!, b!], [s]);
    round([s], [a!, b!]);
    spend(s, 'p', 'k', 12);
    const { x, d } = explained(s, 'p', 'k');
    out.push({
      rule: 'startup-hold',
      setup: 'L = 12; s joins from answers naming d, not heard yet: N = 4, L/N = 3, 3 taken',
      decision: d,
      explanation: x,
    });
  }
  {
    const e = new Engine({ policies, clock, nodeId: 'leaving', gossipIntervalMs: 100 });
    e.farewell();
    const { x, d } = explained(e, 'api', 'k');
    out.push({
      rule: 'left-mesh',
      setup: 'after the node said its farewell (graceful stop)',
      decision: d,
      explanation: x,
    });
  }
  {
    // the key's owner killed; a closed policy refuses what its owner cannot decide
    const sim = new OwnerSim({
      nodes: 4,
      policies: [{ name: 'login', limit: 5, windowMs: 60_000, placement: 'owner', failureMode: 'closed' }],
      gossipIntervalMs: 100,
      delayMs: 1,
    });
    sim.sim.runUntil(2_000);
    const ownerId = sim.sim.engines[0]!.remoteOwner('login', 'user:7') ?? sim.sim.ids[0]!;
    const owner = sim.sim.ids.indexOf(ownerId);
    sim.kill(owner);
    const asker = (owner + 1) % 4;
    let got: Decision | undefined;
    sim.request(asker, 'login', 'user:7', 1, (o) => {
      got = o.decision;
    });
    sim.sim.runUntil(sim.now + 100);
    if (got === undefined) throw new Error('the ask was not settled');
    out.push({
      rule: 'owner-unreachable',
      setup: `4 nodes, login L = 5 per min placed on owners, failureMode closed; the key's owner (node ${owner}) killed, asked from node ${asker}`,
      decision: got,
      explanation: sim.sim.engines[asker]!.explain('login', 'user:7'),
    });
  }
  return out;
}

const all = cases();
let bad = 0;
for (const c of all) {
  const d = c.decision;
  const ok = !d.allowed && d.rule === c.rule;
  if (!ok) bad++;
  console.log(`== ${c.rule}${ok ? '' : `  (EXPECTED ${c.rule}, GOT ${d.rule} allowed=${d.allowed})`}`);
  console.log(`   setup: ${c.setup}`);
  console.log(
    `   decision: allowed ${d.allowed}, rule ${d.rule}, mode ${d.mode}, remaining ${d.remaining}, retryAfterMs ${d.retryAfterMs}${d.owner ? `, owner ${JSON.stringify(d.owner)}` : ''}`,
  );
  if (c.explanation !== undefined) {
    console.log(`   explain reason: ${c.explanation.reason}`);
    if (!brief) console.log(`   explain: ${JSON.stringify(c.explanation)}`);
  }
}
const missing = (
  [
    'global-limit',
    'headroom-share',
    'fallback-share',
    'local-limit',
    'cost-exceeds-limit',
    'left-mesh',
    'startup-hold',
    'starting',
    'owner-unreachable',
  ] as DecisionRule[]
).filter((r) => !all.some((c) => c.rule === r));
if (missing.length > 0 || bad > 0) {
  console.error(`not shown as expected: ${[...missing, `${bad} case(s) with another rule`].join(', ')}`);
  process.exit(1);
}
