#!/bin/sh
# Forms the Redis Cluster of deploy/compose.yaml from the nodes named as arguments (three
# masters, one replica each), once: a cluster already formed is left alone. Then waits until
# every slot is served. Run by the one-shot redis-cluster-init service.
set -eu
first=$1
state() { redis-cli -h "$first" cluster info | tr -d '\r' | sed -n 's/^cluster_state://p'; }
known() { redis-cli -h "$first" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p'; }
if [ "$(known)" -gt 1 ]; then
  echo "redis cluster already formed ($(known) nodes)"
else
  addrs=""
  for node in "$@"; do
    # redis-cli --cluster create wants addresses; the nodes announce their names to clients.
    ip=$(getent hosts "$node" | awk '{print $1; exit}')
    [ -n "$ip" ] || { echo "cannot resolve $node" >&2; exit 1; }
    addrs="$addrs $ip:6379"
  done
  # shellcheck disable=SC2086 # one argument per node
  redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes
fi
i=0
until [ "$(state)" = ok ]; do
  i=$((i + 1))
  [ "$i" -le 60 ] || { echo "redis cluster not ok after 60 s" >&2; exit 1; }
  sleep 1
done
echo "redis cluster ok"
