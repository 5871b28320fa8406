#!/usr/bin/env bash
# make e2e: the upstream Kubernetes e2e suite's load-balancer tests
# (e2e.test at the pinned Kubernetes version, built by hack/kubebins) against
# a cloud controller manager on real nodes: `stratus dev --real-nodes`, three
# nodes (E2E_NODES), CoreDNS as the cluster DNS, minicloud's L4 data plane
# with VIPs routed to the host from the node network. Each manager gets an environment of its
# own, one after the other, on the same address block:
#   stratus   stratus-ccm installed from its Helm chart as pods on the nodes,
#             as stratus dev --real-nodes installs it
#   upstream  the upstream cloud-controller-manager (hack/kubebins' ccm: the
#             controllers of k8s.io/cloud-provider with providers/minicloud),
#             a process on this machine started with the flags stratus dev
#             --no-manager writes (manager.args), less stratus's own flags
# For each, JUnit goes to $E2E_OUT/<manager>/junit.xml, the suite's output to
# $E2E_OUT/<manager>/e2e.log, the environment's logs to
# $E2E_OUT/<manager>/state/logs; then a table of both (hack/e2e/report) is
# printed and written to $E2E_OUT/summary.md.
#
# Usage: hack/e2e/run.sh [stratus] [upstream]   (default: both)
# Environment: E2E_FOCUS / E2E_SKIP replace the selection below,
# E2E_ADDRESS_BLOCK (default 244) is the environment's address block,
# E2E_NODES (default 3: tests that need 3 schedulable nodes run) how many
# real nodes,
# E2E_OUT (default .cache/e2e), E2E_TIMEOUT (default 4h, the whole suite's).
# Needs root (real nodes) and the Debian packages of hack/ci-packages.txt.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# The selection. Every [sig-network] LoadBalancers test (loadbalancer.go);
# the Service tests that create a LoadBalancer Service (service.go); the one
# test of another SIG that needs a cloud load balancer (apps' Deployment
# rollout, labelled [Provider:aws,azure,gce]: it runs only with one of those
# providers, hence --provider=aws below, and skips itself below 3 nodes);
# and [sig-cloud-provider], which has no test at v1.37.2 (test/e2e/cloud is
# gone), kept so that a newer suite's tests are selected.
default_focus='\[sig-network\] LoadBalancers|\[sig-network\] Services should (serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer|fail health check node port if there are only terminating endpoints|implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes|complete a service status lifecycle)|\[sig-apps\] Deployment should not disrupt a cloud load-balancer|\[sig-cloud-provider\]'
# Disruptive tests restart or break the cluster's components and Flaky ones
# are known to fail upstream; none of the selection carries either label at
# v1.37.2, the skip keeps them out of a newer suite's selection.
default_skip='\[Disruptive\]|\[Flaky\]'
focus=${E2E_FOCUS:-$default_focus}
skip=${E2E_SKIP:-$default_skip}
block=${E2E_ADDRESS_BLOCK:-244}
nodes=${E2E_NODES:-3}
out=$(mkdir -p "${E2E_OUT:-.cache/e2e}" && cd "${E2E_OUT:-.cache/e2e}" && pwd)
suite_timeout=${E2E_TIMEOUT:-4h}

