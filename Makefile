# Thin front door over CMake. `make help` lists the targets.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
LINT_BUILD ?= build-lint
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=
# The segment fuzzer: clang from Debian, run time and worker processes.
FUZZ_CC ?= clang-14
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 600
FUZZ_SHORT_SECONDS ?= 30
FUZZ_WORKERS ?= $(JOBS)

# Where `make test` (scripts/test-all) keeps each stage's log.
TEST_LOGS ?= $(BUILD)/test-logs
# The SPIN verifiers compiled before, reused when their model and flags are
# the same (verify/run.sh --cache).
VERIFY_CACHE ?= $(BUILD)/verify-cache

CTEST_FAST = cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
CTEST_SANITIZE = cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 -LE no-sanitize

.PHONY: all deps build build-asan demo lint test test-fast test-sanitize suite-fast suite-sanitize fuzz fuzz-short fuzz-short-run fuzz-build bench soak verify verify-quick install clean help

all: build

deps:
	@./scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMSEM_TESTS=ON -DSHMSEM_BENCH=ON -DSHMSEM_TOOLS=ON -DSHMSEM_SANITIZE=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/shmsem-demo

# Static analysis, the whole suite, again under AddressSanitizer + UBSan
# (less what runs no library code: label no-sanitize), the quick tier of the
# SPIN model check (every model; `make verify` runs every configuration) and
# half a minute of the segment fuzzer from its seeds: each stage of the
# targets lint, test-fast, test-sanitize, verify-quick and fuzz-short, run
# side by side (scripts/test-all: the builds, lint and SPIN together, each
# suite once its build is done with everything else reniced below it, the
# fuzzer last), with a log per stage in $(TEST_LOGS) and each stage's time
# at the end.
test:
	+@MAKE="$(MAKE)" ./scripts/test-all $(TEST_LOGS)

# clang-tidy (.clang-tidy) and cppcheck (.cppcheck-suppressions); any finding
# fails. Configures its own build directory, builds nothing. See scripts/lint.
lint: deps
	./scripts/lint $(LINT_BUILD)

test-fast: build
	$(CTEST_FAST)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSHMSEM_SANITIZE=ON -DSHMSEM_TESTS=ON -DSHMSEM_BENCH=OFF -DSHMSEM_TOOLS=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-sanitize: build-asan
	$(CTEST_SANITIZE)

# The suites alone, over builds made before (scripts/test-all builds first).
suite-fast:
	$(CTEST_FAST)

suite-sanitize:
	$(CTEST_SANITIZE)

# libFuzzer over arbitrary segment bytes (tests/fuzz/), ASan+UBSan, clang.
# The compiler is chosen when $(FUZZ_BUILD) is first configured (CC/CXX).
fuzz-build: deps
	CC=$(FUZZ_CC) CXX=$(FUZZ_CXX) cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMSEM_FUZZ=ON -DSHMSEM_TESTS=OFF -DSHMSEM_BENCH=OFF -DSHMSEM_TOOLS=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target shmsem_segment_fuzz shmsem_fuzz_seeds

# FUZZ_SECONDS per worker, growing $(FUZZ_BUILD)/fuzz/corpus across runs.
fuzz: fuzz-build
	./tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_WORKERS)

# The short run of `make test`: from the seeds alone, FUZZ_SHORT_SECONDS.
FUZZ_SHORT = ./tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SHORT_SECONDS) $(FUZZ_WORKERS) fresh
fuzz-short: fuzz-build
	$(FUZZ_SHORT)

# The same over a fuzz build made before (scripts/test-all).
fuzz-short-run:
	$(FUZZ_SHORT)

bench: build
	./bench/run.sh $(BUILD)

# The crash tests, longer: more kill occurrences per hook point and a long
# random-kill stress run.
soak: build
	SHMSEM_CRASH_SEEDS=$${SHMSEM_CRASH_SEEDS:-8} SHMSEM_STRESS_SECONDS=$${SHMSEM_SOAK_SECONDS:-120} ./$(BUILD)/tests/shmsem_crash_test

verify: deps
	./verify/run.sh --cache $(VERIFY_CACHE)

verify-quick: deps
	./verify/run.sh --quick --cache $(VERIFY_CACHE)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(LINT_BUILD)

help:
	@echo "make demo       build and run the demo (installs Debian packages if missing)"
	@echo "make test       make lint, all tests, again under ASan+UBSan, make verify-quick and make fuzz-short,"
	@echo "                side by side where they do not disturb each other (scripts/test-all); each"
	@echo "                stage's log in TEST_LOGS=$(TEST_LOGS), its time at the end"
	@echo "make lint       clang-tidy and cppcheck; any finding fails (scripts/lint)"
	@echo "make test-fast  the tests without the sanitizer pass"
	@echo "make test-sanitize  the tests under ASan+UBSan (build-asan: that build alone)"
	@echo "make bench      benchmarks against sem_t, SysV, robust mutex, flock"
	@echo "make soak       long crash soak (SHMSEM_SOAK_SECONDS=120, SHMSEM_CRASH_SEEDS=8)"
	@echo "make verify     model-check every configuration of the SPIN models in verify/ (~10 min on 2 CPUs)"
	@echo "make verify-quick  the smaller configurations of each model (part of make test)"
	@echo "make fuzz       libFuzzer (clang, ASan+UBSan) over arbitrary segment bytes and op scripts,"
	@echo "                FUZZ_SECONDS=600 per worker, FUZZ_WORKERS=nproc; corpus, logs and any"
	@echo "                crashing input in $(FUZZ_BUILD)/fuzz/; fails on any finding"
	@echo "make fuzz-short the same for FUZZ_SHORT_SECONDS=30 from the seeds alone (part of make test)"
	@echo "make install    install into PREFIX (default /usr/local)"
