# Thin front door over CMake. `make help` lists the targets.
BUILD      ?= build
ASAN_BUILD ?= build-asan
LINT_BUILD ?= build-lint
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo lint test test-fast test-sanitize bench soak verify install clean help

all: build

deps:
	@./scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMSEM_TESTS=ON -DSHMSEM_BENCH=ON -DSHMSEM_TOOLS=ON -DSHMSEM_SANITIZE=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/shmsem-demo

# Static analysis first (it fails fastest), then the whole suite, again
# under AddressSanitizer + UBSan, then the SPIN model check of the protocol
# (about a minute).
test: lint test-fast test-sanitize verify

# clang-tidy (.clang-tidy) and cppcheck (.cppcheck-suppressions); any finding
# fails. Configures its own build directory, builds nothing. See scripts/lint.
lint: deps
	./scripts/lint $(LINT_BUILD)

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSHMSEM_SANITIZE=ON -DSHMSEM_TESTS=ON -DSHMSEM_BENCH=OFF -DSHMSEM_TOOLS=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 -LE no-sanitize

bench: build
	./bench/run.sh $(BUILD)

# The crash tests, longer: more kill occurrences per hook point and a long
# random-kill stress run.
soak: build
	SHMSEM_CRASH_SEEDS=$${SHMSEM_CRASH_SEEDS:-8} SHMSEM_STRESS_SECONDS=$${SHMSEM_SOAK_SECONDS:-120} ./$(BUILD)/tests/shmsem_crash_test

verify: deps
	./verify/run.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(LINT_BUILD)

help:
	@echo "make demo       build and run the demo (installs Debian packages if missing)"
	@echo "make test       make lint, all tests, again under ASan+UBSan, then make verify"
	@echo "make lint       clang-tidy and cppcheck; any finding fails (scripts/lint)"
	@echo "make test-fast  the tests without the sanitizer pass"
	@echo "make bench      benchmarks against sem_t, SysV, robust mutex, flock"
	@echo "make soak       long crash soak (SHMSEM_SOAK_SECONDS=120, SHMSEM_CRASH_SEEDS=8)"
	@echo "make verify     model-check verify/shmsem.pml with SPIN"
	@echo "make install    install into PREFIX (default /usr/local)"
