// Runtime CPU feature detection: kernels are compiled for several ISAs and picked at run time, so the addon also runs
// on CPUs without F16C or AVX-512.
#pragma once

// x86 SIMD kernels are compiled only for x86 (other CPUs, or FLEXHELM_PORTABLE, get the portable kernels alone).
#if (defined(__x86_64__) || defined(__i386__)) && !defined(FLEXHELM_PORTABLE)
#define FLEXHELM_X86_SIMD 1
#else
#define FLEXHELM_X86_SIMD 0
#endif

namespace flexhelm {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
};

const CpuFeatures& cpuFeatures();

}  // namespace flexhelm
