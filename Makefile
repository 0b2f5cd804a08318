# kplane build entry points. Everything runs from the Go workspace (go.work);
# nothing here needs more than Go on the machine.
SHELL := /usr/bin/env bash
GO ?= go
# Every module of the workspace, as directories relative to the root.
MODULES := $(shell $(GO) list -m -f '{{.Dir}}' | sed "s|^$(CURDIR)/||")
PKGS := $(addsuffix /...,$(addprefix ./,$(MODULES)))
TEST_TIMEOUT ?= 25m
FUZZTIME ?= 60s

.PHONY: all build test lint fmt vet imports versions fuzz bench generate binaries up down load load-compare images images-test compose-test tools

all: build

build:
	$(GO) build $(PKGS)

# Tools the tests run, built from source with go install at pinned
# versions into _output/tools; the version is in the file name so that a
# new pin builds anew.
TOOLS_DIR := $(CURDIR)/_output/tools
HELM_VERSION := v3.22.0
HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)

$(HELM):
	mkdir -p $(TOOLS_DIR)/bin
	GOWORK=off GOBIN=$(TOOLS_DIR)/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(TOOLS_DIR)/bin/helm $@

tools: $(HELM)

# The README's test command: unit, conformance and integration suites, fuzz
# seed corpora included (go test runs them as ordinary tests). The chart's
# tests (test/chart) run the pinned helm.
test: tools
	KPLANE_HELM=$(HELM) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

lint: fmt vet imports versions

fmt:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags compose ./test/compose/

imports:
	./hack/check-imports.sh

# Longer fuzzing on demand: make fuzz FUZZTIME=10m. Each target runs alone
# because go test -fuzz takes one target at a time.
fuzz:
	@set -e; for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' $(MODULES) | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$spec/*_test.go | sed 's/func //'); do \
	    echo "== $$spec $$f"; $(GO) test ./$$spec -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

# Benchmarks: make bench BENCH=. BENCHTIME=1s
BENCH ?= .
BENCHTIME ?= 1s
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem $(PKGS)

# Regenerates committed generated code (OpenAPI definitions of built-in types).
generate:
	./hack/update-openapi.sh

versions:
	./hack/check-versions.sh

