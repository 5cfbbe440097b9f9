/** HTTP to the replicas: one call, JSON GETs, and the /metrics series the run reads. */
import { Agent, type IncomingMessage, request } from 'node:http';

// ---------------------------------------------------------------- HTTP to the replicas

/** Where a replica's HTTP API is reached: its address on the compose network, or a relay socket. */
export type Target = { host: string; port: number } | { socketPath: string };

export interface HttpReply {
  status: number;
  body: string;
}

export function httpCall(
  target: Target,
  method: 'GET' | 'POST',
  path: string,
  agent: Agent,
  timeoutMs: number,
  body?: Buffer,
  onSocket?: () => void,
): Promise<HttpReply> {
  return new Promise((resolvePromise, reject) => {
    const headers: Record<string, string | number> = {};
    if (body) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = body.length;
    }
    const q = request(
      { ...target, method, path, agent, timeout: timeoutMs, headers },
      (res: IncomingMessage) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          if (text.length < 1 << 20) text += c;
        });
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    q.on('timeout', () => q.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    q.on('error', reject);
    // The request leaves when the agent hands it a socket (it may queue for one first).
    if (onSocket) q.once('socket', onSocket);
    q.end(body);
  });
}

export const ctlAgent = new Agent({ keepAlive: true, maxSockets: 4 });

export async function getJson<T>(target: Target, path: string, timeoutMs = 2000): Promise<T | undefined> {
  try {
    const r = await httpCall(target, 'GET', path, ctlAgent, timeoutMs);
    if (r.status !== 200 && r.status !== 503) return undefined;
    return JSON.parse(r.body) as T;
  } catch {
    return undefined;
  }
}

export interface PeersBody {
  peerId: string;
  live: number;
  stale: number;
  fallback: boolean;
  peers: { id: string; stale: boolean; ageMs: number }[];
}

export interface StatsBody {
  mesh: {
    gossip: { ticks: number; msgsOut: number; bytesOut: number; msgsIn: number };
    sync: { pulls: number; pullsOk: number; pullsFailed: number; bytesIn: number };
    peers: { connected: number; members: number; departed: number };
  };
}

/**
 * The series of /metrics this script reads (Prometheus text format): gossip counters, and the
 * process figures that tell why a reply waited (CPU seconds, event-loop delay since the last
 * scrape from perf_hooks.monitorEventLoopDelay via prom-client, GC time).
 */
export async function scrape(target: Target): Promise<Record<string, number> | undefined> {
  try {
    const r = await httpCall(target, 'GET', '/metrics', ctlAgent, 3000);
    if (r.status !== 200) return undefined;
    const out: Record<string, number> = {};
    for (const line of r.body.split('\n')) {
      const m =
        /^(ratemesh_gossip_messages_total|ratemesh_gossip_bytes_total)\{direction="(in|out)"\} ([0-9.e+-]+)$/.exec(
          line,
        );
      if (m) {
        out[`${m[1]}:${m[2]}`] = Number(m[3]);
        continue;
      }
      const p =
        /^(process_cpu_seconds_total|nodejs_eventloop_lag_max_seconds|nodejs_eventloop_lag_p99_seconds|nodejs_gc_duration_seconds_sum|nodejs_gc_duration_seconds_count)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(
          line,
        );
      if (p) out[p[1]!] = (out[p[1]!] ?? 0) + Number(p[3]);
    }
    return out;
  } catch {
    return undefined;
  }
}