managers=("$@")
if ((${#managers[@]} == 0)); then
	managers=(stratus upstream)
fi
for m in "${managers[@]}"; do
	if [[ "$m" != stratus && "$m" != upstream ]]; then
		echo "e2e: unknown manager $m (want stratus and/or upstream)" >&2
		exit 2
	fi
done
if ((EUID != 0)); then
	echo "e2e: real nodes need root (network namespaces, cgroups, mounts)" >&2
	exit 1
fi

# What the run needs: the real nodes' binaries, e2e.test and the upstream CCM
# at the pinned versions, and this tree's stratus and stratus-ccm.
hack/kubebins/build.sh etcd kube-apiserver kube-controller-manager kubectl helm ccm \
	kube-scheduler kubelet kube-proxy agnhost containerd containerd-shim-runc-v2 ctr coredns e2e.test
bins=$(hack/kubebins/build.sh --print-dir)
go build -o bin/ ./cmd/stratus ./cmd/stratus-ccm

dev_pid=
ccm_pid=
# stop ends what this script started, by process id: the upstream CCM, then
# the environment (SIGINT, as Ctrl-C stops stratus dev, which removes its
# namespaces, links and cgroups).
stop() {
	if [[ -n "$ccm_pid" ]]; then
		kill "$ccm_pid" 2>/dev/null || true
		wait "$ccm_pid" 2>/dev/null || true
		ccm_pid=
	fi
	if [[ -n "$dev_pid" ]]; then
		kill -INT "$dev_pid" 2>/dev/null || true
		wait "$dev_pid" 2>/dev/null || true
		dev_pid=
	fi
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

# upstream_args turns stratus dev's manager.args into the upstream CCM's:
# without the flags only stratus-ccm has (--config, the manager's own
# configuration file, and --node-deletion-grace-period), with the
# kubeconfig for delegated authentication and authorization that its secure
# port needs, the controllers under its own identity, and the cloud-config
# the chart gives stratus-ccm (clusterHealthCheck: kubeProxy, as real nodes
# run kube-proxy), so that both managers drive the same provider the same way.
upstream_args() {
	local state=$1 arg kubeconfig=
	while read -r arg; do
		case "$arg" in
		--config=* | --node-deletion-grace-period=*) ;;
		--cloud-config=*)
			cp "${arg#--cloud-config=}" "$state/upstream-cloud.yaml"
			echo "clusterHealthCheck: kubeProxy" >>"$state/upstream-cloud.yaml"
			echo "--cloud-config=$state/upstream-cloud.yaml"
			;;
		--kubeconfig=*)
			kubeconfig=${arg#--kubeconfig=}
			echo "$arg"
			;;
		*) echo "$arg" ;;
		esac
	done <"$state/manager.args"
	echo "--authentication-kubeconfig=$kubeconfig"
	echo "--authorization-kubeconfig=$kubeconfig"
	echo "--use-service-account-credentials=false"
	echo "--v=2"
}

# wait_for PID FILE TEXT: waits until FILE holds TEXT, failing when PID ends.
wait_for() {
	until grep -q -- "$3" "$2" 2>/dev/null; do
		if ! kill -0 "$1" 2>/dev/null; then
			echo "e2e: process $1 ended before \"$3\"; its output:" >&2
			tail -n 30 "$2" >&2
			return 1
		fi
		sleep 2
	done
}

run_one() {
	local m=$1 dir="$out/$1" start=$SECONDS
	local state="$dir/state"
	rm -rf "$dir"
	mkdir -p "$dir"
	local dev_flags=(--real-nodes --nodes "$nodes" --address-block "$block" --state-dir "$state"
		--kube-bin-dir "$bins" --manager-binary "$root/bin/stratus-ccm")
	if [[ "$m" == upstream ]]; then
		dev_flags+=(--no-manager)
	fi
	echo "e2e: [$m] starting stratus dev ${dev_flags[*]}"
	bin/stratus dev "${dev_flags[@]}" >"$dir/dev.log" 2>&1 &
	dev_pid=$!
	wait_for "$dev_pid" "$dir/dev.log" "stratus dev: ready"
	local kubeconfig="$state/kubeconfig"
	if [[ "$m" == upstream ]]; then
		mapfile -t args < <(upstream_args "$state")
		echo "e2e: [$m] starting the upstream CCM: $bins/ccm ${args[*]}"
		"$bins/ccm" "${args[@]}" >"$dir/ccm.log" 2>&1 &
		ccm_pid=$!
	fi
	# The nodes are initialized by the manager under test (the uninitialized
	# taint removed) and Ready before the suite starts: the suite waits for
	# schedulable nodes itself, but a manager that never initializes them
	# should fail here, saying so.
	echo "e2e: [$m] waiting for the $nodes nodes to be initialized and Ready"
	local waited=0 want
	want=$(printf 'ok %.0s' $(seq "$nodes"))
	until [[ "$("$bins/kubectl" --kubeconfig "$kubeconfig" get nodes -o go-template='{{range .items}}{{$n := .}}{{range .status.conditions}}{{if and (eq .type "Ready") (eq .status "True")}}{{$t := false}}{{range $n.spec.taints}}{{if eq .key "node.cloudprovider.kubernetes.io/uninitialized"}}{{$t = true}}{{end}}{{end}}{{if not $t}}ok {{end}}{{end}}{{end}}{{end}}' 2>/dev/null)" == "$want" ]]; do
		if ((waited >= 600)); then
			echo "e2e: [$m] nodes not initialized and Ready after 10 minutes:" >&2
			"$bins/kubectl" --kubeconfig "$kubeconfig" get nodes -o wide >&2 || true
			return 1
		fi
		sleep 5
		waited=$((waited + 5))
	done
	echo "e2e: [$m] running e2e.test (focus and skip in $dir/selection.txt; output in $dir/e2e.log)"
	printf 'focus: %s\nskip: %s\n' "$focus" "$skip" >"$dir/selection.txt"
	local rc=0
	# --provider=aws is the framework's null provider under the name that
	# [Provider:aws] tests accept (cloud-provider-kind's CI does the same);
	# it talks to no cloud. The timeouts are sized for 2 shared cores.
	"$bins/e2e.test" \
		--kubeconfig="$kubeconfig" \
		--kubectl-path="$bins/kubectl" \
		--provider=aws \
		--num-nodes="$nodes" \
		--node-schedulable-timeout=10m \
		--system-pods-startup-timeout=10m \
		--minStartupPods=0 \
		--dump-logs-on-failure=false \
		--disable-log-dump \
		--report-dir="$dir" \
		--ginkgo.focus="$focus" \
		--ginkgo.skip="$skip" \
		--ginkgo.junit-report="$dir/junit.xml" \
		--ginkgo.timeout="$suite_timeout" \
		--ginkgo.no-color \
		--ginkgo.v \
		>"$dir/e2e.log" 2>&1 || rc=$?
	echo "e2e: [$m] e2e.test exited $rc after $((SECONDS - start))s (environment included)"
	echo "$((SECONDS - start))" >"$dir/duration"
	stop
	if ip netns list | grep -q "^stratus-$block-"; then
		echo "e2e: [$m] network namespaces of block $block left behind:" >&2
		ip netns list | grep "^stratus-$block-" >&2
		return 1
	fi
}

for m in "${managers[@]}"; do
	run_one "$m"
done
go run ./hack/e2e/report -out "$out" -commit "$(git rev-parse --short HEAD)" | tee "$out/summary.md"
