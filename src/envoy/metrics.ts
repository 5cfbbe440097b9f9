import { status } from '@grpc/grpc-js';
import { Counter, type Registry } from 'prom-client';

/**
 * Registers `ratemesh_grpc_requests_total{method, code}` (RLS calls answered,
 * by gRPC status name) in the daemon's registry and returns the function that
 * counts one ShouldRateLimit call. Decisions themselves are counted by the
 * daemon's `ratemesh_decisions_total`, as for the HTTP check API.
 */
export function rlsCallCounter(registry: Registry): (code: status) => void {
  const counter = new Counter({
    name: 'ratemesh_grpc_requests_total',
    help: 'Envoy RLS gRPC calls answered, by method and gRPC status.',
    labelNames: ['method', 'code'],
    registers: [registry],
  });
  const names = new Map<status, string>();
  for (const [name, value] of Object.entries(status)) if (typeof value === 'number') names.set(value, name);
  return (code) => counter.inc({ method: 'ShouldRateLimit', code: names.get(code) ?? String(code) });
}
