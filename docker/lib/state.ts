/** What the run has started (replicas, relay, the compose project) and its teardown. */
import { log, PROJECT } from './config.js';
import { children, compose, composeCmd } from './exec.js';
import { ctlAgent } from './http.js';
import { type Relay, type Replica, stopRelay } from './replicas.js';

// ---------------------------------------------------------------- state and teardown

/** The replicas of this run, the partition drill's relay, and whether `up` ran (so teardown downs it). */
export const state: { replicas: Replica[]; relay: Relay | undefined; upStarted: boolean } = {
  replicas: [],
  relay: undefined,
  upStarted: false,
};
export let tornDown = false;

export async function teardown(why: string): Promise<void> {
  if (tornDown) return;
  tornDown = true;
  stopRelay(state.relay);
  state.relay = undefined;
  ctlAgent.destroy();
  for (const c of children) c.kill('SIGKILL');
  if (!state.upStarted || composeCmd.length === 0) return;
  log(`teardown (${why}): ${composeCmd.join(' ')} -p ${PROJECT} down -v`);
  const r = await compose(['down', '-v', '--remove-orphans', '--timeout', '5'], 90_000, false, false).catch(
    (e: unknown) => ({ code: 1, stdout: '', stderr: String(e) }),
  );
  if (r.code !== 0) console.error(`[docker:mesh] down failed: ${r.stderr.trim().slice(-500)}`);
}

export let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n[docker:mesh] ${sig}: tearing down`);
    teardown(sig).finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}
