/** An abort signal that fires after `ms` or when `parent` aborts; `clear()` releases its timer. */
export interface Deadline {
  readonly signal: AbortSignal;
  clear(): void;
}

/**
 * Like `AbortSignal.any([parent, AbortSignal.timeout(ms)])`, but the timer is
 * ours and cleared as soon as the guarded work ends, so `stop()` can leave no
 * timers behind.
 */
export function deadline(ms: number, parent?: AbortSignal): Deadline {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`timed out after ${ms} ms`)), ms);
  const onParent = (): void => ac.abort(parent?.reason);
  if (parent !== undefined) {
    if (parent.aborted) ac.abort(parent.reason);
    else parent.addEventListener('abort', onParent, { once: true });
  }
  return {
    signal: ac.signal,
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParent);
    },
  };
}
