/**
 * deploy/helm/ratemesh (issue 28): `helm lint`, and `helm template` with the default values
 * and with Envoy on, each rendered object validated against the Kubernetes API schemas and
 * its daemon config loaded as the pod would load it. No cluster is needed.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { helm } from './helm.js';
import { type K8sObject, loadPodConfig, parseManifests, validateObject } from './validate.js';

const CHART = join(import.meta.dirname, '../../deploy/helm/ratemesh');
const ENVOY_FILE = join(import.meta.dirname, '../../examples/envoy/ratelimit/config.yaml');
const PSK = ['/key/swarm/psk/1.0.0/', '/base16/', 'ab'.repeat(32)].join('\n');

function render(args: string[]): K8sObject[] {
  return parseManifests(helm(['template', 'rm', CHART, ...args]));
}

describe('the Helm chart', { timeout: 240_000 }, () => {
  it('lints', () => {
    const out = helm(['lint', CHART, '--set', 'psk.existingSecret=ratemesh-psk']);
    expect(out).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('refuses to render without a psk', () => {
    expect(() => helm(['template', 'rm', CHART])).toThrow(/psk: set psk.existingSecret/);
  });

  it('renders, with the default values, objects that validate and a config the daemon loads', () => {
    const objects = render(['--set', 'psk.existingSecret=ratemesh-psk']);
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'PodDisruptionBudget',
      'Service',
      'Service',
    ]);
    for (const o of objects) validateObject(o);
    const mesh = objects.find((o) => o.kind === 'Service' && o.spec.clusterIP === 'None')!;
    expect(mesh.spec.publishNotReadyAddresses).toBe(true);
    const cfg = loadPodConfig(
      objects.find((o) => o.kind === 'ConfigMap')!.data!['config.yaml']!,
      '/etc/ratemesh/psk/swarm.key',
    );
    expect(cfg.mesh.bootstrap).toEqual([`dns:${mesh.metadata.name}:4001`]);
    expect(cfg.http.shutdownDelayMs).toBe(5000);
    expect(cfg.mesh.fastGossipIntervalMs).toBeUndefined();
    const pod = objects.find((o) => o.kind === 'Deployment')!.spec.template.spec;
    expect(pod.volumes.find((v: { name: string }) => v.name === 'psk').secret.secretName).toBe(
      'ratemesh-psk',
    );
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan((5000 + 10_000 + 1_000) / 1000);
  });

  it('renders Envoy on (RLS port, descriptor files) and a psk Secret from the values', () => {
    const objects = render([
      '--set-string',
      `psk.value=${PSK}`,
      '--set',
      'envoy.enabled=true',
      '--set-file',
      `envoy.files.config\\.yaml=${ENVOY_FILE}`,
      '--set',
      'replicaCount=5',
    ]);
    for (const o of objects) validateObject(o);
    const secret = objects.find((o) => o.kind === 'Secret')!;
    expect(secret.stringData!['swarm.key']!.trim()).toBe(PSK);
    const envoy = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-envoy'))!;
    expect(envoy.data!['config.yaml']).toBe(readFileSync(ENVOY_FILE, 'utf8'));
    const text = objects.find((o) => o.kind === 'ConfigMap' && !o.metadata.name.endsWith('-envoy'))!.data![
      'config.yaml'
    ]!;
    expect(text).toMatch(/grpc:\n\s+host: 0.0.0.0\n\s+port: 8081/);
    const dep = objects.find((o) => o.kind === 'Deployment')!;
    expect(dep.spec.replicas).toBe(5);
    expect(dep.spec.template.spec.containers[0].ports.map((p: { name: string }) => p.name)).toContain('grpc');
  });

  it('passes mesh.fastGossipIntervalMs through, 0 (off) included', () => {
    for (const [v, want] of [
      ['0', 0],
      ['20', 20],
      ['auto', 'auto'],
    ] as const) {
      const objects = render([
        '--set',
        'psk.existingSecret=ratemesh-psk',
        '--set',
        `mesh.fastGossipIntervalMs=${v}`,
      ]);
      const cfg = loadPodConfig(
        objects.find((o) => o.kind === 'ConfigMap')!.data!['config.yaml']!,
        '/etc/ratemesh/psk/swarm.key',
      );
      expect(cfg.mesh.fastGossipIntervalMs).toBe(want);
    }
  });

  it('the cached helm is the pinned one', () => {
    expect(
      execFileSync(
        join(
          import.meta.dirname,
          '../../node_modules/.cache/ratemesh-helm/lambda-layer-kubectl-v31-2.1.0/helm',
        ),
        ['version', '--short'],
        { encoding: 'utf8' },
      ),
    ).toMatch(/^v3\.17\.3/);
  });
});
