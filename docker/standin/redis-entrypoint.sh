#!/bin/sh
# The stand-in for the official redis image's docker-entrypoint.sh, the part StreamTTS uses:
# started as root, it gives /data to the redis user and runs the server as that user.
set -eu
if [ "$(id -u)" = 0 ]; then
    find /data \! -user redis -exec chown redis:redis '{}' +
    exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"
