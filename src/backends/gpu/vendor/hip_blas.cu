// AMD: no vendor GEMM in this build (Debian's ROCm 5.2 packages ship no hipBLAS/hipBLASLt), so every product
// runs the portable tiled kernel. A hipBLASLt wrapper would replace this stub behind the same interface.
#if defined(ANVIL_HIP)
#include "backends/gpu/common.cuh"  // first: the HIP runtime defines __host__/__device__ for dtype.h
#include "backends/gpu/vendor/gemm.h"

namespace anvil::gpu {

bool vendor_gemm(const VendorGemm&) { return false; }

}  // namespace anvil::gpu
#endif
