// What the CPU offers, asked once: every kernel file picks its AVX-512 (or AVX512_BF16) code or the plain C++ loop
// from these, so that one place says which instruction sets a kernel may use (and FLEXHELM_ONEDNN_PLAIN_KERNELS
// switches the BW/VL kernels off the same way everywhere).
#pragma once

#include <cstdlib>

namespace flexhelm {

// Whether environment variable `name` is set to exactly "0" (how every FLEXHELM_* switch of the addon turns a path off).
inline bool envSwitchedOff(const char* name) {
  const char* v = std::getenv(name);
  return v && v[0] == '0' && v[1] == '\0';
}

// AVX-512 foundation: the 16-float row kernels (norms, RoPE-free elementwise loops, softmax, exp16).
inline bool cpuAvx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// AVX-512 with byte/word instructions (the decode attention kernel's shuffles).
inline bool cpuAvx512BwIsa() {
  static const bool yes = cpuAvx512() && __builtin_cpu_supports("avx512bw");
  return yes;
}

// AVX512_BF16 with BW and VL, whatever FLEXHELM_ONEDNN_PLAIN_KERNELS says (the attention kernels' bf16 blocks).
inline bool cpuAvx512Bf16Isa() {
  static const bool yes = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return yes;
}

// AVX-512 with byte/word and vector-length extensions, unless FLEXHELM_ONEDNN_PLAIN_KERNELS asks for the plain loops.
inline bool cpuAvx512Bw() {
  static const bool yes = cpuAvx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && !std::getenv("FLEXHELM_ONEDNN_PLAIN_KERNELS");
  return yes;
}

// AVX512_BF16 (vdpbf16ps) on top of cpuAvx512Bw().
inline bool cpuAvx512Bf16() {
  static const bool yes = cpuAvx512Bw() && __builtin_cpu_supports("avx512bf16");
  return yes;
}

}  // namespace flexhelm
