# dojang container image: built in one stage, shipped as the bundle alone, non-root, HEALTHCHECK
# by `dojang health` (the configured admin address's /ready).
# Build:  docker build -t dojang .
# Run:    docker run --stop-timeout 10 -p 8080:8080 -p 9901:9901 -e UPSTREAM=host.docker.internal:50051 dojang
#
# Stopping: SIGTERM makes dojang stop accepting, finish in-flight calls for up to drainTimeout
# (config/sidecar.yaml: DRAIN_TIMEOUT, default 8s) and exit 0. `docker stop` sends SIGKILL 10 s
# after SIGTERM (`--stop-timeout` / compose `stop_grace_period` change that): keep DRAIN_TIMEOUT
# below it, with a margin for the exit itself (8s + 2s = 10s). Kubernetes: config/kubernetes.yaml.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The image already has Node 24; --ignore-scripts skips the `node` devDependency's download of its
# own binary (and `prepare`, which builds before the sources are here).
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json ./
COPY src ./src
COPY scripts ./scripts
# the protobuf descriptors (xDS, rate-limit and authorization services) into src/protos, tsc, then
# esbuild bundles the serving process, dependencies included, into dist/dojang.mjs
RUN node scripts/protos.mjs && ./node_modules/.bin/tsc -p tsconfig.json && node scripts/bundle.mjs

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
# What the `dojang` command runs: the launcher (cli.js, and launch.mjs, which parses the config,
# reads the memory budget, the container's cgroup limit by default, and picks V8's sizes before
# node restarts itself with them, handing the parsed config over) and the bundle (no node_modules:
# the bundle carries pino, prom-client, yaml and zod). The source map is read only with
# --enable-source-maps.
# package.json says "type": "module" for dist/cli.js.
COPY --from=build /app/dist/cli.js /app/dist/launch.mjs /app/dist/dojang.mjs /app/dist/dojang.mjs.map ./dist/
COPY package.json ./
COPY config ./config
USER node
EXPOSE 8080 9901
# The sidecar config is driven by env: LISTEN_ADDRESS, UPSTREAM, ADMIN_ADDRESS, DRAIN_TIMEOUT ...
# (the list is at the top of config/sidecar.yaml).
ENV DOJANG_CONFIG=/app/config/sidecar.yaml
# `dojang health` reads the same config and env as the server (DOJANG_CONFIG, ADMIN_ADDRESS),
# asks its admin /ready (0.0.0.0 → 127.0.0.1) and exits 0 ready, 1 not (draining, down), 2 no admin.
HEALTHCHECK --interval=10s --timeout=2s --start-period=5s --retries=3 \
  CMD ["node", "dist/cli.js", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli.js"]
