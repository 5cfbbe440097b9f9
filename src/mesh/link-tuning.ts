import type { Stream } from '@libp2p/interface';

/**
 * How often each fix applied and how often the object was not of the shape it
 * expects (a libp2p upgrade changed it: the fix is then skipped, nothing breaks,
 * and test/mesh/direct-gossip.test.ts fails so someone looks).
 */
export const linkTuningStats = { windowTuned: 0, windowSkipped: 0, noiseTuned: 0, noiseSkipped: 0 };

/** The fields of @chainsafe/libp2p-yamux's YamuxStream this module reads (8.x). */
interface YamuxStreamLike {
  state: number;
  recvWindow: number;
  recvWindowCapacity: number;
  sendWindowUpdate(): void;
}

/** YamuxStream's StreamState.Established. */
const ESTABLISHED = 3;

function isYamuxStream(s: unknown): s is YamuxStreamLike {
  const y = s as Partial<YamuxStreamLike>;
  return (
    typeof y.sendWindowUpdate === 'function' &&
    typeof y.recvWindow === 'number' &&
    typeof y.recvWindowCapacity === 'number' &&
    typeof y.state === 'number'
  );
}

/**
 * Yamux (8.x) answers every data frame with a WINDOW_UPDATE frame, so each
 * small gossip message costs its sender a wake-up and a read for the update.
 * On one stream (ours, long-lived, small frames) this sends the update only
 * once half the receive window is used, as Go's yamux does: the sender never
 * waits (half a window, 128 KiB, is still free) and flow control still holds.
 * Other streams of the connection keep yamux's behaviour. A no-op for a
 * stream that is not a yamux stream of this shape. Returns whether it applied.
 */
export function lazyWindowUpdates(stream: Stream): boolean {
  if (!isYamuxStream(stream)) {
    linkTuningStats.windowSkipped++;
    return false;
  }
  linkTuningStats.windowTuned++;
  const y: YamuxStreamLike = stream;
  const eager = y.sendWindowUpdate.bind(y);
  y.sendWindowUpdate = () => {
    if (y.state === ESTABLISHED && y.recvWindowCapacity * 2 > y.recvWindow) return;
    eager();
  };
  return true;
}

/** The parts of @chainsafe/libp2p-noise 17's encrypted stream this module reads. */
interface NoiseStreamLike {
  decoder: {
    lengthDecoder: (data: Uint8Array | { byteLength: number; getUint16(i: number): number }) => number;
  };
  encrypt(chunk: Uint8Array | { subarray(): Uint8Array }): { byteLength: number; subarray(): Uint8Array };
}

function isNoiseStream(c: unknown): c is NoiseStreamLike {
  const n = c as Partial<NoiseStreamLike>;
  return typeof n.encrypt === 'function' && typeof n.decoder?.lengthDecoder === 'function';
}

/** Largest ciphertext we join into one buffer before writing (one noise frame). */
const JOIN_MAX = 65_535 + 2;

/**
 * Two fixes on the noise layer of one connection (noise 17; a no-op on any
 * other shape). Returns whether they applied.
 *
 * - Reads: noise's length decoder throws a RangeError (and V8 captures its
 *   stack) whenever fewer than 2 bytes are buffered, which is at the end of
 *   every read; the decoder catches it to stop. Here it returns 0 instead, so
 *   the frame is seen as incomplete (2 + 0 > bytes held) without an exception.
 * - Writes: each encrypted frame went out as its 2-byte length and its
 *   ciphertext, two socket writes (two syscalls, often two TCP segments and two
 *   reads at the other end). Here they are joined into one buffer first.
 */
export function tuneNoiseConnection(connection: unknown): boolean {
  if (!isNoiseStream(connection)) {
    linkTuningStats.noiseSkipped++;
    return false;
  }
  linkTuningStats.noiseTuned++;
  const n: NoiseStreamLike = connection;
  const decodeLength = n.decoder.lengthDecoder;
  n.decoder.lengthDecoder = (data) => (data.byteLength < 2 ? 0 : decodeLength(data));
  const encrypt = n.encrypt.bind(n);
  n.encrypt = (chunk) => {
    const out = encrypt(chunk);
    return out.byteLength <= JOIN_MAX ? out.subarray() : out;
  };
  return true;
}

/** A connection encrypter's secure calls, as libp2p's upgrader uses them. */
interface EncrypterLike {
  secureInbound(...args: never[]): Promise<{ connection: unknown }>;
  secureOutbound(...args: never[]): Promise<{ connection: unknown }>;
}

/**
 * Wraps a connection-encrypter factory (noise) so every connection it secures
 * gets {@link tuneNoiseConnection}. The encrypter itself is unchanged.
 */
export function tunedEncrypter<C, E extends EncrypterLike>(
  factory: (components: C) => E,
): (components: C) => E {
  return (components) => {
    const enc = factory(components);
    const inbound = enc.secureInbound.bind(enc);
    const outbound = enc.secureOutbound.bind(enc);
    enc.secureInbound = async (...args) => {
      const r = await inbound(...args);
      tuneNoiseConnection(r.connection);
      return r;
    };
    enc.secureOutbound = async (...args) => {
      const r = await outbound(...args);
      tuneNoiseConnection(r.connection);
      return r;
    };
    return enc;
  };
}
