# anvil: thin wrapper around CMake. `make run` and `make test` install what is missing first.
#   make run    build (CPU, plus CUDA when nvcc can run it) and run the quickstart
#   make test   build and run the CPU test suite; also compiles the CUDA (sm_90) and HIP (gfx90a) builds
#   make gpu    CUDA build for the H200 machine (static third-party libraries, ships to machines without them)
#   make bench  op micro-benchmarks on the best backend present
JOBS ?= $(shell nproc)
CUDA_ARCHS ?= 90
HIP_ARCHS ?= gfx90a
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CMAKE_COMMON := -G Ninja -DCMAKE_BUILD_TYPE=Release

.PHONY: all setup build run test test-cpu build-cuda build-hip compile-cuda compile-hip gpu bench clean

all: build

setup:
	@bash scripts/setup.sh --with-hip --with-python

build: setup
	cmake -S . -B build $(CMAKE_COMMON) -DANVIL_GPU=none >/dev/null
	cmake --build build -j $(JOBS)

run: build
	bash scripts/quickstart.sh

# CI: compile every vendor's build (a kernel that breaks either fails here), then run the CPU suite last so
# the output ends with ctest's summary.
test: build compile-cuda compile-hip test-cpu

test-cpu: build
	cd build && ctest --output-on-failure -j $(JOBS) --timeout 1500

build-cuda: setup
	@if [ -z "$(NVCC)" ]; then echo "build-cuda: nvcc not found, skipping the CUDA build"; else \
	  cmake -S . -B build-cuda $(CMAKE_COMMON) -DANVIL_GPU=cuda -DANVIL_CUDA_ARCHS="$(CUDA_ARCHS)" \
	    -DCMAKE_CUDA_COMPILER=$(NVCC) -DANVIL_STATIC=ON >/dev/null && cmake --build build-cuda -j $(JOBS) $(CUDA_TARGET); fi

build-hip: setup
	@if ! command -v hipcc >/dev/null; then echo "build-hip: hipcc not found, skipping the HIP build"; else \
	  hip_cxx=$$(HIPCC_VERBOSE=1 hipcc --version 2>&1 | grep -o '[^ ]*clang++[^ ]*' | head -1); \
	  cmake -S . -B build-hip $(CMAKE_COMMON) -DANVIL_GPU=hip -DANVIL_HIP_ARCHS="$(HIP_ARCHS)" \
	    -DCMAKE_CXX_COMPILER=$$hip_cxx >/dev/null && cmake --build build-hip -j $(JOBS) $(HIP_TARGET); fi

# CI has no GPU, so it compiles without linking:
# - CUDA: every kernel source (.cu), the kernel timeline recorder (tools/kernel_trace, where CUPTI is found), and
#   the host .cpp files with GPU-only code (#ifdef ANVIL_HAS_GPU / ANVIL_CUDA / ANVIL_HIP: the kernels' dispatch,
#   the inference linear layer, ...), which the CPU build never sees. Its host compiler is the CPU build's g++,
#   so the other .cpp files would only be compiled again.
# - HIP: every source of the library and the CLI (~4 min on two cores). Its host compiler is clang 15, which
#   rejects code g++ takes (a structured binding captured by a lambda got through before this).
GPU_OBJECTS = $$(ninja -C $(1) -t targets all | grep -oE '^[^:]*(\.cu\.o|kernel_trace\.cpp\.o)' | sort -u) \
  $$(grep -rlE 'ANVIL_HAS_GPU|ANVIL_CUDA|ANVIL_HIP' src --include='*.cpp' | sed 's|^|CMakeFiles/anvil.dir/|; s|$$|.o|')
ALL_OBJECTS = $$(ninja -C $(1) -t targets all | grep -o '^[^:]*\.o' | grep -v '^tests/' | sort -u)
compile-cuda: setup
	@$(MAKE) --no-print-directory build-cuda CUDA_TARGET="--target help" >/dev/null
	@if [ -d build-cuda ]; then ninja -C build-cuda $(call GPU_OBJECTS,build-cuda); fi
compile-hip: setup
	@$(MAKE) --no-print-directory build-hip HIP_TARGET="--target help" >/dev/null
	@if [ -d build-hip ]; then ninja -C build-hip $(call ALL_OBJECTS,build-hip); fi

gpu: build-cuda

bench: build
	@if [ -x build-cuda/anvil ] && nvidia-smi >/dev/null 2>&1; then build-cuda/anvil bench ops; else build/anvil bench ops; fi

clean:
	rm -rf build build-cuda build-hip
