import type { Stream } from '@libp2p/interface';

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
  if (!isYamuxStream(stream)) return false;
  const y: YamuxStreamLike = stream;
  const eager = y.sendWindowUpdate.bind(y);
  y.sendWindowUpdate = () => {
    if (y.state === ESTABLISHED && y.recvWindowCapacity * 2 > y.recvWindow) return;
    eager();
  };
  return true;
}
