/**
 * Calls ShouldRateLimit once and prints the request and the response, like
 * envoyproxy/ratelimit's client_cmd:
 *
 *   npx tsx examples/envoy/call.ts <host:port> <domain> <key=value[,key=value...]> [more descriptors...]
 *   npx tsx examples/envoy/call.ts 127.0.0.1:8081 edge remote_address=203.0.113.7 path=/api/items,user=alice
 *
 * HITS=n sets the request's hits_addend.
 */
import * as grpc from '@grpc/grpc-js';
import { rlsServiceDefinition } from '../../src/envoy/grpc-server.js';

/** Leaves out fields the server did not set (decoded as null, empty lists or empty bytes). */
function unset(_key: string, value: unknown): unknown {
  if (value === null) return undefined;
  if (Array.isArray(value) && value.length === 0) return undefined;
  if (value instanceof Uint8Array && value.length === 0) return undefined;
  if (typeof value === 'object' && (value as { type?: unknown }).type === 'Buffer') {
    const data = (value as { data?: unknown[] }).data;
    if (Array.isArray(data) && data.length === 0) return undefined;
  }
  return value;
}

const [target, domain, ...specs] = process.argv.slice(2);
if (target === undefined || domain === undefined || specs.length === 0) {
  console.error('usage: call.ts <host:port> <domain> <key=value[,key=value...]> [more descriptors...]');
  process.exit(2);
}
const descriptors = specs.map((spec) => ({
  entries: spec.split(',').map((kv) => {
    const at = kv.indexOf('=');
    return at < 0 ? { key: kv, value: '' } : { key: kv.slice(0, at), value: kv.slice(at + 1) };
  }),
}));
const request = { domain, descriptors, hits_addend: Number(process.env.HITS ?? 0) };
const Client = grpc.makeGenericClientConstructor(rlsServiceDefinition(), 'RateLimitService');
const client = new Client(target, grpc.credentials.createInsecure()) as unknown as {
  ShouldRateLimit(req: unknown, cb: (err: grpc.ServiceError | null, res: unknown) => void): void;
  close(): void;
};
console.log(`request  ${JSON.stringify(request)}`);
client.ShouldRateLimit(request, (err, res) => {
  if (err) console.log(`error    ${grpc.status[err.code]}: ${err.details}`);
  else console.log(`response ${JSON.stringify(res, unset, 2)}`);
  client.close();
  process.exitCode = err ? 1 : 0;
});
