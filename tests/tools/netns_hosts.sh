#!/bin/sh
# Two "hosts" on this machine for mpirun: network namespaces NAME-a and NAME-b joined by a veth
# pair (10.77.N.1 and 10.77.N.2), each process in them with its own hostname and its own /dev/shm
# (else Open MPI's shared-memory segments of the two hosts collide). Needs root; the tests and
# bench/multinode.sh use it.
#
#   netns_hosts.sh up NAME N [RATE]   create them; RATE (e.g. 100mbit) limits both ends with tbf
#   netns_hosts.sh down NAME          remove them (and the veth pair with them)
#   netns_hosts.sh mpirun NAME N ARGS...
#                                     mpirun on NAME-a with --host on both and ARGS, reaching
#                                     NAME-b through this script as plm_rsh_agent
#   netns_hosts.sh agent [OPTS] HOST COMMAND...   (mpirun calls it: COMMAND on HOST)
#
# Exit status 77: network namespaces are not permitted here (not root, or no CAP_SYS_ADMIN).
set -eu
self=$(readlink -f "$0")
cmd=${1:-}
[ -n "$cmd" ] && shift

# Runs COMMAND in namespace $1 with hostname $1 and a /dev/shm of its own.
in_host() {
    ns=$1
    shift
    exec ip netns exec "$ns" unshare --uts --mount sh -c 'hostname "$0" && mount -t tmpfs tmpfs /dev/shm && exec "$@"' "$ns" "$@"
}

case "$cmd" in
up)
    name=$1 n=$2 rate=${3:-}
    if ! ip netns add "$name-a" 2>/dev/null; then
        echo "netns_hosts.sh: cannot create network namespaces here (needs root and CAP_SYS_ADMIN)" >&2
        exit 77
    fi
    ip netns add "$name-b"
    ip link add "$name-va" type veth peer name "$name-vb"
    ip link set "$name-va" netns "$name-a"
    ip link set "$name-vb" netns "$name-b"
    for side in a b; do
        num=1
        [ $side = b ] && num=2
        ip -n "$name-$side" addr add "10.77.$n.$num/24" dev "$name-v$side"
        ip -n "$name-$side" link set lo up
        ip -n "$name-$side" link set "$name-v$side" up
        if [ -n "$rate" ]; then
            ip netns exec "$name-$side" tc qdisc add dev "$name-v$side" root tbf rate "$rate" burst 32kbit latency 400ms
        fi
    done
    ;;
down)
    name=$1
    ip netns del "$name-a" 2>/dev/null || true
    ip netns del "$name-b" 2>/dev/null || true
    ;;
mpirun)
    name=$1 n=$2
    shift 2
    export HW_NETNS_NAME="$name" HW_NETNS_N="$n"
    in_host "$name-a" mpirun --host "10.77.$n.1,10.77.$n.2" --mca plm_rsh_agent "$self agent" \
        --mca oob_tcp_if_include "10.77.$n.0/24" --mca btl_tcp_if_include "10.77.$n.0/24" \
        --mca btl self,vader,tcp "$@"
    ;;
agent)
    # mpirun calls "AGENT [ssh options] HOST COMMAND..."; the options are ignored.
    while [ "${1#-}" != "$1" ]; do shift; done
    host=$1
    shift
    case "$host" in
    "10.77.$HW_NETNS_N.1") ns="$HW_NETNS_NAME-a" ;;
    "10.77.$HW_NETNS_N.2") ns="$HW_NETNS_NAME-b" ;;
    *) echo "netns_hosts.sh agent: unknown host $host" >&2; exit 1 ;;
    esac
    in_host "$ns" sh -c "$*"
    ;;
*)
    echo "usage: netns_hosts.sh up NAME N [RATE] | down NAME | mpirun NAME N ARGS... | agent HOST COMMAND..." >&2
    exit 2
    ;;
esac
