# petstore as a container: one compiled executable on a small glibc image, running as a non-root user,
# its SQLite database on the /data volume.
#   docker build -t petstore .
#   docker run --rm -v petstore-data:/data petstore keys create --name me
#   docker run -d --name petstore -p 8080:8080 -v petstore-data:/data petstore
#   docker exec petstore petstore backup /data/backup-$(date +%F).db    # while it serves (as petstore, into /data)

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json bunfig.toml ./
COPY src ./src
COPY scripts/petstore.order ./scripts/
RUN npm run build && ./dist/petstore --version

# The compiled Bun executable needs glibc: Debian slim, nothing else.
FROM debian:bookworm-slim AS runtime
RUN groupadd --system --gid 10001 petstore \
 && useradd --system --uid 10001 --gid petstore --home-dir /data --shell /usr/sbin/nologin petstore \
 && mkdir -p /data && chown petstore:petstore /data
COPY --from=build /app/dist/petstore /usr/local/bin/petstore
ENV HOST=0.0.0.0 \
    PORT=8080 \
    DATABASE_URL=/data/petstore.db \
    LOG_FORMAT=json
VOLUME ["/data"]
WORKDIR /data
USER petstore:petstore
EXPOSE 8080
# The executable checks its own /healthz: no curl in the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["petstore", "healthcheck"]
ENTRYPOINT ["petstore"]
CMD ["serve"]
