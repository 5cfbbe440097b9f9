import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import type { Logger } from '../logger.js';
import { MAX_SNAPSHOT_BYTES } from './constants.js';
import type { MeshEngine } from './engine-port.js';

/**
 * `snapshotFile`: what this node admitted, restored at start when still in the window (a
 * lone node's restart does not reopen its limits). A missing file is a first start; a bad
 * one is logged and ignored (it can only have under-counted, never opened a limit wider
 * than a restart without it).
 */
export function loadSnapshot(
  engine: MeshEngine,
  file: string | undefined,
  logger: Logger,
  now: number,
): void {
  if (file === undefined || !existsSync(file)) return;
  try {
    if (statSync(file).size > MAX_SNAPSHOT_BYTES) throw new Error(`larger than ${MAX_SNAPSHOT_BYTES} bytes`);
    const r = engine.restoreSnapshot(new Uint8Array(readFileSync(file)), now);
    if (r.ok) logger.info({ file, entries: r.restored }, 'ratemesh restored its windows from the snapshot');
    else logger.warn({ file, reason: r.reason }, 'ratemesh snapshot not restored');
  } catch (err) {
    logger.warn({ file, err: String(err) }, 'ratemesh snapshot not readable');
  }
}

/** Writes the snapshot (to a temporary file, then renamed over the old one). */
export function saveSnapshot(
  engine: MeshEngine,
  file: string | undefined,
  logger: Logger,
  now: number,
): void {
  if (file === undefined) return;
  try {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, engine.snapshot(now), { mode: 0o600 });
    renameSync(tmp, file);
    logger.info({ file }, 'ratemesh wrote its windows to the snapshot');
  } catch (err) {
    logger.warn({ file, err: String(err) }, 'ratemesh could not write the snapshot');
  }
}
