#!/usr/bin/env bash
# An independent check of the network model (issue 27): it builds its own emulated cluster with ip/tc alone
# (not workbench.runtime.netcluster), starts `dask scheduler` and `dask worker` itself, calibrates the model
# with `workbench netprobe`, runs `workbench run RECIPE --scheduler ... --network MODEL --json` from the root
# namespace and prints the median measured communication per epoch (epochs after the first) against the
# modelled: the critical path (comm_critical_s: per collective call, from the last rank's arrival to the last
# return), as benchmarks/network_model.py, and comm_s (the most any rank spent in calls, its waits for slower
# ranks included).
#
#   sudo bash benchmarks/netcheck_independent.sh [RATE] [HOSTS] [RECIPE...]    # defaults: 100mbit 2 full_graph sancus
#   sudo WB_BIN=/opt/env/bin bash ...                                          # another environment's executables
#   sudo BUSY_MS=0 bash benchmarks/netcheck_independent.sh 1gbit 3 ...          # the probe's calls idle (default 3 ms
#                                                                               # of compute before each)
#
# Hosts are network namespaces on a bridge, each veth shaped both ways with tbf (no netem on this kernel: no
# added latency; a burst of 24 KiB, about 0.2 ms at 1 Gbit/s, GSO packets of at most 16 KiB so that tbf never
# splits one in software, and a flow's packets steered to one core (RPS), as NetCluster's); every host runs one
# single-threaded Dask worker, on cores of its own when the machine has one per host (taskset), a further
# namespace the scheduler. Needs root; everything it creates is removed on exit (also on error or Ctrl-C).
set -euo pipefail

