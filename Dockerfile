# Image for the API, the worker and the console (the same code; compose picks the command).
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# The console's front end, built with the dev dependencies (Vite), copied into the image below.
FROM node:24-bookworm-slim AS web
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ui ./web/ui
COPY tools/scripts/build-web.ts ./tools/scripts/build-web.ts
RUN npx tsx tools/scripts/build-web.ts --force

# The native HEIC decoder (images/heif-decode.c) built against Debian's libheif, by the script
# `npm start` uses; the image below carries only the binary and the library.
FROM node:24-bookworm-slim AS heic
RUN apt-get update \
  && apt-get install -y --no-install-recommends gcc libc6-dev libheif-dev \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=web /app/node_modules ./node_modules
COPY package.json ./
COPY core ./core
COPY images ./images
COPY tools/scripts ./tools/scripts
RUN npx tsx tools/scripts/heic-decoder.ts --out /opt/lenstack/heif-decode

FROM node:24-bookworm-slim
# exiftool-vendored runs the ExifTool it bundles, a Perl program that needs more than perl-base.
# libheif1 (with libde265) is what the native HEIC decoder runs on.
RUN apt-get update \
  && apt-get install -y --no-install-recommends perl ca-certificates libheif1 \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# HEIC_DECODER=native: a process whose native decoder does not start refuses to start, rather
# than running several times slower on the WASM fallback unnoticed.
ENV NODE_ENV=production \
    BLOB_DIR=/data/blobs \
    HEIC_DECODER=native \
    HEIC_DECODER_PATH=/usr/local/lib/lenstack/heif-decode
# The blob volume is shared by api and worker; a new named volume takes this directory's owner.
RUN mkdir -p /data/blobs && chown -R node:node /data
COPY --from=deps /app/node_modules ./node_modules
COPY . .
COPY --from=web /app/web/ui/dist ./web/ui/dist
COPY --from=heic /opt/lenstack/heif-decode /usr/local/lib/lenstack/heif-decode
USER node
EXPOSE 8080 3000
CMD ["npm", "run", "api"]