# Every command of the workspace: the main packages under a cmd/ folder.
# A new service's binary is found without touching this file.
CMDS = $(shell $(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' $(PKGS) | grep /cmd/)

# No -trimpath: development builds reuse the build cache.
binaries:
	$(GO) build -o bin/ $(CMDS)

# Runs kplane on this machine until Ctrl-C: certificates, etcd, NATS, logs
# and the admin kubeconfig live in .kplane/ and are kept across runs.
# Pass launcher flags with UP_FLAGS, e.g. make up UP_FLAGS=--gateway-port=7443
up: binaries
	./bin/kplane-up $(UP_FLAGS)

# Stops what make up started, from any terminal.
down:
	$(GO) build -o bin/ ./deploy/cmd/kplane-up
	./bin/kplane-up down

# Measures a running API server with kplane-load (README, "Load tool"):
# by default the kplane of make up; with KUBECONFIG_B, side by side with a
# second server. More flags with LOAD_FLAGS, e.g. LOAD_FLAGS="--rounds=5 -o json".
KUBECONFIG_A ?= .kplane/admin.kubeconfig
KUBECONFIG_B ?=
load:
	@test -f '$(KUBECONFIG_A)' || { echo "no kubeconfig $(KUBECONFIG_A): run make up in another terminal, or name one with KUBECONFIG_A="; exit 1; }
	$(GO) build -o bin/ ./deploy/cmd/kplane-load
	./bin/kplane-load --kubeconfig '$(KUBECONFIG_A)' $(if $(KUBECONFIG_B),--compare-kubeconfig '$(KUBECONFIG_B)') $(LOAD_FLAGS)

# The comparison of issue 14: make up's kplane (A) against the reference
# kube-apiserver (B) of ../shared/anchor, which this starts, or reuses if
# it runs, and leaves running for the next comparison. The reference
# server audits as make up's kplane does: the same policy (make up's
# default, which deploy/compose/audit/policy.yaml equals) to a rotated
# log, buffered; it runs on ports of its own, beside an unaudited one
# that up.sh may have started with its defaults.
ANCHOR ?= ../shared/anchor
ANCHOR_BIN ?= /tmp/anchor-bin
ANCHOR_STATE ?= /tmp/anchor-audited
ANCHOR_PORTS ?= KAS_PORT=16444 ETCD_PORT=23791 PEER_PORT=23801
# The processes whose memory is compared: make up's launcher and
# services, and the reference server's kube-apiserver and etcd.
KPLANE_PROCESSES ?= (^|/)bin/kplane-(up|admission|authn|authz|core|crd|gateway)( |\z)
ANCHOR_PROCESSES ?= ^$(ANCHOR_BIN)/(kube-apiserver|etcd) .*$(ANCHOR_STATE)/
load-compare:
	@test -x '$(ANCHOR_BIN)/kube-apiserver' || { echo "no reference server in $(ANCHOR_BIN): build it once with $(ANCHOR)/build.sh (about 15 minutes; see $(ANCHOR)/README.md)"; exit 1; }
	$(MAKE) load KUBECONFIG_B="$$($(ANCHOR_PORTS) ANCHOR_DIR='$(ANCHOR_BIN)' bash $(ANCHOR)/up.sh '$(ANCHOR_STATE)' \
		--audit-policy-file='$(CURDIR)/deploy/compose/audit/policy.yaml' --audit-log-path='$(ANCHOR_STATE)/audit.log' \
		--audit-log-maxsize=100 --audit-log-maxbackup=5 --audit-log-mode=batch)" \
		LOAD_FLAGS="--processes='$(KPLANE_PROCESSES)' --compare-processes='$(ANCHOR_PROCESSES)' $(LOAD_FLAGS)"
	@echo "reference server still running; stop it with $(ANCHOR)/down.sh $(ANCHOR_STATE)"

# Container images (deploy/images): one per command, plus etcd and NATS at
# the versions kplane embeds, all FROM scratch with static binaries.
# Computed once: a file edited during a build must not change the tag
# halfway.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
IMAGE_REPO ?= kplane
IMAGES_DIR := _output/images
THIRD_PARTY_CMDS := go.etcd.io/etcd/server/v3 github.com/nats-io/nats-server/v2
images:
	rm -rf $(IMAGES_DIR) && mkdir -p $(IMAGES_DIR)/bin $(IMAGES_DIR)/data && chmod 700 $(IMAGES_DIR)/data
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w' -o $(IMAGES_DIR)/bin/ $(CMDS)
	cd libs && CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w' -o $(CURDIR)/$(IMAGES_DIR)/bin/etcd go.etcd.io/etcd/server/v3
	cd libs && CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w' -o $(CURDIR)/$(IMAGES_DIR)/bin/nats-server github.com/nats-io/nats-server/v2
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w' -o $(IMAGES_DIR)/probe/kplane-probe kplane.dev/deploy/imageprobe
	cp /etc/ssl/certs/ca-certificates.crt $(IMAGES_DIR)/
	@set -e; for b in $$(ls $(IMAGES_DIR)/bin); do \
	  probe=; case $$b in etcd|nats-server) probe='COPY probe\/kplane-probe \/usr\/local\/bin\/kplane-probe';; esac; \
	  sed -e "s/@BINARY@/$$b/g" -e "s/@PROBE@/$$probe/" deploy/images/Dockerfile.in > $(IMAGES_DIR)/Dockerfile.$$b; \
	  docker build -q -f $(IMAGES_DIR)/Dockerfile.$$b \
	    --label org.opencontainers.image.title=$$b \
	    --label org.opencontainers.image.version=$(VERSION) \
	    --label org.opencontainers.image.source=https://kplane.dev \
	    -t $(IMAGE_REPO)/$$b:$(VERSION) -t $(IMAGE_REPO)/$$b:latest $(IMAGES_DIR) >/dev/null; \
	  echo "$(IMAGE_REPO)/$$b:$(VERSION)"; \
	done

# Builds the images and checks each one (hack/test-images.sh); .ci/run
# calls it where a Docker engine answers.
images-test: images
	IMAGE_REPO=$(IMAGE_REPO) VERSION=$(VERSION) ./hack/test-images.sh

# Brings docker-compose.yml up from the images, runs the kubectl suite
# against it, scales, kills, restarts and partitions under load, checks
# the history with porcupine and takes it down (test/compose); .ci/run
# calls it where a Docker engine answers.
COMPOSE_TIMEOUT ?= 40m
compose-test: images
	cd test && KPLANE_TAG=$(VERSION) $(GO) test -tags compose -count=1 -timeout $(COMPOSE_TIMEOUT) -v -run TestCompose ./compose 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\)' ; exit $${PIPESTATUS[0]}
