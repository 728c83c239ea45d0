# flashsale: a new user on a fresh Debian machine needs only `make run` and `make test`.
# Redis and Postgres run as real servers under .data/, on loopback ports that do not clash with a
# system Redis (6379) or Postgres (5432). The work is done by devenv (testenv/cmd/devenv, the same
# code that starts the servers of the tests); each target is a line or three calling it or go.

REDIS_PORT ?= 6380
PG_PORT ?= 5433
PG_VERSION ?= 15
PG_DB ?= flashsale
BENCH_PORT ?= 8080
BENCH_ARGS ?= rush -runs 3 -json bench-results/latest.json
# make chaos: every scenario (CHAOS=01,12 picks some); CLUSTER=1: against the clustered setup
CHAOS ?= all
CLUSTER ?=
# make cluster: nginx's port; CLUSTER_ARGS=-bench sets it up for a load test (benchmarks only)
CLUSTER_PORT ?= 8080
CLUSTER_ARGS ?=

# Recipes call make through this variable, not $(MAKE) directly: a recipe line naming $(MAKE) is
# run even under `make -n`, which would start the services.
SUBMAKE = $(MAKE) --no-print-directory

DEVENV := .data/bin/devenv
DEV := $(DEVENV) -data $(CURDIR)/.data -redis-port $(REDIS_PORT) -pg-port $(PG_PORT) -pg-version $(PG_VERSION) -db $(PG_DB)

.DEFAULT_GOAL := help
.PHONY: help deps deps-test services stop run cluster test test-steps chaos build bench bench-compare audit docker-check fmt generate clean FORCE

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

# devenv, built (quickly, from the build cache) before every use, so that it is never stale
$(DEVENV): FORCE
	@command -v go >/dev/null || { echo "Go 1.26 or newer is needed (Debian's golang package is too old)" >&2; exit 1; }
	@go build -o $@ ./testenv/cmd/devenv

deps: $(DEVENV) ## install with apt-get what serving needs and is missing (redis, postgresql-15)
	@$(DEV) deps

deps-test: $(DEVENV) ## also what the tests need: chromium, chromium-driver, nginx-light, a Chinese font, stripe-mock
	@$(DEV) deps -test

services: $(DEVENV) ## start Redis and Postgres under .data/ (idempotent, keeps data)
	@$(DEV) up

stop: $(DEVENV) ## stop Redis and Postgres started by make services (quiet when not running)
	@$(DEV) down

# The server runs in a process group of its own: Ctrl-C (or a TERM sent to make) reaches it once,
# through devenv, which then stops the services.
run: export FLASHSALE_DATA_DIR ?= .data
run: export FLASHSALE_DEMO ?= 1
run: deps ## start the services and serve in the foreground (Ctrl-C stops the server, then the services)
	go build -o .data/bin/flashsale .
	@$(DEV) with -- .data/bin/flashsale serve

cluster: $(DEVENV) ## Redis Cluster, NATS cluster, 3 instances, nginx on :8080, in the foreground (Ctrl-C stops all)
	@$(DEV) deps -cluster && $(DEV) -set cluster -cluster-port $(CLUSTER_PORT) $(CLUSTER_ARGS) up

test: deps-test ## start the services, check generated views, vet, run all tests, stop the services
	@$(DEV) with -- $(SUBMAKE) test-steps

test-steps: $(DEVENV)
	go tool templ generate
	@$(DEV) checkviews
	go vet ./...
	@$(DEV) dropdbs
	go test -count=1 -timeout 20m -parallel 6 ./...

chaos: deps-test ## the fault suite: kill -9, SIGSTOP and restarts under load, every scenario (up to 15 min)
	@$(DEV) chaos $(if $(filter-out 0,$(CLUSTER)),-cluster) $(CHAOS)

build: ## build the ./flashsale binary
	CGO_ENABLED=0 go build -o flashsale .

bench: deps ## benchmark a fresh server: make bench [ARGS="soldout -runs 3 -json bench-results/soldout.json"]
	@$(DEV) -bench-port $(BENCH_PORT) bench $(or $(ARGS),$(BENCH_ARGS))

# make bench-compare BASE=<git ref> [PAIRS=3] [ARGS="-scenarios rush"]: the base against the working
# tree, alternated, medians and spread of CPU per request and per shopper against bare Gin's.
PAIRS ?= 3
bench-compare: deps ## the budget: make bench-compare BASE=<git ref> (the working tree against it, 3 pairs; BENCHMARKS.md)
	@test -n "$(BASE)" || { echo "make bench-compare needs BASE=<git ref>, e.g. BASE=HEAD~1" >&2; exit 2; }
	@$(DEV) -bench-port $(BENCH_PORT) bench-compare -base $(BASE) -pairs $(PAIRS) $(ARGS)

# make bench-rush, bench-soldout, bench-reserve, bench-ladder: one scenario, its JSON in bench-results/.
bench-%: deps
	@$(DEV) -bench-port $(BENCH_PORT) bench $* $(ARGS) -json bench-results/$*.json

# make audit: a server of its own on :8091 (the demo accounts, the test captcha) over make run's
# Redis and Postgres; Lighthouse through npx (Node and npm, Debian's, and chromium: make deps-test).
# AUDIT_ARGS="-base http://127.0.0.1:8080" audits a running make run instead; "-only live" some pages.
AUDIT_ARGS ?=
audit: export FLASHSALE_DATA_DIR ?= .data
audit: deps-test ## Lighthouse on every page, phone and desktop, signed out and in: prints the table (README, "Audits")
	@command -v npx >/dev/null || { echo "npx is needed: apt-get install npm" >&2; exit 1; }
	go build -o .data/bin/flashsale .
	@$(DEV) with -- go run ./testenv/cmd/audit $(or $(AUDIT_ARGS),-server .data/bin/flashsale)

docker-check: $(DEVENV) ## build the binary exactly as the Dockerfile does
	@$(DEV) docker-check

fmt: ## format Go and templ files
	go fmt ./...
	go tool templ fmt .

generate: ## regenerate views/*_templ.go from the .templ files
	go tool templ generate

clean: stop ## stop the services and delete .data/ (all local data) and the binary
	rm -rf .data flashsale

FORCE:
