# shardgate gateway image, as the spec's reference deployment describes it (port 8080 inside,
# state in /root/.devshardctl, GET /v1/status health check). Use it through compose.yaml.
#   docker build -t shardgate:latest .

# package.json engines: node >= 20.19 (the node:20 images are 20.19 or later).
ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: install everything, compile, then drop the dev dependencies ----
FROM ${NODE_IMAGE} AS build
# better-sqlite3 takes a prebuilt binary when one matches; otherwise node-gyp compiles it, which
# needs python3, make and g++ (not in slim images). nodedir: the headers the node image ships, so a
# source build does not download them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
ENV npm_config_nodedir=/usr/local
WORKDIR /app
# Dependencies first: this layer is reused while only the sources change.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# tsconfig.build.json compiles bench/ too; it is not copied into the runtime image.
COPY bench ./bench
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# ---- runtime ----
FROM ${NODE_IMAGE}
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src

# The spec's state directory is /root/.devshardctl, i.e. root's home: the documented user is root.
USER root
# Inside the container: listen on every interface (the host publishes only its loopback, see
# compose.yaml), port 8080, state in the mounted directory. The variables' own defaults (127.0.0.1,
# ./.devshardctl) stay the bare-metal quick start's.
ENV GATEWAY_HOST=0.0.0.0 DEVSHARD_PORT=8080 DEVSHARD_STORAGE_DIR=/root/.devshardctl
RUN mkdir -p /root/.devshardctl
# Never in the container's writable layer: without a mount, Docker still gives it a volume.
VOLUME ["/root/.devshardctl"]
EXPOSE 8080

# No curl or wget in a slim image: the CLI asks /v1/status itself. --timeout-ms stays under the
# 5 s so node's start-up fits and the check's own one-line reason reaches `docker inspect`.
HEALTHCHECK --interval=30s --timeout=5s --retries=3 --start-period=10s \
  CMD ["node", "dist/src/cli/main.js", "healthcheck", "--timeout-ms", "4000"]

# serve drains in-flight requests and flushes the log on SIGTERM (exit 0). Exec form: node is PID 1
# and gets the signal itself; give it GATEWAY_SHUTDOWN_TIMEOUT_MS (30 s) to stop, e.g. `docker stop -t 45`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["serve"]
