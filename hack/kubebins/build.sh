#!/usr/bin/env bash
# Builds the control-plane binaries the tests and the dev environment need, at the
# versions pinned by the nested modules in this folder, into
#   .cache/kubebins/<k8s version>/   (kube-apiserver, kube-controller-manager, kubectl, etcd, helm,
#   kwok, and ccm: the upstream cloud-controller-manager with providers/minicloud)
# A binary that is already there is not rebuilt, so a second run takes well under a
# second. Usage: hack/kubebins/build.sh [--print-dir]
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

mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# build NAME MODULE_DIR PACKAGE VERSION [LDFLAGS]: builds into $out/NAME unless a
# binary stamped with the same version is already there.
build() {
	local name=$1 dir=$2 pkg=$3 version=$4 ldflags=${5:-}
	local stamp="$out/.$name.version"
	if [[ -x "$out/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
		return 0
	fi
	echo "kubebins: building $name $version (the first build takes minutes)" >&2
	local start=$SECONDS
	(cd "$here/$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg")
	mv "$out/$name.tmp" "$out/$name"
	echo "$version" >"$stamp"
	echo "kubebins: built $name in $((SECONDS - start))s" >&2
}

minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

build etcd etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver "$K8S_VERSION" "$k8s_ldflags"
build kubectl k8s k8s.io/kubernetes/cmd/kubectl "$K8S_VERSION" "$k8s_ldflags"
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager "$K8S_VERSION" "$k8s_ldflags"
build helm helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
# kwok (simulated kubelets at scale) is for benchmarks that do not use it yet; it is
# built only on request so that make test stays short.
if [[ "${KUBEBINS_KWOK:-}" == 1 ]]; then
	build kwok kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
fi
# The upstream CCM compiles the working tree's provider, so its stamp also covers
# the sources it is built from.
ccm_sources=$(cd "$root" && find providers minicloud/api minicloud/client pkg -name '*.go' ! -name '*_test.go' 2>/dev/null | sort | xargs cat | sha256sum | cut -c1-16)
build ccm ccm github.com/stratus-ccm/stratus/hack/kubebins/ccm "$K8S_VERSION+$ccm_sources" "$k8s_ldflags"
