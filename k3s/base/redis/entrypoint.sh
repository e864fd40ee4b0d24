#!/bin/sh
# Start Redis with StreamTTS's config and an ACL file rendered now from the environment or secrets.
# Runs in the official redis image, as root (compose) or as the redis user (k3s).
set -eu

here=$(dirname "$0")
acl_dir=${REDIS_ACL_DIR:-/tmp/redis-acl}
appendfsync=${REDIS_APPENDFSYNC:-always}
maxmemory=${REDIS_MAXMEMORY:-0}
# auto: this share of the container's memory limit (cgroup v2 or v1), else of the host's memory
auto_percent=60

case "$appendfsync" in
    always | everysec | no) ;;
    *) echo "entrypoint: REDIS_APPENDFSYNC must be always, everysec or no" >&2; exit 1 ;;
esac

if [ "$maxmemory" = auto ]; then
    limit=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || echo max)
    host=$(awk '/^MemTotal:/ { printf "%.0f\n", $2 * 1024 }' /proc/meminfo)
    case "$limit" in max | "" | *[!0-9]*) limit=$host ;; esac
    [ "$limit" -gt "$host" ] && limit=$host  # cgroup v1 reports a huge number for "no limit"
    maxmemory=$((limit * auto_percent / 100))
    echo "entrypoint: maxmemory auto: ${maxmemory} bytes (${auto_percent}% of ${limit})" >&2
fi

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
    --maxmemory "$maxmemory" \
    "$@"  # more options: a Redis Cluster node's (k3s/overlays/cluster)
