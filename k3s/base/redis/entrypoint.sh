#!/bin/sh
# Start Redis with StreamTTS's config and an ACL file rendered now from the environment or secrets.
# Runs in the official redis image, as root (compose) or as the redis user (k3s).
set -eu

here=$(dirname "$0")
acl_dir=${REDIS_ACL_DIR:-/tmp/redis-acl}
appendfsync=${REDIS_APPENDFSYNC:-everysec}
maxmemory=${REDIS_MAXMEMORY:-0}

case "$appendfsync" in
    always | everysec | no) ;;
    *) echo "entrypoint: REDIS_APPENDFSYNC must be always, everysec or no" >&2; exit 1 ;;
esac

umask 077
mkdir -p "$acl_dir"
sh "$here/render-acl.sh" > "$acl_dir/users.acl"
if [ "$(id -u)" = 0 ]; then
    # docker-entrypoint.sh drops to the redis user before it starts the server.
    chown -R redis "$acl_dir"
fi

exec docker-entrypoint.sh redis-server "$here/redis.conf" \
    --aclfile "$acl_dir/users.acl" \
    --appendfsync "$appendfsync" \
    --maxmemory "$maxmemory"
