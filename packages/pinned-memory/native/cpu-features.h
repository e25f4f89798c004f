// Runtime CPU feature detection: kernels are compiled for several ISAs and picked at run time, so the addon also runs
// on CPUs without F16C or AVX-512.
#pragma once

namespace flexhelm {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
};

const CpuFeatures& cpuFeatures();

}  // namespace flexhelm
