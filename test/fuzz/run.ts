/**
 * The long fuzz run: `npm run fuzz -- [count] [seed]` (default 200,000 inputs,
 * seed 1). Prints the report; exits 1 when any invariant broke.
 */
import { fuzz } from './fuzz.js';

const count = Number(process.argv[2] ?? 200_000);
const seed = Number(process.argv[3] ?? 1);
if (!Number.isInteger(count) || count < 1 || !Number.isInteger(seed)) {
  console.error('usage: npm run fuzz -- [count >= 1] [seed]');
  process.exit(2);
}
const t0 = performance.now();
const r = fuzz(count, seed);
const s = ((performance.now() - t0) / 1000).toFixed(1);
console.log(`fuzz: ${r.inputs} inputs, seed ${r.seed}, ${s} s`);
console.log(`  kinds    ${JSON.stringify(r.kinds)}`);
console.log(`  targets  ${JSON.stringify(r.targets)}`);
console.log(`  accepted ${r.accepted}, capped ${r.capped}, peers ignored ${r.peersIgnored}`);
console.log(
  `  dropped  ${JSON.stringify(Object.fromEntries(Object.entries(r.dropped).sort((a, b) => b[1] - a[1])))}`,
);
console.log(`  failures ${r.failureCount}`);
for (const f of r.failures) console.log(`    ${f}`);
process.exit(r.failureCount === 0 ? 0 : 1);
