# flashsale: a new user on a fresh Debian machine needs only `make run` and `make test`.
# Redis and Postgres run as real servers under .data/, on loopback ports that do not clash with a
# system Redis (6379) or Postgres (5432). Every recipe is one bash script (.ONESHELL), strict mode.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help

REDIS_PORT ?= 6380
PG_PORT ?= 5433
PG_VERSION ?= 15
PG_BIN ?= /usr/lib/postgresql/$(PG_VERSION)/bin
PG_DB ?= flashsale

# The server's settings for `make run`; override any of them from the environment.
FLASHSALE_DATABASE_URL ?= postgres://postgres@127.0.0.1:$(PG_PORT)/$(PG_DB)?sslmode=disable
FLASHSALE_REDIS_URL ?= redis://127.0.0.1:$(REDIS_PORT)/0
FLASHSALE_DATA_DIR ?= .data
FLASHSALE_DEMO ?= 1
# An admin connection: the tests create one database per test in this cluster.
FLASHSALE_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:$(PG_PORT)/postgres?sslmode=disable

DATA := $(CURDIR)/.data
REDIS_DIR := $(DATA)/redis
REDIS_PID := $(REDIS_DIR)/redis.pid
PG_DATA := $(DATA)/pg
PG_SOCK := $(DATA)/pgsock
PG_LOG := $(DATA)/pg.log
# fsync stays on: this cluster holds the dev data, and acknowledged orders must survive a crash.
PG_OPTS := -p $(PG_PORT) -k $(PG_SOCK) -c listen_addresses=127.0.0.1 \
	-c fsync=on -c max_connections=200 -c shared_buffers=256MB
PSQL := $(PG_BIN)/psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p $(PG_PORT) -U postgres -d postgres

# Recipes call make through this variable, not $(MAKE) directly: with .ONESHELL a recipe naming
# $(MAKE) is run whole even under `make -n`, which would start the server.
SUBMAKE = $(MAKE) --no-print-directory

# Postgres refuses to run as root: as root, its commands run as the postgres OS user.
ifeq ($(shell id -u),0)
AS_PG := runuser -u postgres --
SUDO :=
else
AS_PG :=
SUDO := sudo
endif

# Shell functions for recipes: is the Redis / Postgres started from .data/ running? A pidfile
# alone is not proof: after a crash or reboot its pid may be gone, a zombie, or another process.
define RUNNING
alive() { # the process exists and is not a zombie (a daemon's orphan may stay unreaped)
  local state
  state=$$(sed -E 's/.*\) (.).*/\1/' /proc/$$1/stat 2>/dev/null) && [ -n "$$state" ] && [ "$$state" != Z ]
}
redis_pid() {
  local pid
  pid=$$(cat "$(REDIS_PID)" 2>/dev/null) && [ -n "$$pid" ] && alive "$$pid" &&
    [ "$$(cat /proc/$$pid/comm 2>/dev/null)" = redis-server ] && echo "$$pid"
}
pg_pid() {
  local pid
  pid=$$(head -1 "$(PG_DATA)/postmaster.pid" 2>/dev/null) && [ -n "$$pid" ] && alive "$$pid" &&
    tr '\0' ' ' 2>/dev/null </proc/$$pid/cmdline | grep -qF -- "-D $(PG_DATA) " && echo "$$pid"
}
endef

.PHONY: help deps services services-redis services-pg stop run test chaos build bench docker-check fmt generate clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

