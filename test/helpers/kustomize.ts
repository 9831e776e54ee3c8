import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * A small kustomize for tests (no kustomize or kubectl binary here). It
 * implements only the fields our kustomizations use, and throws on any other
 * field, so it cannot silently render something kustomize would not:
 *   resources (files and directories), namespace, images, patches (strategic
 *   merge patch files, matched by kind + name; lists of named items merged by
 *   name, like containers, env and ports).
 */
export type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; [k: string]: unknown };

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'patches']);

export function readManifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`);
      return d.toJS() as Manifest | null;
    })
    .filter((m): m is Manifest => m !== null);
}

export function kustomization(dir: string): Record<string, unknown> {
  const k = readManifests(join(dir, 'kustomization.yaml'))[0] as unknown as Record<string, unknown>;
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization') throw new Error(`${dir}: not a Kustomization`);
  for (const key of Object.keys(k)) if (!SUPPORTED.has(key)) throw new Error(`${dir}/kustomization.yaml: field ${key} is not supported by the test renderer`);
  return k;
}

/** The files a kustomization's `patches` name (they are partial manifests). */
export function patchFiles(dir: string): string[] {
  return ((kustomization(dir).patches ?? []) as Array<{ path: string }>).map((p) => join(dir, p.path));
}

export function render(dir: string): Manifest[] {
  const k = kustomization(dir);
  let out: Manifest[] = [];
  for (const r of (k.resources ?? []) as string[]) {
    const p = join(dir, r);
    out.push(...(statSync(p).isDirectory() ? render(p) : readManifests(p)));
  }
  for (const patch of (k.patches ?? []) as Array<Record<string, unknown>>) {
    if (Object.keys(patch).join() !== 'path') throw new Error(`${dir}: only "patches: - path: file" is supported`);
    for (const doc of readManifests(join(dir, patch.path as string))) {
      const i = out.findIndex((m) => m.kind === doc.kind && m.metadata.name === doc.metadata.name);
      if (i === -1) throw new Error(`${dir}: patch ${patch.path as string} matches no ${doc.kind}/${doc.metadata.name}`);
      out[i] = merge(out[i], doc) as Manifest;
    }
  }
  if (typeof k.namespace === 'string') out = out.map((m) => ({ ...m, metadata: { ...m.metadata, namespace: k.namespace as string } }));
  for (const img of (k.images ?? []) as Array<{ name: string; newName?: string; newTag?: string }>) {
    for (const m of out) {
      for (const c of podContainers(m)) {
        const [name, tag] = splitImage(c.image as string);
        if (name === img.name) c.image = `${img.newName ?? name}${img.newTag ?? tag ? `:${img.newTag ?? tag}` : ''}`;
      }
    }
  }
  return out;
}

function splitImage(image: string): [string, string | undefined] {
  const at = image.lastIndexOf(':');
  return at > image.lastIndexOf('/') ? [image.slice(0, at), image.slice(at + 1)] : [image, undefined];
}

/** Containers of a workload's pod template (mutable, for the images transformer and tests). */
export function podContainers(m: Manifest): Array<Record<string, unknown>> {
  const spec = (m.spec as { template?: { spec?: { containers?: unknown[]; initContainers?: unknown[] } } } | undefined)?.template?.spec;
  return [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])] as Array<Record<string, unknown>>;
}

function merge(base: unknown, patch: unknown): unknown {
  if (Array.isArray(patch)) {
    if (!Array.isArray(base) || !patch.every((p) => isObject(p) && typeof p.name === 'string')) return patch;
    const out = base.map((b) => structuredClone(b) as unknown);
    for (const p of patch as Array<Record<string, unknown>>) {
      const i = out.findIndex((b) => isObject(b) && b.name === p.name);
      if (i === -1) out.push(p);
      else out[i] = merge(out[i], p);
    }
    return out;
  }
  if (isObject(patch) && isObject(base)) {
    if ('$patch' in patch) throw new Error('$patch directives are not supported by the test renderer');
    const out: Record<string, unknown> = { ...base };
    for (const [key, v] of Object.entries(patch)) out[key] = v === null ? undefined : merge(base[key], v);
    return out;
  }
  return patch;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

