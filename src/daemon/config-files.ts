import { readFileSync, statSync } from 'node:fs';
import { privateKeyFromProtobuf } from '@libp2p/crypto/keys';
import { parse as parseYaml } from 'yaml';
import { isRateMeshError, RateMeshError } from '../errors.js';
import { compilePolicies } from '../policy/compile.js';
import type { PolicySpec } from '../types.js';
import { fail, objectOf } from '../validate.js';

/**
 * The files the daemon's config points at, read and checked: the config or policy file (YAML
 * or JSON, capped), the policies in it (compiled now, so a bad one stops the daemon before it
 * starts), the node's private key and the mesh's pre-shared key. Every error names the field
 * that pointed at the file, and the file.
 */

/** Largest config or policy file read, bytes. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** Reads a file of at most {@link MAX_CONFIG_BYTES}. */
export function readCapped(path: string): Buffer {
  const st = statSync(path);
  if (!st.isFile()) throw new Error('not a regular file');
  if (st.size > MAX_CONFIG_BYTES) throw new Error(`larger than ${MAX_CONFIG_BYTES} bytes`);
  return readFileSync(path);
}

/** Reads and parses YAML (a superset of JSON); `path` names who pointed at the file. */
export function parseFile(read: (p: string) => Buffer, file: string, path: string): unknown {
  let buf: Buffer;
  try {
    buf = read(file);
  } catch (err) {
    fail(path, `cannot read ${file}: ${errText(err)}`);
  }
  if (buf.length > MAX_CONFIG_BYTES) fail(path, `${file} is larger than ${MAX_CONFIG_BYTES} bytes`);
  try {
    // uniqueKeys rejects duplicate keys; maxAliasCount bounds alias expansion ("billion laughs").
    return parseYaml(buf.toString('utf8'), { uniqueKeys: true, maxAliasCount: 100 });
  } catch (err) {
    fail(path, `${file} is not valid YAML or JSON: ${errText(err).split('\n')[0]}`);
  }
}

/**
 * A policy file holds a list of policies, or an object with a `policies` list.
 * Errors inside it are named `policies[i].field` and say which file.
 */
export function loadPolicyFile(read: (p: string) => Buffer, file: string, path: string): PolicySpec[] {
  const raw = parseFile(read, file, path);
  const list = Array.isArray(raw) ? raw : objectOf(raw, path, ['policies']).policies;
  return checkPolicies(list, '', file);
}

/** Runs the policy compiler now so a bad policy stops the daemon before it starts. */
export function checkPolicies(raw: unknown, prefix: string, file?: string): PolicySpec[] {
  try {
    compilePolicies(raw);
  } catch (err) {
    if (isRateMeshError(err)) {
      const where = file === undefined ? '' : ` (in ${file})`;
      const reason = err.reason;
      throw new RateMeshError(err.code, `${reason}${where}`, `${prefix}${err.field ?? 'policies'}`);
    }
    throw err;
  }
  return raw as PolicySpec[];
}

export function readPrivateKey(read: (p: string) => Buffer, file: string, path: string): Uint8Array {
  let buf: Buffer;
  try {
    buf = read(file);
  } catch (err) {
    fail(path, `cannot read ${file}: ${errText(err)}`);
  }
  try {
    privateKeyFromProtobuf(buf);
  } catch (err) {
    fail(
      path,
      `${file} is not a protobuf-encoded libp2p private key (make one with ratemesh keygen): ${errText(err)}`,
    );
  }
  return new Uint8Array(buf);
}

/** The pnet v1 swarm key format: a header line, an encoding line, 32 bytes in hex. */
const PSK_PATTERN = /^\/key\/swarm\/psk\/1\.0\.0\/\r?\n\/base16\/\r?\n[0-9a-f]{64}(\r?\n\s*)?$/;

export function readPsk(read: (p: string) => Buffer, file: string, path: string): Uint8Array {
  let buf: Buffer;
  try {
    buf = read(file);
  } catch (err) {
    fail(path, `cannot read ${file}: ${errText(err)}`);
  }
  if (!PSK_PATTERN.test(buf.toString('latin1'))) {
    fail(
      path,
      `${file} is not a libp2p pnet swarm key (/key/swarm/psk/1.0.0/, /base16/, 64 lowercase hex digits; make one with ratemesh psk)`,
    );
  }
  return new Uint8Array(buf);
}

export function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
