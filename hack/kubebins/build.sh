#!/usr/bin/env bash
# Builds the control-plane binaries the tests and the dev environment need, at the
# versions pinned by the nested modules in this folder, into
#   .cache/kubebins/<k8s version>/   (kube-apiserver, kube-controller-manager, kubectl, etcd, helm,
#   kwok, and ccm: the upstream cloud-controller-manager with providers/minicloud)
# and, on request, the upstream vSphere builds: vsphere-ccm (the upstream
# cloud-controller-manager with the upstream vSphere provider) and stratus-cpv
# (stratus-ccm with the upstream vSphere provider); and the upstream OpenStack builds:
# openstack-ccm (the upstream cloud-controller-manager with the upstream OpenStack
# provider) and stratus-occm (stratus-ccm with the upstream OpenStack provider);
# and the upstream end-to-end suite, e2e.test (k8s.io/kubernetes/test/e2e compiled
# with go test -c from the e2e module, which adds the suite's test dependencies to
# the k8s module's pins: about 16 minutes cold on 2 cores, so only on request).
# A binary that is already there is not rebuilt, so a second run takes well under a
# second.
# Usage: hack/kubebins/build.sh [--print-dir] [NAME...]
#   With NAMEs (e.g. vsphere-ccm stratus-cpv), builds only those. Without, builds the
#   default set, plus kwok with KUBEBINS_KWOK=1, the vSphere builds with
#   KUBEBINS_VSPHERE=1, the OpenStack builds with KUBEBINS_OPENSTACK=1 and e2e.test
#   with KUBEBINS_E2E=1. stratus dev
#   asks for etcd kube-apiserver kube-controller-manager kubectl only.
# What is missing is planned first, then built one binary after the other, with a
# line "[n/m] building NAME" before and "[n/m] built NAME in Ns" after each.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

# shellcheck source=versions.env
source "$here/versions.env"
out="${KUBEBINS_DIR:-$root/.cache/kubebins/$K8S_VERSION}"

if [[ "${1:-}" == "--print-dir" ]]; then
	echo "$out"
	exit 0
fi

all_names="etcd kube-apiserver kubectl kube-controller-manager helm kwok ccm vsphere-ccm stratus-cpv openstack-ccm stratus-occm kube-scheduler kubelet kube-proxy agnhost containerd containerd-shim-runc-v2 ctr coredns e2e.test"
for name in "$@"; do
	if [[ " $all_names " != *" $name "* ]]; then
		echo "kubebins: unknown binary $name (want some of: $all_names)" >&2
		exit 2
	fi
done
names=" $* "

# wanted NAME [OPT_IN_VARIABLE]: whether to build NAME: named on the command
# line, or, without names, by default unless an opt-in variable is given that
# is not 1. (Used in if, never with &&: set -e does not stop a failing build
# called from an && list, which would stamp a binary that was not built.)
wanted() {
	if [[ "$names" != "  " ]]; then
		[[ "$names" == *" $1 "* ]]
		return
	fi
	[[ -z "${2:-}" || "${!2:-}" == 1 ]]
}

# sources DIR...: a short hash of the Go sources (and go.mod/go.sum) under the
# given folders of the repository, so that a stamp changes with the code a
# binary compiles from this tree.
sources() {
	(cd "$root" && find "$@" \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum \) 2>/dev/null | sort | xargs cat | sha256sum | cut -c1-16)
}

mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# plan NAME MODULE_DIR PACKAGE VERSION [LDFLAGS]: queues $out/NAME for building
# unless a binary stamped with the same version is already there. Everything is
# planned first so that the progress lines can say "n of m".
plan_names=() plan_dirs=() plan_pkgs=() plan_versions=() plan_ldflags=()
plan() {
	local name=$1 stamp="$out/.$1.version"
	if [[ -x "$out/$name" && -f "$stamp" && "$(cat "$stamp")" == "$4" ]]; then
		return 0
	fi
	plan_names+=("$name") plan_dirs+=("$2") plan_pkgs+=("$3") plan_versions+=("$4") plan_ldflags+=("${5:-}")
}

