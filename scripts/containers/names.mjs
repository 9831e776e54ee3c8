// @ts-check
// Prints, as shell assignments, the base image names the shipped Dockerfile and
// docker-compose.yml use, so the stand-ins are built under exactly those names.
// The Dockerfile pins its bases by digest (ARG defaults "name:tag@sha256:…"); a local
// stand-in cannot have the real image's digest, so the tier builds with the tag part
// (passed back as --build-arg) and the static test checks the two stay one image.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const root = new URL('../../', import.meta.url);
const dockerfile = readFileSync(new URL('Dockerfile', root), 'utf8');
/** @type {{ services: Record<'redis' | 'prometheus' | 'keygate', { image: string }> }} */
const compose = parse(readFileSync(new URL('docker-compose.yml', root), 'utf8'));

/** @param {string} name @returns {string} the image without its digest */
const arg = (name) => {
  const m = new RegExp(`^ARG ${name}=(\\S+)$`, 'm').exec(dockerfile);
  if (!m) throw new Error(`Dockerfile: no "ARG ${name}=…" default`);
  const [tagged, digest] = (m[1] ?? '').split('@');
  if (!/^sha256:[0-9a-f]{64}$/.test(digest ?? ''))
    throw new Error(`Dockerfile: ${name} is not pinned by digest: ${m[1]}`);
  return tagged ?? '';
};
/** @param {string} image @param {RegExp} re */
const major = (image, re) => {
  const m = re.exec(image);
  if (!m?.[1]) throw new Error(`cannot read the Node major from ${image}`);
  return m[1];
};

const build = arg('BUILD_IMAGE');
const runtime = arg('RUNTIME_IMAGE');
const nodeMajor = major(build, /^node:(\d+)-/);
if (major(runtime, /nodejs(\d+)-/) !== nodeMajor)
  throw new Error(`Dockerfile: build (${build}) and runtime (${runtime}) Node majors differ`);

const out = {
  BUILD_IMAGE: build,
  RUNTIME_IMAGE: runtime,
  NODE_MAJOR: nodeMajor,
  REDIS_IMAGE: compose.services.redis.image,
  PROMETHEUS_IMAGE: compose.services.prometheus.image,
  KEYGATE_IMAGE: compose.services.keygate.image,
};
for (const [k, v] of Object.entries(out)) {
  if (!/^[\w.:/@-]+$/.test(v)) throw new Error(`unexpected characters in ${k}=${v}`);
  console.log(`${k}=${v}`);
}
