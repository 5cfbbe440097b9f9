/**
 * deploy/kubernetes (issue 28): every manifest validates against the Kubernetes API
 * schemas, and the topology is the one the probes and the drain were built for.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type K8sObject, loadPodConfig, parseManifests, validateObject } from './validate.js';

const DIR = join(import.meta.dirname, '../../deploy/kubernetes');

function load(): K8sObject[] {
  return readdirSync(DIR)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .flatMap((f) => parseManifests(readFileSync(join(DIR, f), 'utf8')));
}

describe('deploy/kubernetes', () => {
  const objects = load();
  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);

  it('every object validates against the Kubernetes API schemas', () => {
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'PodDisruptionBudget',
      'Service',
      'Service',
    ]);
    for (const o of objects) validateObject(o);
  });

  it('the validator refuses a broken object (it is not a no-op)', () => {
    const dep = structuredClone(byKind('Deployment')[0]!);
    dep.spec.replicas = 'three';
    expect(() => validateObject(dep)).toThrow(/Deployment ratemesh/);
    const svc = structuredClone(byKind('Service')[0]!);
    svc.spec.ports[0].port = 'p2p';
    expect(() => validateObject(svc)).toThrow();
  });

  it('the kustomization lists every manifest', () => {
    const k = parseManifests(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8'))[0] as unknown as {
      resources: string[];
    };
    const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    expect([...k.resources].sort()).toEqual(files.sort());
  });

  it('discovery: a headless Service publishing not-ready pods, named in the bootstrap', () => {
    const mesh = byKind('Service').find((s) => s.spec.clusterIP === 'None')!;
    expect(mesh.spec.publishNotReadyAddresses).toBe(true);
    const cm = byKind('ConfigMap')[0]!;
    const cfg = loadPodConfig(cm.data!['config.yaml']!, '/etc/ratemesh/psk/swarm.key');
    expect(cfg.mesh.bootstrap).toEqual([`dns:${mesh.metadata.name}:${mesh.spec.ports[0].port}`]);
    expect(cfg.mesh.psk).toBeDefined();
    expect(cfg.policies.length).toBeGreaterThan(0);
  });

  it('probes, ports, the psk Secret and a grace period that covers the drain', () => {
    const dep = byKind('Deployment')[0]!;
    const pod = dep.spec.template.spec;
    const c = pod.containers[0];
    expect(c.livenessProbe.httpGet.path).toBe('/livez');
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(c.ports.map((p: { name: string }) => p.name).sort()).toEqual(['grpc', 'http', 'p2p']);
    const pskVolume = pod.volumes.find((v: { name: string }) => v.name === 'psk');
    expect(pskVolume.secret.secretName).toBe('ratemesh-psk');
    expect(pod.securityContext.fsGroup).toBe(pod.securityContext.runAsUser);
    const cfg = loadPodConfig(byKind('ConfigMap')[0]!.data!['config.yaml']!, '/etc/ratemesh/psk/swarm.key');
    const drainS = ((cfg.http.shutdownDelayMs ?? 0) + cfg.http.drainTimeoutMs + 1_000) / 1000;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(drainS);
    expect(c.resources.requests.cpu).toBeDefined();
    expect(dep.spec.strategy.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    const pdb = byKind('PodDisruptionBudget')[0]!;
    expect(pdb.spec.selector.matchLabels).toEqual(dep.spec.selector.matchLabels);
  });
});
