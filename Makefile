# Thin front door over CMake. `make help` lists the targets.
BUILD      ?= build
ASAN_BUILD ?= build-asan
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-fast test-sanitize bench soak verify install clean help

all: build

deps:
	@./scripts/install-deps

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/shmsem-demo

# The whole suite, then again under AddressSanitizer + UBSan.
test: test-fast test-sanitize

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSHMSEM_SANITIZE=ON -DSHMSEM_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 -LE no-sanitize

bench: build
	./bench/run.sh $(BUILD)

soak: build
	SHMSEM_SOAK_SECONDS=$${SHMSEM_SOAK_SECONDS:-120} ./$(BUILD)/tests/shmsem_soak

verify: deps
	./verify/run.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

help:
	@echo "make demo       build and run the demo (installs Debian packages if missing)"
	@echo "make test       build and run all tests, then again under ASan+UBSan"
	@echo "make test-fast  the tests without the sanitizer pass"
	@echo "make bench      benchmarks against sem_t, SysV, robust mutex, flock"
	@echo "make soak       long crash/stress soak (SHMSEM_SOAK_SECONDS, default 120)"
	@echo "make verify     model-check verify/shmsem.pml with SPIN"
	@echo "make install    install into PREFIX (default /usr/local)"
