# Sourced in the Soft-RoCE VM by the scripts that run several ranks on one rxe (e2e/in-vm.sh,
# bench/incast.sh): rxe keeps traffic between its own addresses in its loopback path, so each rank
# takes its own address on the netdev and its own RoCE v2 GID. Expects RDMA_RUN and DEV.

# gid_of ADDRESS: the index of the RoCE v2 GID of ADDRESS on port 1 of $DEV, or nothing.
gid_of() {
  "$RDMA_RUN" gids -d "$DEV" 2>/dev/null | awk -v ip="$1" -F '\t' '$2 == "1" && $6 ~ /v2/ && $5 ~ "^" ip " *$" { print $3; exit }'
}

# rank_addresses_add N: adds 10.77.0.2 ... 10.77.0.(N+1) to the netdev (SOFTROCE_NETDEV, dummy0)
# and sets RANK_GIDX[k] to rank k's GID index, found by its address (the kernel adds a GID a moment
# after its address: up to 10 s). Returns 1, with the reason in RANK_WHY, when one never appears.
rank_addresses_add() {
  local n=$1 k idx
  RANK_GIDX=()
  RANK_WHY=""
  for ((k = 0; k < n; k++)); do ip addr add "10.77.0.$((k + 2))/24" dev "${SOFTROCE_NETDEV:-dummy0}" 2>/dev/null; done
  for ((k = 0; k < n; k++)); do
    idx=""
    for _ in $(seq 1 50); do idx=$(gid_of "10.77.0.$((k + 2))"); [ -n "$idx" ] && break; sleep 0.2; done
    [ -n "$idx" ] || { RANK_WHY="no RoCE v2 GID of 10.77.0.$((k + 2)) on $DEV"; return 1; }
    RANK_GIDX[k]=$idx
  done
}

# rank_addresses_del N: removes what rank_addresses_add N added.
rank_addresses_del() {
  local k
  for ((k = 0; k < $1; k++)); do ip addr del "10.77.0.$((k + 2))/24" dev "${SOFTROCE_NETDEV:-dummy0}" 2>/dev/null; done
  return 0
}
