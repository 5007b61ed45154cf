# syntax=docker/dockerfile:1
# The pizza shop's agent (the merchant side, SPEC §6): another organisation's software, so its
# image holds its own code and npm packages only — nothing of the household. Built from the
# repository root:  docker build -f deploy/shop.Dockerfile .
# Every build step and the start command are steps of deploy/steps.sh (see the app's Dockerfile).

# 1. Runtime packages only; better-sqlite3 is compiled here, where the toolchain is.
FROM node:20-bookworm AS build
WORKDIR /shop
COPY package.json package-lock.json .npmrc ./
COPY deploy/steps.sh deploy/steps.sh
RUN bash deploy/steps.sh install-production

# 2. The runtime: not root; only its data folder is its to write. The settlement DID arrives on a
#    volume mounted read-only (SHOP_SETTLEMENT_DID_FILE).
FROM node:20-bookworm-slim AS shop
ENV NODE_ENV=production
WORKDIR /shop
COPY --from=build /shop/node_modules ./node_modules
COPY package.json ./
COPY deploy/steps.sh deploy/healthcheck.mjs deploy/
COPY shop-agent ./shop-agent
RUN mkdir -p /data /settlement && chown 1000:1000 /data
# The base image's `node` user, by number so the runtime need not resolve the name.
USER 1000:1000
EXPOSE 7600
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=6 \
  CMD ["bash", "deploy/steps.sh", "healthcheck-shop"]
CMD ["bash", "deploy/steps.sh", "start-shop"]
