/**
 * Validates Kubernetes objects against the API's published JSON schemas (the
 * kubernetes-models package: one model per apiVersion and kind, each with the
 * OpenAPI schema of its Kubernetes release). No cluster needed.
 */

import { generateKey } from '@libp2p/pnet';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/daemon/config.js';

type Model = new (data: never) => { validate(): void };
const MODELS: Record<string, Model> = {
  'v1/ConfigMap': ConfigMap as unknown as Model,
  'v1/Secret': Secret as unknown as Model,
  'v1/Service': Service as unknown as Model,
  'apps/v1/Deployment': Deployment as unknown as Model,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget as unknown as Model,
};

/** A Kubernetes object, loosely typed for the tests that read it. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: manifests are read loosely in tests
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** Every document of a multi-document YAML text (empty ones dropped); throws on a YAML error. */
export function parseManifests(text: string): K8sObject[] {
  const out: K8sObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`YAML: ${doc.errors[0]!.message}`);
    const v = doc.toJS();
    if (v !== null && v !== undefined) out.push(v as K8sObject);
  }
  return out;
}

/** Throws naming the object and the schema's complaint when one does not validate (or has no model here). */
export function validateObject(obj: K8sObject): void {
  const id = `${obj.apiVersion}/${obj.kind}`;
  const M = MODELS[id];
  if (M === undefined) throw new Error(`${id} ${obj.metadata?.name}: no schema here for this kind`);
  try {
    new M(obj as never).validate();
  } catch (err) {
    throw new Error(`${id} ${obj.metadata?.name}: ${(err as Error).message}`);
  }
}

/** A pnet swarm key's bytes, as `ratemesh psk` writes them. */
export function swarmKey(): Buffer {
  const k = new Uint8Array(95);
  generateKey(k);
  return Buffer.from(k);
}

/** Loads a daemon config text as the pod would, its psk file stubbed. */
export function loadPodConfig(text: string, pskPath: string) {
  const psk = swarmKey();
  const readFile = (p: string): Buffer => {
    if (p === '/etc/ratemesh/config.yaml') return Buffer.from(text);
    if (p === pskPath) return psk;
    throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
  };
  return loadConfig({ argv: ['--config', '/etc/ratemesh/config.yaml'], env: {}, cwd: '/', readFile });
}