# build_planned builds the queued binaries in order, one line before and after each.
build_planned() {
	local m=${#plan_names[@]} i name start total=$SECONDS
	if ((m == 0)); then
		return 0
	fi
	echo "kubebins: $m to build into $out: ${plan_names[*]} (the first build takes minutes each)" >&2
	for ((i = 0; i < m; i++)); do
		name=${plan_names[i]}
		echo "kubebins: [$((i + 1))/$m] building $name ${plan_versions[i]%%+*} ..." >&2
		start=$SECONDS
		if [[ "$name" == *.test ]]; then
			# A test binary (the upstream e2e suite): compiled, not run, by go test.
			(cd "$here/${plan_dirs[i]}" && go test -c -trimpath -ldflags "-s -w ${plan_ldflags[i]}" -o "$out/$name.tmp" "${plan_pkgs[i]}")
		else
			(cd "$here/${plan_dirs[i]}" && go build -trimpath -ldflags "-s -w ${plan_ldflags[i]}" -o "$out/$name.tmp" "${plan_pkgs[i]}")
		fi
		mv "$out/$name.tmp" "$out/$name"
		echo "${plan_versions[i]}" >"$out/.$name.version"
		echo "kubebins: [$((i + 1))/$m] built $name in $((SECONDS - start))s" >&2
	done
	echo "kubebins: built ${plan_names[*]} in $((SECONDS - total))s" >&2
}

minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

if wanted etcd; then
	plan etcd etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
fi
if wanted kube-apiserver; then
	plan kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver "$K8S_VERSION" "$k8s_ldflags"
fi
if wanted kubectl; then
	plan kubectl k8s k8s.io/kubernetes/cmd/kubectl "$K8S_VERSION" "$k8s_ldflags"
fi
if wanted kube-controller-manager; then
	plan kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager "$K8S_VERSION" "$k8s_ldflags"
fi
# What real nodes run (stratus dev --real-nodes, internal/realnodes): a scheduler
# for real pods, kubelet and kube-proxy from the same module, and containerd 2.x
# with its runc shim and ctr (which imports the locally built images).
if wanted kube-scheduler; then
	plan kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler "$K8S_VERSION" "$k8s_ldflags"
fi
if wanted kubelet; then
	plan kubelet k8s k8s.io/kubernetes/cmd/kubelet "$K8S_VERSION" "$k8s_ldflags"
fi
if wanted kube-proxy; then
	plan kube-proxy k8s k8s.io/kubernetes/cmd/kube-proxy "$K8S_VERSION" "$k8s_ldflags"
fi
# agnhost, Kubernetes' test server, for the real nodes' demo and test pods.
if wanted agnhost; then
	plan agnhost k8s k8s.io/kubernetes/test/images/agnhost "$K8S_VERSION" "$k8s_ldflags"
fi
for name in containerd containerd-shim-runc-v2 ctr; do
	if wanted $name; then
		plan $name containerd github.com/containerd/containerd/v2/cmd/$name "$CONTAINERD_VERSION" \
			"-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
	fi
done
# CoreDNS, the real nodes' cluster DNS (its kubernetes plugin and the few
# plugins of the kube-dns Corefile, hack/kubebins/coredns/main.go).
if wanted coredns; then
	plan coredns coredns github.com/stratus-ccm/stratus/hack/kubebins/coredns \
		"$COREDNS_VERSION+$(sources hack/kubebins/coredns)" \
		"-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
fi
if wanted helm; then
	plan helm helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
fi
# kwok (simulated kubelets at scale) is for benchmarks that do not use it yet; it is
# built only on request so that make test stays short.
if wanted kwok KUBEBINS_KWOK; then
	plan kwok kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
fi
# The upstream CCM compiles the working tree's provider, so its stamp also covers
# the sources it is built from.
if wanted ccm; then
	plan ccm ccm github.com/stratus-ccm/stratus/hack/kubebins/ccm \
		"$K8S_VERSION+$(sources providers minicloud/api minicloud/client pkg hack/kubebins/ccm)" "$k8s_ldflags"
fi
# The vSphere builds compile the upstream vSphere provider and its NSX-T SDK (a
# 155,000-line package: minutes per cold build), so they are built only on request.
# vsphere-ccm shares ccm's main (hack/kubebins/ccm/upstream); stratus-cpv compiles
# stratus-ccm's command from this tree.
if wanted vsphere-ccm KUBEBINS_VSPHERE; then
	plan vsphere-ccm vsphere-ccm github.com/stratus-ccm/stratus/hack/kubebins/vsphere-ccm \
		"$K8S_VERSION+cpv-$CPV_VERSION+$(sources hack/kubebins/ccm/upstream hack/kubebins/vsphere-ccm)" "$k8s_ldflags"
fi
if wanted stratus-cpv KUBEBINS_VSPHERE; then
	plan stratus-cpv stratus-cpv github.com/stratus-ccm/stratus/hack/kubebins/stratus-cpv \
		"$K8S_VERSION+cpv-$CPV_VERSION+$(sources go.mod go.sum cmd internal pkg providers minicloud hack/kubebins/stratus-cpv)" \
		"$k8s_ldflags -X main.version=cpv-$CPV_VERSION"
fi
# The upstream OpenStack provider (and its gophercloud) adds minutes to a cold
# build, so the OpenStack builds are built only on request too: openstack-ccm shares
# ccm's main; stratus-occm compiles stratus-ccm's command from this tree.
if wanted openstack-ccm KUBEBINS_OPENSTACK; then
	plan openstack-ccm openstack-ccm github.com/stratus-ccm/stratus/hack/kubebins/openstack-ccm \
		"$K8S_VERSION+occm-$OCCM_VERSION+$(sources hack/kubebins/ccm/upstream hack/kubebins/openstack-ccm)" "$k8s_ldflags"
fi
if wanted stratus-occm KUBEBINS_OPENSTACK; then
	plan stratus-occm stratus-occm github.com/stratus-ccm/stratus/hack/kubebins/stratus-occm \
		"$K8S_VERSION+occm-$OCCM_VERSION+$(sources go.mod go.sum cmd internal pkg providers minicloud hack/kubebins/stratus-occm)" \
		"$k8s_ldflags -X main.version=occm-$OCCM_VERSION"
fi
# The upstream end-to-end suite (make e2e runs its load-balancer tests against the
# real-node environment). Its own module keeps the suite's test-only dependencies
# (ginkgo, gomega, ...) out of the k8s module, whose pins it shares.
if wanted e2e.test KUBEBINS_E2E; then
	plan e2e.test e2e k8s.io/kubernetes/test/e2e "$K8S_VERSION" "$k8s_ldflags"
fi
build_planned
