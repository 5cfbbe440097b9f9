/**
 * Aligned gossip rounds (docs/decision-rule.md, "Rounds"). Every node sends its periodic message
 * when its clock reads a multiple of the gossip interval g less the round lead (the expected
 * one-way delay d), and hands a message that arrives within the lead before its next multiple
 * of g to its engine at that instant. So in each round every node takes in the others'
 * messages of that round at the same moment (clock skew and late messages apart): the line
 * between counts every node has seen and counts it may not have moves for all of them at once,
 * and every node's own counts since its message of the round are exactly the ones its peers
 * have not merged yet. Pure functions of the clock; the simulator and the mesh node share them.
 */

/** The nonnegative remainder of `a` by `m`. */
function mod(a: number, m: number): number {
  return ((a % m) + m) % m;
}

/** Ms from `now` (clock ms) to the next tick of an aligned schedule: the next time the clock reads k·g − `lead` (0 when it does now). */
export function nextTickMs(now: number, g: number, lead: number): number {
  const r = mod(now + lead, g);
  return r === 0 ? 0 : g - r;
}

/**
 * Ms from `meshNow` (the mesh's clock) to this node's next aligned tick: the first mark
 * (k·g − `lead`) strictly after it, and never the mark of the tick before (`lastMark`, the mesh
 * time it was armed for) again: the mesh clock's estimate (Engine.roundOffsetMs) moves by a ms or
 * two between ticks, and a tick that found the clock set back before its own mark would otherwise
 * send a second message in one round (3 % more ticks than rounds on 8 processes here), out of
 * round for its peers' lines.
 */
export function roundWaitMs(meshNow: number, g: number, lead: number, lastMark: number): number {
  let wait = nextTickMs(meshNow + 1, g, lead) + 1;
  if (meshNow + wait - lastMark < g / 2) wait += g;
  return wait;
}

/**
 * Ms to hold a message that arrived at `now` (clock ms) before handing it to the engine: until
 * the next multiple of `g` when that is at most `lead` away, else 0 (a late message, or one sent
 * out of round: handed over at once).
 */
export function holdMs(now: number, g: number, lead: number): number {
  if (!(lead > 0)) return 0;
  const r = mod(now, g);
  if (r === 0) return 0;
  const until = g - r;
  return until <= lead ? until : 0;
}
