import { Counter, type Registry } from 'prom-client';
import { grpcStatusName } from './grpc-status.js';

/**
 * Registers `ratemesh_grpc_requests_total{method, code}` (RLS calls answered,
 * by gRPC status name) in the daemon's registry and returns the function that
 * counts one ShouldRateLimit call. Decisions themselves are counted by the
 * daemon's `ratemesh_decisions_total`, as for the HTTP check API.
 */
export function rlsCallCounter(registry: Registry): (code: number) => void {
  const counter = new Counter({
    name: 'ratemesh_grpc_requests_total',
    help: 'Envoy RLS gRPC calls answered, by method and gRPC status.',
    labelNames: ['method', 'code'],
    registers: [registry],
  });
  // one labelled child per status, looked up by code: no label object per call
  const children = new Map<number, { inc(): void }>();
  return (code) => {
    let child = children.get(code);
    if (child === undefined) {
      child = counter.labels({ method: 'ShouldRateLimit', code: grpcStatusName(code) });
      children.set(code, child);
    }
    child.inc();
  };
}
