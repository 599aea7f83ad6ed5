# dojang container image: multi-stage, production dependencies only, non-root, HEALTHCHECK on /ready.
# Build:  docker build -t dojang .
# Run:    docker run -p 8080:8080 -p 9901:9901 -e UPSTREAM=host.docker.internal:50051 dojang
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The image already has Node 24; skip the `node` devDependency's download of its own binary.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json ./
COPY src ./src
COPY scripts ./scripts
# tsc, then esbuild bundles the serving process into dist/dojang.mjs (what dist/cli.js loads)
RUN ./node_modules/.bin/tsc -p tsconfig.json && node scripts/bundle.mjs

FROM node:24-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY config ./config
USER node
EXPOSE 8080 9901
# The sidecar config is driven by env: LISTEN_ADDRESS, UPSTREAM, ADMIN_ADDRESS ...
ENV DOJANG_CONFIG=/app/config/sidecar.yaml
HEALTHCHECK --interval=10s --timeout=2s --start-period=5s --retries=3 \
  CMD ["node", "-e", "require('http').get({host:process.env.ADMIN_HOST||'127.0.0.1',port:process.env.ADMIN_PORT||9901,path:'/ready'},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli.js"]