RATE=${1:-100mbit}
HOSTS=${2:-2}
shift $(( $# > 2 ? 2 : $# )) || true
RECIPES=("${@:-full_graph sancus}")
[[ ${#RECIPES[@]} -eq 1 ]] && read -r -a RECIPES <<< "${RECIPES[0]}"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${WB_BIN:-$ROOT/.venv/bin}   # another environment: a folder with its python, dask and workbench
NET=10.231.0   # outside workbench.runtime.netcluster's 10.77-176.x.0/24
BR=nckbr0
GRAPH="sbm:num_nodes=10000,num_blocks=8,avg_degree=10,num_features=64,seed=0"
EPOCHS=9

if [[ $(id -u) -ne 0 ]]; then echo "needs root (network namespaces, tc): skipped"; exit 0; fi
for tool in ip tc; do command -v $tool > /dev/null || { echo "no '$tool': skipped"; exit 0; }; done

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2> /dev/null || true; done
    sleep 2
    { for pid in "${PIDS[@]}"; do kill -9 "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; done; } 2> /dev/null
    for ns in nck-s $(seq -f "nck-h%g" 1 "$HOSTS"); do
        ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null || true   # a worker's children too
        ip netns del "$ns" 2> /dev/null || true
        rm -rf "/etc/netns/$ns"
    done
    rmdir /etc/netns 2> /dev/null || true
    for octet in $(seq 10 $((10 + HOSTS))); do ip link del "nck${octet}r" 2> /dev/null || true; done
    ip link del "$BR" 2> /dev/null || true
}
trap cleanup EXIT INT TERM

ip link add "$BR" type bridge
ip addr add "$NET.1/24" dev "$BR"
ip link set "$BR" up

rps_mask() {   # every core, as rps_cpus takes it: 32-bit hex words separated by commas
    local n words="" i
    n=$(nproc --all)
    for (( i = 0; i < n; i += 32 )); do
        local bits=$(( n - i < 32 ? n - i : 32 ))
        words="$(printf '%08x' $(( (1 << bits) - 1 )))${words:+,$words}"
    done
    echo "$words"
}
MASK=$(rps_mask)

host() {   # host NAMESPACE OCTET: a namespace on the bridge, its link shaped both ways
    local ns=$1 octet=$2
    local a="nck${octet}r" b="nck${octet}n"
    ip netns add "$ns"
    # its own /etc/hosts (the cluster's names) and a resolver on its loopback: the machine's name server is out
    # of reach, and torch >= 2.4's TCPStore looks up each peer (10 s a rendezvous waiting for the timeout)
    mkdir -p "/etc/netns/$ns"
    { cat /etc/hosts; for o in $(seq 10 $((10 + HOSTS))); do echo "$NET.$o nck-$o"; done; } > "/etc/netns/$ns/hosts"
    printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' > "/etc/netns/$ns/resolv.conf"
    ip link add "$a" type veth peer name "$b"
    ip link set "$b" netns "$ns"
    ip link set "$a" master "$BR" up
    ip netns exec "$ns" ip addr add "$NET.$octet/24" dev "$b"
    ip netns exec "$ns" ip link set "$b" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip route add default via "$NET.1"
    ip link set dev "$a" gso_max_size 16384
    ip netns exec "$ns" ip link set dev "$b" gso_max_size 16384
    for q in /sys/class/net/"$a"/queues/rx-*; do echo "$MASK" > "$q/rps_cpus"; done
    ip netns exec "$ns" sh -c "for q in /sys/class/net/$b/queues/rx-*; do echo $MASK > \$q/rps_cpus; done"
    tc qdisc add dev "$a" root tbf rate "$RATE" burst 24kb latency 50ms
    ip netns exec "$ns" tc qdisc add dev "$b" root tbf rate "$RATE" burst 24kb latency 50ms
}

host nck-s 10
SCHED="tcp://$NET.10:8786"
ip netns exec nck-s env OMP_NUM_THREADS=1 "$BIN/dask" scheduler --host "$NET.10" --port 8786 \
    --no-dashboard > /tmp/nck-scheduler.log 2>&1 &
PIDS+=($!)
CORES=$(nproc)
for i in $(seq 1 "$HOSTS"); do
    host "nck-h$i" $((10 + i))
    PIN=()
    if (( CORES >= HOSTS )); then   # host i: the i-th share of the cores
        SHARE=$(( CORES / HOSTS )); PIN=(taskset -c "$(( (i - 1) * SHARE ))-$(( i * SHARE - 1 ))")
    fi
    ip netns exec "nck-h$i" "${PIN[@]}" env OMP_NUM_THREADS=1 "$BIN/dask" worker "$SCHED" --host "$NET.$((10 + i))" \
        --nthreads 1 --nworkers 1 --no-dashboard --name "h$i" > "/tmp/nck-worker$i.log" 2>&1 &
    PIDS+=($!)
done
sleep 8

cd "$ROOT"
SPEC=$("$BIN/workbench" netprobe --scheduler "$SCHED" --workers "$HOSTS" --link-rate "$RATE" \
       --busy-ms "${BUSY_MS:-3}" --json |
       "$BIN/python" -c "import json, sys; print(json.load(sys.stdin)['spec'])")
echo "calibrated model ($RATE, $HOSTS hosts): --network $SPEC"
printf "%-11s %5s %8s %12s %12s %6s %12s %6s\n" recipe hosts link "measured ms" "modelled ms" ratio "comm_s ms" ratio
for recipe in "${RECIPES[@]}"; do
    "$BIN/workbench" run "$recipe" --graph "$GRAPH" --epochs "$EPOCHS" --scheduler "$SCHED" --workers "$HOSTS" \
        --network "$SPEC" --json 2> /dev/null |
    "$BIN/python" -c "
import json, statistics, sys
s = json.loads(sys.stdin.read().strip().splitlines()[-1])
c, p = statistics.median(s['comm_critical_s'][1:]), statistics.median(s['modelled_comm_s'][1:])
m = statistics.median(s['comm_s'][1:])
print(f'{sys.argv[1]:<11} {sys.argv[2]:>5} {sys.argv[3]:>8} {c * 1e3:>12.1f} {p * 1e3:>12.1f} {p / c:>6.2f} '
      f'{m * 1e3:>12.1f} {p / m:>6.2f}')
" "$recipe" "$HOSTS" "$RATE"
done