deps: ## install what is missing with apt-get: redis, postgresql-15, chromium and a Chinese font for browser tests
	@command -v go >/dev/null || { echo "deps: Go 1.26 or newer is needed (Debian's golang package is too old)" >&2; exit 1; }
	pkgs=()
	command -v redis-server >/dev/null || pkgs+=(redis-server)
	command -v redis-cli >/dev/null || pkgs+=(redis-tools)
	[ -x "$(PG_BIN)/initdb" ] || pkgs+=(postgresql-$(PG_VERSION))
	command -v chromium >/dev/null || pkgs+=(chromium)
	command -v chromedriver >/dev/null || pkgs+=(chromium-driver)
	if [ $${#pkgs[@]} -gt 0 ]; then
	  echo "deps: installing $${pkgs[*]}"
	  $(SUDO) apt-get update -q
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-upgrade "$${pkgs[@]}"
	fi
	# A Chinese font makes the Chinese pages' screenshots readable; the tests pass without one,
	# so a machine that cannot install it only gets a warning.
	if ! { command -v fc-list >/dev/null && fc-list :lang=zh | grep -q .; }; then
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-upgrade fonts-noto-cjk; } ||
	    echo "deps: no Chinese font (fonts-noto-cjk): the Chinese screenshots will show boxes" >&2
	fi

services: services-redis services-pg ## start Redis and Postgres under .data/ (idempotent, keeps data)

services-redis:
	@$(RUNNING)
	mkdir -p "$(REDIS_DIR)"
	if pid=$$(redis_pid); then
	  echo "redis: running (pid $$pid)"
	else
	  rm -f "$(REDIS_PID)"
	  if [ "$$(redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping 2>/dev/null)" = PONG ]; then
	    echo "redis: port $(REDIS_PORT) is taken by another Redis: set REDIS_PORT" >&2
	    exit 1
	  fi
	  redis-server --bind 127.0.0.1 --port $(REDIS_PORT) --dir "$(REDIS_DIR)" \
	    --appendonly yes --appendfsync everysec \
	    --daemonize yes --pidfile "$(REDIS_PID)" --logfile "$(REDIS_DIR)/redis.log"
	fi
	# wait for PING: loading a large append-only file takes a while
	for _ in $$(seq 300); do
	  [ "$$(redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping 2>/dev/null)" = PONG ] && { echo "redis: ready on 127.0.0.1:$(REDIS_PORT)"; exit 0; }
	  sleep 0.1
	done
	echo "redis: no answer on port $(REDIS_PORT); $(REDIS_DIR)/redis.log says:" >&2
	tail -20 "$(REDIS_DIR)/redis.log" >&2
	exit 1

services-pg:
	@$(RUNNING)
	[ -x "$(PG_BIN)/initdb" ] || { echo "postgres: $(PG_BIN)/initdb not found: run make deps" >&2; exit 1; }
	mkdir -p "$(DATA)" "$(PG_SOCK)"
	chmod 755 "$(DATA)"
	touch "$(PG_LOG)"
	if [ "$$(id -u)" = 0 ]; then
	  # the postgres user must be able to reach .data/ (a checkout under /root is not reachable)
	  IFS=/ read -ra parts <<<"$(DATA)"
	  dir=""
	  for part in "$${parts[@]}"; do
	    [ -n "$$part" ] || continue
	    dir="$$dir/$$part"
	    if ! $(AS_PG) test -x "$$dir"; then
	      echo "postgres: chmod o+x $$dir, so that the postgres user can reach .data/"
	      chmod o+x "$$dir"
	    fi
	  done
	  chown postgres: "$(PG_SOCK)" "$(PG_LOG)"
	fi
	if [ ! -f "$(PG_DATA)/PG_VERSION" ]; then
	  mkdir -p "$(PG_DATA)"
	  chmod 700 "$(PG_DATA)"
	  [ "$$(id -u)" != 0 ] || chown postgres: "$(PG_DATA)"
	  $(AS_PG) "$(PG_BIN)/initdb" -D "$(PG_DATA)" --auth=trust -U postgres -E UTF8 --locale=C.UTF-8 \
	    >"$(DATA)/initdb.log" 2>&1 || { cat "$(DATA)/initdb.log" >&2; exit 1; }
	  echo "postgres: created the cluster in $(PG_DATA)"
	elif [ "$$(cat "$(PG_DATA)/PG_VERSION")" != "$(PG_VERSION)" ]; then
	  echo "postgres: $(PG_DATA) is a Postgres $$(cat "$(PG_DATA)/PG_VERSION") cluster, not $(PG_VERSION): make clean, or set PG_VERSION" >&2
	  exit 1
	fi
	if pid=$$(pg_pid); then
	  echo "postgres: running (pid $$pid)"
	else
	  # stale lock files name a dead postmaster, which Postgres takes for alive while it is a zombie
	  rm -f "$(PG_DATA)/postmaster.pid" "$(PG_SOCK)"/.s.PGSQL.*
	  $(AS_PG) "$(PG_BIN)/pg_ctl" -D "$(PG_DATA)" -l "$(PG_LOG)" -w -t 120 -o "$(PG_OPTS)" start >/dev/null ||
	    { echo "postgres: did not start; $(PG_LOG) says:" >&2; tail -20 "$(PG_LOG)" >&2; exit 1; }
	fi
	"$(PG_BIN)/pg_isready" -q -h 127.0.0.1 -p $(PG_PORT) -U postgres -d postgres -t 60 ||
	  { echo "postgres: not ready on port $(PG_PORT); $(PG_LOG) says:" >&2; tail -20 "$(PG_LOG)" >&2; exit 1; }
	if [ "$$($(PSQL) -tAc "SELECT 1 FROM pg_database WHERE datname = '$(PG_DB)'")" != 1 ]; then
	  $(PSQL) -c 'CREATE DATABASE "$(PG_DB)"'
	  echo "postgres: created database $(PG_DB)"
	fi
	echo "postgres: ready on 127.0.0.1:$(PG_PORT)"

stop: ## stop Redis and Postgres started by make services (quiet when not running)
	@$(RUNNING)
	if pid=$$(redis_pid); then
	  redis-cli -h 127.0.0.1 -p $(REDIS_PORT) shutdown >/dev/null 2>&1 || kill -TERM "$$pid"
	  for _ in $$(seq 300); do alive "$$pid" || break; sleep 0.1; done
	  echo "redis: stopped"
	fi
	if pg_pid >/dev/null; then
	  $(AS_PG) "$(PG_BIN)/pg_ctl" -D "$(PG_DATA)" stop -m fast -w -t 120 >/dev/null
	  echo "postgres: stopped"
	fi

run: deps ## start the services and serve in the foreground (Ctrl-C stops the server, then the services)
	@trap '$(SUBMAKE) stop' EXIT
	$(SUBMAKE) services
	# The server runs as a job in its own process group: `go run` does not pass signals on, so
	# Ctrl-C (or a TERM sent to make) reaches the server through this trap, exactly once.
	set -m
	FLASHSALE_DATABASE_URL='$(FLASHSALE_DATABASE_URL)' FLASHSALE_REDIS_URL='$(FLASHSALE_REDIS_URL)' \
	FLASHSALE_DATA_DIR='$(FLASHSALE_DATA_DIR)' FLASHSALE_DEMO='$(FLASHSALE_DEMO)' \
	  go run . serve &
	server=$$!
	set +m
	trap 'kill -INT -- -$$server 2>/dev/null || true' INT TERM HUP
	while :; do
	  wait $$server && status=0 || status=$$?
	  kill -0 $$server 2>/dev/null || break # else wait was cut short by a signal
	done
	exit $$status

test: deps ## start the services, check generated views, vet, run all tests, stop the services
	@trap '$(SUBMAKE) stop' EXIT
	$(SUBMAKE) services
	go tool templ generate
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	  # the committed *_templ.go files must be what templ generates from the committed .templ files
	  git diff --exit-code -- views || { echo "test: views/*_templ.go are stale: commit what go tool templ generate wrote" >&2; exit 1; }
	  untracked=$$(git ls-files --others --exclude-standard -- views)
	  [ -z "$$untracked" ] || { printf 'test: generated files not committed:\n%s\n' "$$untracked" >&2; exit 1; }
	fi
	go vet ./...
	# drop the per-test databases that an interrupted run left behind (each test drops its own)
	for db in $$($(PSQL) -tAc "SELECT datname FROM pg_database WHERE datname LIKE 't\_%'"); do
	  $(PSQL) -c "DROP DATABASE \"$$db\" WITH (FORCE)"
	done
	FLASHSALE_TEST_DATABASE_URL='$(FLASHSALE_TEST_DATABASE_URL)' go test -count=1 -timeout 20m ./...

# make chaos: the fault suite (tests/chaos, RELIABILITY.md), every scenario (CHAOS=01,12 picks
# some). Each scenario starts its own redis-server, nats-server and three flashsale processes;
# Postgres is the cluster of `make services` when it answers on PG_PORT (never stopped here),
# else a private throwaway cluster. The table goes to tests/chaos/out/latest.{md,json}.
CHAOS ?= all

chaos: ## the fault suite: kill -9, SIGSTOP and restarts under load, every scenario (up to 15 min)
	@mkdir -p tests/chaos/out
	if "$(PG_BIN)/pg_isready" -q -h 127.0.0.1 -p $(PG_PORT) -U postgres -d postgres -t 2 2>/dev/null; then
	  export FLASHSALE_TEST_DATABASE_URL='$(FLASHSALE_TEST_DATABASE_URL)'
	else
	  echo "chaos: no Postgres on port $(PG_PORT): the suite starts a private cluster"
	  unset FLASHSALE_TEST_DATABASE_URL
	fi
	rm -f tests/chaos/out/latest.md tests/chaos/out/latest.json
	FLASHSALE_CHAOS='$(CHAOS)' go test -count=1 -timeout 25m -run 'TestChaos' -v ./tests/chaos/ 2>&1 |
	  tee tests/chaos/out/run.log | grep --line-buffered -E '^(=== RUN|\s*--- |ok|FAIL|PASS|panic)' && status=0 || status=$$?
	[ -f tests/chaos/out/latest.md ] && cat tests/chaos/out/latest.md
	[ $$status = 0 ] || echo "chaos: failed; the whole log is tests/chaos/out/run.log" >&2
	exit $$status

build: ## build the ./flashsale binary
	@CGO_ENABLED=0 go build -o flashsale .

# make bench: the benchmark tool (bench/, BENCHMARKS.md) against a flashsale it builds and starts
# on BENCH_PORT with rate limits off and the test captcha, on the services above; a server already
# answering there is used as it is (and left running). Results go to bench-results/ (gitignored).
BENCH_PORT ?= 8080
BENCH_ARGS ?= rush -runs 3 -json bench-results/latest.json

bench: ## benchmark a fresh server: make bench [ARGS="soldout -runs 3 -json bench-results/soldout.json"]
	@$(SUBMAKE) services
	mkdir -p bench-results
	export FLASHSALE_BENCH_URL='http://127.0.0.1:$(BENCH_PORT)' FLASHSALE_DATABASE_URL='$(FLASHSALE_DATABASE_URL)' FLASHSALE_REDIS_URL='$(FLASHSALE_REDIS_URL)'
	ready() { # GET /readyz answers 200 (bash's /dev/tcp: no curl needed)
	  { exec 3<>/dev/tcp/127.0.0.1/$(BENCH_PORT); } 2>/dev/null || return 1
	  printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	  local status; read -r -t 2 _ status _ <&3 || status=; exec 3<&- 3>&-
	  [ "$$status" = 200 ]
	}
	if ready; then
	  echo "bench: using the server already on 127.0.0.1:$(BENCH_PORT) (it needs FLASHSALE_RATE_LIMITS=off, FLASHSALE_CAPTCHA=test)"
	else
	  CGO_ENABLED=0 go build -o bench-results/flashsale .
	  FLASHSALE_ADDR=127.0.0.1:$(BENCH_PORT) FLASHSALE_RATE_LIMITS=off FLASHSALE_CAPTCHA=test \
	  FLASHSALE_PURCHASE_TOKEN_TTL=2m FLASHSALE_NATS_PORT=-1 FLASHSALE_DATA_DIR=bench-results/data FLASHSALE_LOG_LEVEL=warn \
	    bench-results/flashsale serve >bench-results/server.log 2>&1 &
	  server=$$!
	  trap 'kill -TERM $$server 2>/dev/null && wait $$server 2>/dev/null; true' EXIT
	  for i in $$(seq 601); do
	    ready && break
	    kill -0 $$server 2>/dev/null && [ $$i -lt 601 ] || { echo "bench: the server did not start; bench-results/server.log says:" >&2; tail -20 bench-results/server.log >&2; exit 1; }
	    sleep 0.1
	  done
	  echo "bench: started the server on 127.0.0.1:$(BENCH_PORT) (pid $$server, log bench-results/server.log)"
	fi
	go run ./bench $(or $(ARGS),$(BENCH_ARGS))

# make bench-rush, bench-soldout, bench-reserve, bench-ladder: one scenario, its JSON in bench-results/.
bench-%:
	@$(SUBMAKE) bench ARGS="$* $(ARGS) -json bench-results/$*.json"

# The Dockerfile's build, run here without a Docker engine: the same command, in a copy of the
# build context (the repository less what .dockerignore leaves out), with no GOFLAGS.
DOCKER_BUILD := CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /flashsale .

docker-check: ## build the binary exactly as the Dockerfile does
	@grep -qF '$(DOCKER_BUILD)' Dockerfile || { echo "docker-check: the Dockerfile no longer runs: $(DOCKER_BUILD)" >&2; exit 1; }
	tmp=$$(mktemp -d)
	trap 'rm -rf "$$tmp"' EXIT
	mkdir "$$tmp/src"
	mapfile -t ignored < <(grep -vE '^\s*(#|$$)' .dockerignore | sed 's|^/||; s|/$$||')
	for f in * .[!.]*; do
	  [ -e "$$f" ] || continue
	  for pat in "$${ignored[@]}"; do [[ "$$f" == $$pat ]] && continue 2; done
	  cp -a "$$f" "$$tmp/src/"
	done
	cd "$$tmp/src"
	GOFLAGS= $(subst /flashsale,"$$tmp/flashsale",$(DOCKER_BUILD))
	go version -m "$$tmp/flashsale" | grep -q 'CGO_ENABLED=0'
	echo "docker-check: static binary built as in the Dockerfile ($$(du -h "$$tmp/flashsale" | cut -f1))"

fmt: ## format Go and templ files
	@go fmt ./...
	go tool templ fmt .

generate: ## regenerate views/*_templ.go from the .templ files
	@go tool templ generate

clean: stop ## stop the services and delete .data/ (all local data) and the binary
	@rm -rf "$(DATA)" flashsale
