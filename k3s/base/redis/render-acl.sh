#!/bin/sh
# Print StreamTTS's Redis ACL file on stdout: one user per service, each with the least it needs.
#
# Passwords come from REDIS_PASSWORD_<USER> or from the file named by REDIS_PASSWORD_<USER>_FILE
# (Docker and Kubernetes secrets); only their SHA-256 is written, so the file holds no secret.
# compose mounts this folder too (kustomize reads only below its root, so the files live here).
set -eu

MIN_PASSWORD_LENGTH=16

die() {
    echo "render-acl: $*" >&2
    exit 1
}

# password_hash USER: the SHA-256 (hex) of that user's password, after checking it.
password_hash() {
    var="REDIS_PASSWORD_$1"
    eval "value=\${$var:-}"
    eval "file=\${${var}_FILE:-}"
    if [ -n "$file" ]; then
        [ -r "$file" ] || die "$var""_FILE: cannot read $file"
        value=$(cat "$file")
    fi
    [ -n "$value" ] || die "set $var (or $var""_FILE)"
    [ "${#value}" -ge "$MIN_PASSWORD_LENGTH" ] ||
        die "$var is shorter than $MIN_PASSWORD_LENGTH characters"
    # The services take it inside REDIS_URL: only characters that need no escaping in a URL.
    case "$value" in
        *[!A-Za-z0-9._~-]*) die "$var may only use A-Z a-z 0-9 . _ ~ -" ;;
    esac
    printf '%s' "$value" | sha256sum | cut -d ' ' -f 1
}

intake=$(password_hash INTAKE)
edge=$(password_hash EDGE)
synth=$(password_hash SYNTH)
admin=$(password_hash ADMIN)

# What a client library sends on connect; deliberately not @connection, which holds CLIENT KILL.
CONNECT="+auth +hello +ping +echo +select +reset +quit +client|setname +client|getname +client|id"
# Cluster mode is found from INFO cluster; a cluster client learns the slots and the commands'
# key positions (servicekit/connect.py).
CONNECT="$CONNECT +info +cluster|slots +cluster|shards +cluster|nodes +command +readonly"
SCRIPTS="+evalsha +eval +evalsha_ro +eval_ro +script|load +script|exists"
# edge's rate limiters keep buckets and slots under rl/edge/* and rl/edge-streams/* (never
# intake's rl/intake*); these categories hold only keyed commands, so the key patterns bound them.
RATE_LIMIT="~rl/edge/* ~rl/edge-streams/* $SCRIPTS +@string +@hash +@sortedset +del +exists +expire +pexpire +ttl +pttl"
RATE_LIMIT="$RATE_LIMIT +time"
# Durable Streams (/v1/stream, libs/durablestreams): a stream's keys ds/{<family>}/... and a
# fork's link ds/{<path>}/family. Its scripts run a stream's whole step (the meta hash, the log, a
# lapsed stream's removal, the expiry backstop). intake writes (XADD, the link's SET); edge reads
# (XRANGE, the waiters' XREAD), slides a read stream's TTL and removes lapsed ones, so it holds
# the hash and DEL commands but adds no entry. EXISTS: a dropped fork link checks whether a stream
# came to its path meanwhile.
DURABLE="~ds/* $SCRIPTS +hgetall +hget +hset +hincrby +del +pexpireat +persist +get +exists +xrange"

# `default` is off: an unauthenticated connection may run nothing (the health checks log in as
# admin). It keeps every permission all the same, because Redis 7.x replays the AOF as this user
# and checks each MULTI/EXEC against it (redis/redis#14541, fixed after 7.4.6): with fewer rights,
# every script's writes (replicated as MULTI/EXEC) would vanish at the next restart.
echo "user default off nopass resetkeys resetchannels ~* &* +@all"
# For operators (backups, BGREWRITEAOF, debugging); no service uses it.
echo "user admin on #$admin resetkeys resetchannels ~* &* +@all"
# intake: takes the client's token (a hash under rl/intake/*) in its own step, then one script
# writes catalog/*, pub/casts/* and the lane's jobs/lane/* (one lane: one slot); it reads
# synth/voices. WAIT: a submit is answered once a replica has it (INTAKE_WAIT_REPLICAS). On a
# cluster it then rings jobs/bell (XADD) for the movers.
# Open casts: the same, with jobs/live/lane/*; their fragments go to catalog/*. XREAD: the shared
# tail that /v1/audio/speech and the live WebSocket follow casts through, with its own wake stream
# under tail/wake/intake/*, where a cast that joins adds an entry to wake it (one selector holds
# every key of that one XREAD; no CLIENT UNBLOCK, which could end anyone's blocked read).
# A cancel: one script reads the log's last record and flags cancel/*, then the id goes to
# cancels. The admin's delete: intake only adds a request to deletes (no DEL, no read of it),
# which a worker carries out when the admin token's proof comes with it. Per-client limits beside
# the submit bucket (rl/intake-*): the open casts a client holds (a sorted set kept by
# castlog/opencap.py, which reads the held casts' catalogs), its live text bucket, its live
# sessions' and /v1 streams' slots.
echo "user intake on #$intake resetkeys resetchannels -@all $CONNECT +time +wait" \
    "~catalog/* ~pub/casts/* ~jobs/lane/* ~jobs/live/lane/* ~jobs/bell ~rl/intake/* ~rl/intake-*" \
    "%R~synth/voices" \
    "$SCRIPTS +xadd +xrange +xrevrange +xlen +exists +hmget +hset +pexpire" \
    "+zadd +zrange +zrem +zremrangebyscore +zcard +zscore" \
    "(~pub/casts/* ~cancel/* ~cancels $SCRIPTS +xrevrange +set +xadd)" \
    "($DURABLE +xadd +set)" \
    "(~deletes +xadd)" \
    "(%R~pub/casts/* %R~tail/wake/intake/* +xread)" \
    "(~tail/wake/intake/* +xadd +pexpire)"
# synth: moves the lanes' jobs into jobs and jobs/live (group lanes: read, re-add, WAIT for a
# replica with SYNTH_WAIT_REPLICAS, ack, drop; on a cluster it waits on jobs/bell for a lane);
# the group on jobs (scripts hand jobs back and remove consumers that are gone); each job's
# tally; receipts, dead letters, voices; reads recipes; appends to casts. TIME: the scripts stamp
# records with Redis's clock. MULTI: a tally's write and its expiry go together (one key).
# The archiver: a group on progress/done; SCAN finds finished logs; one script rewrites a log as
# its archived eos (DUMP and RESTORE shrink it) and drops the recipe; it empties archive/trash.
# Cancels, the admin's deletes and the open casts' text in catalog/*: one blocking XREAD follows
# them all (synth/broadcasts.py; one selector holds every key, as one command must fit one
# selector), with its own wake stream under tail/wake/synth/*, where an admitted open cast adds
# an entry to wake it (no CLIENT UNBLOCK, which could end anyone's blocked read). An abandoned
# open cast is closed in catalog/*. Admission reads a cast's cancel/* flag; the archive's delete
# script (above) carries a delete out.
# Admission: each worker's capacity in synth/capacity; the queue clerk's lock synth/queue-clerk
# (taken, kept and let go by scripts: SET, GET, DEL inside them).
# The chunk cache: entries synth/chunk/*, and their index synth/chunks/* kept by one script.
echo "user synth on #$synth resetkeys resetchannels -@all $CONNECT +info +time +wait +multi +exec +discard +scan" \
    "~jobs ~jobs/live $SCRIPTS +xreadgroup +xack +xautoclaim +xclaim +xpending +xinfo +xlen +xrange" \
    "+xgroup|create +xgroup|createconsumer +xgroup|delconsumer" \
    "(~jobs/lane/* ~jobs/live/lane/* +xreadgroup +xack +xdel +xautoclaim +xgroup|create +xrange)" \
    "(~jobs ~jobs/live +xadd)" \
    "(~jobs/bell +xread +xrevrange)" \
    "(~synth/tally/* +hset +hgetall +hincrby +expire +del)" \
    "(~jobs/dead ~progress/done ~synth/voices +xadd)" \
    "(~catalog/* $SCRIPTS +xadd +xrange +xrevrange)" \
    "(~pub/casts/* $SCRIPTS +xadd +xrange +xrevrange +xlen +xinfo|stream +exists +dump +restore)" \
    "(~progress/done +xreadgroup +xack +xautoclaim +xgroup|create)" \
    "(~pub/casts/* ~catalog/* ~archive/trash ~archive/played $SCRIPTS +del +zrem)" \
    "(~archive/trash +xadd +xrange +xdel)" \
    "(~archive/played +zscore +zrem)" \
    "(~cancel/* ~cancels +exists +xrevrange)" \
    "(~cancels ~deletes +xrevrange)" \
    "(%R~catalog/* %R~cancels %R~deletes %R~tail/wake/synth/* +xread)" \
    "(~tail/wake/synth/* +xadd +pexpire)" \
    "(~synth/capacity ~synth/queue-clerk $SCRIPTS +hset +hgetall +hdel +set +get +del +pexpire)" \
    "(~synth/chunk/* +getex +set +del)" \
    "(~synth/chunks/* $SCRIPTS +zadd +zpopmin +hget +hset +hdel +incrby +decrby)"
# edge: the public read path only reads pub/casts/*. A new listener wakes the shared tail's
# blocking XREAD (so that it reads the new cast too) by an XADD to the tail's own wake stream under
# tail/wake/edge/*, which that XREAD includes: no CLIENT UNBLOCK, which could end anyone's blocked
# read (fanout/blocking.py). archive/played: reads, batched.
echo "user edge on #$edge resetkeys resetchannels -@all $CONNECT" \
    "%R~pub/casts/* %R~tail/wake/edge/* +xrange +xrevrange +xread +xlen +xinfo|stream +exists +evalsha_ro +eval_ro" \
    "($RATE_LIMIT)" \
    "(~archive/played +zadd)" \
    "($DURABLE %R~tail/wake/edge/* +xread)" \
    "(~tail/wake/edge/* +xadd +pexpire)"
