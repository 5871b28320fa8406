# stratus — make help lists the targets.
SHELL := /bin/bash
export CGO_ENABLED ?= 0
export GOFLAGS ?= -buildvcs=false
# -trimpath, added to any GOFLAGS given (GOFLAGS=-count=1 make test): compiled
# packages carry no checkout path, so a second clone of the repository (CI's
# clean clone) reuses the Go build cache of the first instead of compiling
# every package of the module again (about 160 s of CPU in make test), and
# binaries are reproducible.
ifeq ($(filter -trimpath,$(GOFLAGS)),)
override GOFLAGS += -trimpath
endif

STATICCHECK_VERSION := v0.8.2
KUBEBINS_DIR := $(shell hack/kubebins/build.sh --print-dir)
# Packages tests run in parallel; the control plane of each takes ~300 MB.
# The tests mostly wait (managers' periods, polling, process start-ups), so
# more packages than cores run at once.
TEST_PARALLEL ?= 4
TEST_TIMEOUT ?= 20m
# The longest package: it runs from the start, next to the others, instead of
# last (go test starts packages in import-path order), with more of its
# scenarios' sides at once (each on a control plane of its own; they mostly
# wait for the managers' periods, but start-ups compete for the CPU).
TEST_LONGEST ?= ./test/compat
TEST_LONGEST_PARALLEL ?= 4
# The next longest packages (docs/test-times.md), longest first: go test
# starts the packages in the order it is given them, so these start before
# the many short ones instead of ending the run alone.
TEST_FIRST ?= ./internal/dev/devenv ./internal/dev/bench ./test/chaos ./test/realnodes \
	./internal/controller/service ./deploy ./internal/dev/conformance/osdriver ./test/upstreame2e
# make test-short leaves out these packages: every test in them needs a
# control plane, real nodes or a built binary, so under -short they would
# only be linked (about 4 s of CPU each, most of test-short's time) to skip.
# make test runs them.
TEST_SHORT_SKIP ?= ./internal/controller/patch ./internal/dev/testenv \
	./internal/dev/conformance/mcdriver ./internal/dev/conformance/osdriver ./internal/dev/conformance/vcsimdriver \
	./minicloud/openstack/clitest ./proto/stratus/provider/v1 \
	./providers/openstack/integration ./providers/vsphere/integration \
	./test/chaos ./test/hybrid ./test/plugin ./test/realnodes ./test/upstreame2e
# The packages whose short tests take longest (real health-check intervals,
# hung processes), started first.
TEST_SHORT_FIRST ?= ./providers/minicloud ./internal/dev/devenv ./providers/vsphere ./minicloud ./vcsim
# The packages make test runs (all of them unless told).
TEST_PACKAGES ?= ./...
# make test saves its go test -json output here (hack/testtimes reads it).
TEST_OUT := .cache/test

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the stratus binaries into bin/.
	go build -o bin/ ./cmd/...

.PHONY: dev
dev: ## Run stratus on a local cluster and cloud until Ctrl-C (stratus dev; ARGS="--nodes 5" to pass flags).
	@# stratus dev builds the control-plane binaries it runs (and only those) itself.
	go build -o bin/ ./cmd/stratus ./cmd/stratus-ccm
	bin/stratus dev $(ARGS)

.PHONY: kubebins
kubebins: ## Build what the tests run at pinned versions into .cache/kubebins (once): etcd, kube-apiserver, kube-controller-manager, kubectl, helm and the upstream CCM (ccm).
	hack/kubebins/build.sh

.PHONY: kubebins-vsphere kubebins-openstack
kubebins-vsphere: ## Build the upstream vSphere CCM (vsphere-ccm) and stratus-ccm with the upstream vSphere provider (stratus-cpv) into .cache/kubebins (once; minutes).
	hack/kubebins/build.sh vsphere-ccm stratus-cpv

kubebins-openstack: ## Build the upstream OpenStack CCM (openstack-ccm) and stratus-ccm with the upstream OpenStack provider (stratus-occm) into .cache/kubebins (once; minutes).
	hack/kubebins/build.sh openstack-ccm stratus-occm

