import './polyfill.js';
import { setMaxListeners } from 'node:events';
import type { PeerId, Stream } from '@libp2p/interface';
import * as lp from 'it-length-prefixed';
import { pipe } from 'it-pipe';
import type { Clock } from '../clock.js';
import { deadline } from './deadline.js';
import type { MeshEngine } from './engine-port.js';
import type { MeshNode } from './node.js';
import type { Logger, SyncStats } from './types.js';

/** The direct state-sync protocol: one length-prefixed request frame, one response frame. */
export const SYNC_PROTOCOL = '/ratemesh/sync/1.0.0';

export interface SyncConfig {
  /** Cap on each frame (request and response), bytes. */
  maxFrameBytes: number;
  /** Whole exchange, ms. */
  timeoutMs: number;
  /** Concurrent inbound sync streams per connection. */
  maxInboundStreams: number;
}

/** Reads exactly one length-prefixed frame (or none when the remote closes first). */
async function readFrame(stream: Stream, maxDataLength: number): Promise<Uint8Array | undefined> {
  return pipe(
    stream,
    (source) => lp.decode(source, { maxDataLength }),
    async (frames) => {
      for await (const frame of frames) return frame.subarray();
      return undefined;
    },
  );
}

function reasonOf(err: unknown, timedOut: boolean): string {
  if (timedOut) return 'timeout';
  const name = (err as { name?: string } | undefined)?.name ?? '';
  if (name === 'InvalidDataLengthError' || name === 'InvalidDataLengthLengthError') return 'too-large';
  return 'stream';
}

/**
 * Serves and pulls full state over {@link SYNC_PROTOCOL}. The engine builds and
 * reads the bytes; this class only moves them, with size caps and deadlines.
 */
export class SyncService {
  readonly stats: SyncStats = {
    pulls: 0,
    pullsOk: 0,
    pullsFailed: 0,
    served: 0,
    bytesIn: 0,
    bytesOut: 0,
    failures: {},
  };
  private abort = new AbortController();
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(
    private readonly node: MeshNode,
    private readonly engine: MeshEngine,
    private readonly clock: Clock,
    private readonly cfg: SyncConfig,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    this.abort = new AbortController();
    // every exchange in flight listens on this signal until it ends (deadline().clear()); there
    // are as many as links, so Node's warning at 11 listeners is noise in a large mesh
    setMaxListeners(0, this.abort.signal);
    await this.node.handle(
      SYNC_PROTOCOL,
      (stream, connection) => {
        this.track(this.serve(stream, connection.remotePeer.toString()));
      },
      { maxInboundStreams: this.cfg.maxInboundStreams, force: true },
    );
  }

  /** Stops serving, aborts pulls in flight and waits for them to settle. */
  async stop(): Promise<void> {
    this.abort.abort(new Error('ratemesh stopping'));
    await this.node.unhandle(SYNC_PROTOCOL).catch(() => undefined);
    await Promise.allSettled([...this.inflight]);
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p)).catch(() => undefined);
    return p;
  }

  private fail(reason: string): void {
    this.stats.failures[reason] = (this.stats.failures[reason] ?? 0) + 1;
  }

  private async serve(stream: Stream, from: string): Promise<void> {
    const d = deadline(this.cfg.timeoutMs, this.abort.signal);
    const onAbort = (): void => stream.abort(new Error('sync deadline'));
    d.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const request = await readFrame(stream, this.cfg.maxFrameBytes);
      if (request === undefined) {
        this.fail('no-frame');
        stream.abort(new Error('no sync request'));
        return;
      }
      this.stats.bytesIn += request.byteLength;
      const response = this.engine.answerSync(from, request, this.clock.now());
      if (!(response instanceof Uint8Array)) {
        // Refused (malformed): end without a frame, the puller counts it.
        this.fail(`serve-engine:${response.reason ?? 'rejected'}`);
        await stream.close({ signal: d.signal });
        return;
      }
      if (response.byteLength > this.cfg.maxFrameBytes) {
        this.fail('response-too-large');
        stream.abort(new Error('sync response over the frame cap'));
        return;
      }
      stream.send(lp.encode.single(response));
      this.stats.bytesOut += response.byteLength;
      await stream.close({ signal: d.signal });
      this.stats.served++;
    } catch (err) {
      this.fail(`serve-${reasonOf(err, d.signal.aborted)}`);
      stream.abort(err instanceof Error ? err : new Error(String(err)));
      this.logger.debug({ peer: from, err: String(err) }, 'ratemesh sync serve failed');
    } finally {
      d.signal.removeEventListener('abort', onAbort);
      d.clear();
    }
  }

  /** Pulls `peer`'s state into the engine. Resolves true when the engine accepted it; never throws. */
  pull(peer: PeerId): Promise<boolean> {
    return this.track(this.pullOnce(peer));
  }

  private async pullOnce(peer: PeerId): Promise<boolean> {
    const from = peer.toString();
    this.stats.pulls++;
    const d = deadline(this.cfg.timeoutMs, this.abort.signal);
    let stream: Stream | undefined;
    const onAbort = (): void => stream?.abort(new Error('sync deadline'));
    d.signal.addEventListener('abort', onAbort, { once: true });
    try {
      try {
        stream = await this.node.dialProtocol(peer, SYNC_PROTOCOL, { signal: d.signal });
      } catch (err) {
        this.fail(d.signal.aborted ? 'timeout' : 'dial');
        this.logger.debug({ peer: from, err: String(err) }, 'ratemesh sync dial failed');
        this.stats.pullsFailed++;
        return false;
      }
      const request = this.engine.buildSyncRequest(this.clock.now());
      stream.send(lp.encode.single(request));
      this.stats.bytesOut += request.byteLength;
      await stream.close({ signal: d.signal });
      const response = await readFrame(stream, this.cfg.maxFrameBytes);
      if (response === undefined) {
        this.fail('no-frame');
        this.stats.pullsFailed++;
        return false;
      }
      this.stats.bytesIn += response.byteLength;
      const r = this.engine.receiveSyncResponse(from, response, this.clock.now());
      if (!r.ok) {
        this.fail(`engine:${r.reason ?? 'rejected'}`);
        this.stats.pullsFailed++;
        this.logger.warn({ peer: from, reason: r.reason }, 'ratemesh sync response rejected');
        return false;
      }
      this.stats.pullsOk++;
      return true;
    } catch (err) {
      this.fail(reasonOf(err, d.signal.aborted));
      this.stats.pullsFailed++;
      stream?.abort(err instanceof Error ? err : new Error(String(err)));
      this.logger.debug({ peer: from, err: String(err) }, 'ratemesh sync pull failed');
      return false;
    } finally {
      d.signal.removeEventListener('abort', onAbort);
      d.clear();
    }
  }
}
