#include "cpu-features.h"

#include <cstdlib>
#include <cstring>

namespace flexhelm {

const CpuFeatures& cpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if FLEXHELM_X86_SIMD
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.f16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
#endif
    // FLEXHELM_NATIVE_SIMD=scalar (or 0) forces the portable kernels, =avx2 stops at AVX2/F16C: lets tests cover every
    // code path on one machine.
    const char* limit = std::getenv("FLEXHELM_NATIVE_SIMD");
    if (limit != nullptr && (std::strcmp(limit, "scalar") == 0 || std::strcmp(limit, "0") == 0)) f = CpuFeatures{};
    if (limit != nullptr && std::strcmp(limit, "avx2") == 0) f.avx512f = f.avx512bw = false;
    return f;
  }();
  return features;
}

}  // namespace flexhelm