.PHONY: kubebins-e2e
kubebins-e2e: ## Build the upstream Kubernetes e2e suite (e2e.test, go test -c of k8s.io/kubernetes/test/e2e) into .cache/kubebins (once; about 4 minutes after the other Kubernetes binaries, 16 on a cold machine).
	hack/kubebins/build.sh e2e.test

.PHONY: generate
generate: ## Regenerate the Go code of proto/ (pure Go, no protoc: hack/protogen) and the monitoring mixin's rules and dashboard (go-jsonnet: hack/mixingen).
	cd hack/protogen && go run . -root ../..
	go run ./hack/mixingen -root .

# make test runs go test with -vet=off: make lint runs go vet ./... with every
# analyzer (CI runs both), go test's own subset again would add about 35 s of CPU.
.PHONY: test
test: kubebins kubebins-vsphere kubebins-openstack kubebins-e2e ## Run all tests against a real control plane (what CI runs); the go test -json output goes to .cache/test/make-test.json (make test-times; TEST_PACKAGES=./deploy/... for fewer).
	@mkdir -p $(TEST_OUT); rm -f $(TEST_OUT)/*.json $(TEST_OUT)/make-test.wall; \
	go build -o $(TEST_OUT)/testtimes ./hack/testtimes || exit 1; \
	git describe --always --dirty --abbrev=12 > $(TEST_OUT)/make-test.commit 2>/dev/null || echo unknown > $(TEST_OUT)/make-test.commit; \
	start=$$(date +%s); \
	export KUBEBUILDER_ASSETS=$(KUBEBINS_DIR); \
	all=$$(go list $(TEST_PACKAGES)) || exit 1; \
	longest=$$(go list $(TEST_LONGEST) | grep -xF "$$all"); \
	first=$$(go list $(TEST_FIRST) | grep -xF "$$all"); \
	rest=$$(grep -vxF "$$longest"$$'\n'"$$first" <<< "$$all"); \
	rc=0; pid=; \
	if [ -n "$$longest" ]; then \
		echo "go test -parallel $(TEST_LONGEST_PARALLEL) $(TEST_LONGEST) &"; \
		( set -o pipefail; go test -json -vet=off -timeout $(TEST_TIMEOUT) -parallel $(TEST_LONGEST_PARALLEL) $$longest 2>&1 | \
			$(TEST_OUT)/testtimes render -o $(TEST_OUT)/longest.json ) & pid=$$!; \
	fi; \
	if [ -n "$$first$$rest" ]; then \
		echo "go test -p $(TEST_PARALLEL) $(TEST_FIRST) <the other packages>"; \
		( set -o pipefail; go test -json -vet=off -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $$first $$rest 2>&1 | \
			$(TEST_OUT)/testtimes render -o $(TEST_OUT)/others.json ) || rc=1; \
	fi; \
	if [ -n "$$pid" ]; then wait $$pid || rc=1; fi; \
	cat $(TEST_OUT)/longest.json $(TEST_OUT)/others.json > $(TEST_OUT)/make-test.json 2>/dev/null; \
	echo "$$(( $$(date +%s) - start ))s" > $(TEST_OUT)/make-test.wall; \
	echo "make test: $$(cat $(TEST_OUT)/make-test.wall) of tests; make test-times writes docs/test-times.md from $(TEST_OUT)/make-test.json"; \
	exit $$rc

.PHONY: test-times
test-times: ## Regenerate docs/test-times.md (packages by time, the ten longest tests) from the last make test's .cache/test/make-test.json.
	go run ./hack/testtimes report -commit "$$(cat $(TEST_OUT)/make-test.commit)" -wall "$$(cat $(TEST_OUT)/make-test.wall 2>/dev/null)" \
		-o docs/test-times.md $(TEST_OUT)/make-test.json

# make bench: the minicloud scenarios in both modes, at one commit. The tuned
# half (both managers with --kube-api-qps=200 --kube-api-burst=400 and ten
# node and Service workers) runs the short scenarios three times each (node
# churn also with the minicloud provider's backend pools), the
# memory scenario and the scale ladder to 10,000 nodes (about 90 minutes);
# the defaults half (each manager's own flags) runs the short ones three times
# (about 30 minutes). The vSphere and OpenStack scenarios, whose oracles are
# other upstream CCMs, have their own targets.
BENCH_TUNED_SCENARIOS := node-init-burst,lb-burst,node-churn,node-churn-pools,memory,scale-ladder
BENCH_DEFAULTS_SCENARIOS := node-init-burst,lb-burst,node-churn

.PHONY: bench bench-vsphere bench-openstack
bench: kubebins build ## Benchmark stratus-ccm against the upstream CCM at full size, tuned and with defaults (bench/results/latest*.json, docs/benchmarks*.png; about two hours).
	bin/stratus bench --mode tuned --repeats 3 --scenario $(BENCH_TUNED_SCENARIOS) --timeout 90m \
		--out bench/results/latest.json --markdown bench/results/latest.md \
		--chart docs/benchmarks.png --ladder-chart docs/benchmarks-ladder.png $(ARGS)
	bin/stratus bench --mode defaults --repeats 3 --scenario $(BENCH_DEFAULTS_SCENARIOS) --timeout 40m \
		--out bench/results/latest-defaults.json --markdown bench/results/latest-defaults.md $(ARGS)

bench-vsphere: kubebins kubebins-vsphere build ## Benchmark stratus-ccm's vsphere provider against the upstream vSphere CCM on a simulated vCenter (bench/results/vsphere.json; about 45 minutes).
	bin/stratus bench --scenario vsphere-node-init-burst,vsphere-steady-state \
		--out bench/results/vsphere.json --markdown bench/results/vsphere.md $(ARGS)

bench-openstack: kubebins kubebins-openstack build ## Benchmark stratus-ccm's openstack provider against the upstream OpenStack CCM on minicloud's OpenStack dialect (bench/results/openstack.json; about an hour).
	bin/stratus bench --scenario openstack-node-init-burst,openstack-steady-state,openstack-lb-burst,openstack-node-churn \
		--size steadyWindow=5m --size openstackChurnServices=50 --timeout 30m \
		--out bench/results/openstack.json --markdown bench/results/openstack.md $(ARGS)

# make e2e: the upstream Kubernetes e2e suite's load-balancer tests (e2e.test
# at the pinned version) against stratus-ccm and against the upstream CCM, each
# on real nodes of its own (root); hack/e2e/run.sh says what it selects and why.
.PHONY: e2e
e2e: kubebins-e2e ## Run the upstream e2e load-balancer tests against stratus and the upstream CCM on real nodes (root; about an hour per manager): JUnit and logs in .cache/e2e, the table in .cache/e2e/summary.md (ARGS="stratus" for one manager).
	hack/e2e/run.sh $(ARGS)

.PHONY: bench-quick
bench-quick: kubebins kubebins-vsphere kubebins-openstack build ## Run every benchmark scenario at small sizes for both managers (a harness check; minutes).
	bin/stratus bench --quick --out bench/results/quick.json --markdown bench/results/quick.md --chart bench/results/quick.png $(ARGS)

.PHONY: bench-plugin
bench-plugin: kubebins build ## Benchmark stratus-ccm with its provider through a plugin against in process, at the in-process burst's sizes and tuned limits (bench/results/plugin.json; about 15 minutes).
	bin/stratus bench-plugin --size burstNodes=1000 --size lbBurstServices=500 --kube-api-qps 200 --kube-api-burst 400 \
		--out bench/results/plugin.json --markdown bench/results/plugin.md $(ARGS)

# make bench-realnodes: the perf-tests L4 load-balancer latencies
# (ServiceCreationLatency, LoadBalancerNodeSyncLatency) for stratus-ccm and the
# upstream CCM, each on real nodes of its own, one after the other on address
# block 230 (root); docs/benchmarks.md, "Latency on real nodes".
.PHONY: bench-realnodes
bench-realnodes: build ## Measure Service creation and node-sync latency on real nodes, stratus and the upstream CCM (root; bench/results/realnodes.json and .md; about 6 minutes at 50 Services once built).
	hack/kubebins/build.sh etcd kube-apiserver kube-controller-manager kubectl helm ccm \
		kube-scheduler kubelet kube-proxy agnhost containerd containerd-shim-runc-v2 ctr coredns
	bin/stratus bench-realnodes --out bench/results/realnodes.json --markdown bench/results/realnodes.md $(ARGS)

.PHONY: conformance
conformance: kubebins kubebins-vsphere kubebins-openstack build ## Run the provider conformance kit with every driver (the upstream providers as plugins); JUnit in .cache/conformance.xml, the matrix in docs/conformance.md.
	KUBEBUILDER_ASSETS=$(KUBEBINS_DIR) bin/stratus conformance --junit .cache/conformance.xml --matrix docs/conformance.md $(ARGS)

# The chaos run make chaos runs (a -run pattern) and where its report and
# logs go; chaos-vsphere, chaos-openstack and chaos-plugin run the others.
CHAOS_RUN ?= ^TestChaos$$
CHAOS_OUT ?= .cache/chaos

.PHONY: chaos chaos-vsphere chaos-openstack chaos-plugin
chaos: kubebins ## Run the chaos test at full size (replicas, churn, cloud faults, leader kills; long): report in .cache/chaos/report.md, logs in .cache/chaos/logs (ARGS="-chaos.nodes=100" to resize).
	mkdir -p $(CHAOS_OUT)
	KUBEBUILDER_ASSETS=$(KUBEBINS_DIR) go test -count=1 -timeout 90m -run '$(CHAOS_RUN)' -v ./test/chaos \
		-args -chaos.full -chaos.report=$(CURDIR)/$(CHAOS_OUT)/report.md -chaos.logs=$(CURDIR)/$(CHAOS_OUT)/logs $(ARGS)

chaos-vsphere: ## The full chaos run with the vSphere provider on vcsim (minicloud load balancers): .cache/chaos/vsphere.
	$(MAKE) chaos CHAOS_RUN='^TestChaosVSphere$$' CHAOS_OUT=.cache/chaos/vsphere

chaos-openstack: ## The full chaos run with the OpenStack provider on minicloud's OpenStack dialect: .cache/chaos/openstack.
	$(MAKE) chaos CHAOS_RUN='^TestChaosOpenStack$$' CHAOS_OUT=.cache/chaos/openstack

chaos-plugin: ## The full chaos run with the provider in plugin processes (one per replica) killed and restarted: .cache/chaos/plugin.
	$(MAKE) chaos CHAOS_RUN='^TestChaosPlugin$$' CHAOS_OUT=.cache/chaos/plugin

FUZZTIME ?= 10m
# -short: fuzz targets need no control plane, and without it every fuzz worker
# of a package whose TestMain starts one would start its own.
.PHONY: fuzz
fuzz: ## Run every fuzz target (each func Fuzz* of the root module) for FUZZTIME each (default 10m); a crasher is written to the package's testdata/fuzz, new inputs that grow coverage to the fuzz directory of the Go build cache (go env GOCACHE).
	@set -e; for f in $$(git grep -l '^func Fuzz' -- '*_test.go' ':!hack'); do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$fn in ./$$(dirname $$f) for $(FUZZTIME)"; \
			go test -short -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./$$(dirname $$f); \
		done; \
	done

.PHONY: test-short
test-short: ## Run only the tests that need no control plane (the quick loop; docs/dev.md).
	@all=$$(go list ./...) || exit 1; skip=$$(go list $(TEST_SHORT_SKIP)) || exit 1; \
	first=$$(go list $(TEST_SHORT_FIRST) | grep -xF "$$all"); \
	rest=$$(echo "$$all" | grep -vxF "$$skip" | grep -vxF "$$first"); \
	echo "go test -short -p $(TEST_PARALLEL) ./... less TEST_SHORT_SKIP ($$(echo "$$skip" | wc -l) packages whose every test needs a control plane)"; \
	go test -short -p $(TEST_PARALLEL) $$first $$rest

.PHONY: lint
lint: ## gofmt, go vet, the import layers (hack/layers) and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-clean:"; echo "$$out"; exit 1; fi
	go vet ./...
	go run ./hack/layers
	go run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
