# syntax=docker/dockerfile:1
# Keygate image: compiled in a build stage with dev dependencies; the runtime
# stage holds production dependencies, dist/, bin/ and the shipped config only.
ARG NODE_VERSION=24

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
# npm ci runs the "prepare" script, which compiles src/ into dist/.
RUN npm ci --no-audit --no-fund

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: "prepare" would run tsc, a dev dependency; dist/ comes from the build stage.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY config ./config
COPY examples/demo-keys.yaml ./examples/demo-keys.yaml
# "keygate" on PATH, so `docker compose exec keygate keygate keys create` works.
RUN ln -s /app/bin/keygate.js /usr/local/bin/keygate
# uid/gid 1000 is the base image's "node" user; numeric so Kubernetes can check runAsNonRoot.
USER 1000:1000
EXPOSE 8000 9090
# No curl in the slim image: node itself asks the admin port.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.KEYGATE_ADMIN_PORT||9090)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["keygate"]
CMD ["serve"]
