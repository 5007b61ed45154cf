# syntax=docker/dockerfile:1
# The pizza shop's agent (the merchant side, SPEC §6): another organisation's software, so its
# image holds its own code and npm packages only — nothing of the household. Built from the
# repository root:  docker build -f deploy/shop.Dockerfile .
# Every build step and the start command are steps of deploy/steps.sh (see the app's Dockerfile).
# The base images are build arguments (stand-ins in CI; the official images by default).
ARG NODE_IMAGE=node:20-bookworm
ARG NODE_SLIM_IMAGE=node:20-bookworm-slim

# 1. The shop's own runtime packages only (deploy/shop-packages.json: none of the app's), at the
#    locked versions; better-sqlite3 is compiled here, where the toolchain is.
FROM ${NODE_IMAGE} AS build
WORKDIR /shop
COPY package.json package-lock.json .npmrc ./
COPY deploy/steps.sh deploy/shop-packages.mjs deploy/shop-packages.json deploy/
RUN bash deploy/steps.sh install-shop

# 2. The runtime: not root; only its data folder is its to write. The settlement DID arrives on a
#    volume mounted read-only (SHOP_SETTLEMENT_DID_FILE).
FROM ${NODE_SLIM_IMAGE} AS shop
ENV NODE_ENV=production
WORKDIR /shop
COPY --from=build /shop/node_modules ./node_modules
COPY --from=build /shop/package.json ./
COPY deploy/steps.sh deploy/healthcheck.mjs deploy/
COPY shop-agent ./shop-agent
RUN mkdir -p /data /settlement && chown 1000:1000 /data
# The base image's `node` user, by number so the runtime need not resolve the name.
USER 1000:1000
EXPOSE 7600
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=6 \
  CMD ["bash", "deploy/steps.sh", "healthcheck-shop"]
CMD ["bash", "deploy/steps.sh", "start-shop"]
