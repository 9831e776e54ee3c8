# syntax=docker/dockerfile:1
# Keygate image: compiled in a build stage with dev dependencies, production
# dependencies installed in a second stage, and a shell-less runtime stage that
# holds node_modules, dist/, bin/, the shipped config and the console's static files only.
#
# Base images, pinned by digest so a rebuild gets the same bytes. The tag before
# each "@" says what the digest is; Docker ignores the tag when a digest is given.
#   node:20-bookworm-slim                       Node 20.20.2 (the suite's Node major)
#   gcr.io/distroless/nodejs20-debian12:nonroot same Node major, Debian 12, no shell
# To move to newer bytes, resolve the tag and paste its digest, e.g.
#   docker buildx imagetools inspect node:20-bookworm-slim   (the "Digest:" line)
# and change both lines together: the two Node majors must stay equal (a test checks).
# The container tests (scripts/container-tests.sh) build this file unchanged on local
# stand-ins, passing the tags only: a stand-in cannot have the real image's digest.
ARG BUILD_IMAGE=node:20-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs20-debian12:nonroot@sha256:2cd820156cf039c8b54ae2d2a97e424b6729070714de8707a6b79f20d56f6a9a

FROM ${BUILD_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
# npm ci runs the "prepare" script, which compiles src/ into dist/.
RUN npm ci --no-audit --no-fund

FROM ${BUILD_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: "prepare" would run tsc, a dev dependency; dist/ comes from the build stage.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
# The runtime stage has no shell to make links with: they are made here and copied.
# bin/keygate.js starts with "#!/usr/bin/env node", and the runtime image has no env.
RUN mkdir -p /links/usr/local/bin /links/usr/bin \
 && ln -s /app/bin/keygate.js /links/usr/local/bin/keygate \
 && cp /usr/bin/env /links/usr/bin/env

FROM ${RUNTIME_IMAGE} AS runtime
ENV NODE_ENV=production
# The distroless Node lives in /nodejs/bin, which is not on its default PATH.
ENV PATH=/nodejs/bin:/usr/local/bin:/usr/bin:/bin
WORKDIR /app
COPY package.json package-lock.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY config ./config
COPY console ./console
COPY examples/demo-keys.yaml ./examples/demo-keys.yaml
# "keygate" on PATH, so `docker compose exec keygate keygate keys create` works.
COPY --from=deps /links/ /
# uid/gid 1000, numeric so Kubernetes can check runAsNonRoot; it needs no passwd entry.
USER 1000:1000
EXPOSE 8000 9090
# No shell and no curl: node itself asks the admin port (exec form).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.KEYGATE_ADMIN_PORT||9090)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["keygate"]
CMD ["serve"]
