// The tiled Q8_0 / Q4_0 GEMM (native/gemm/quant-gemm.cc) of two builds in one binary: `base` is another revision's
// quant-gemm.cc compiled into namespace flexhelm_base (quant-gemm-ab.mjs does that), the candidate is the working
// tree's. Each shape runs both on the same weights and activations, alternated round by round, and reports the best
// time of each, their ratio and whether the outputs are the same bits. One JSON line per type and shape.
//   quant-gemm-ab ROUNDS TYPES SHAPES   (types Q4_0,Q8_0; shapes MxKxN,…)
#include "gemm/quant-gemm.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace flexhelm_base {
enum class QuantType { q8_0, q4_0, q4_k, q5_k, q6_k };
void quantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const int8_t* xq, const float* xd, const int32_t* xs, int M, float* y, bool accumulate);
}  // namespace flexhelm_base

using flexhelm::QuantType;

namespace {

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: quant-gemm-ab ROUNDS TYPES SHAPES\n");
    return 2;
  }
  if (!flexhelm::quantGemmAvailable()) {
    std::printf("{\"error\":\"no AVX-512 VNNI on this CPU: the tiled GEMM does not run here\"}\n");
    return 0;
  }
  const int rounds = std::atoi(argv[1]);
  for (const std::string& name : split(argv[2], ',')) {
    const QuantType t = name == "Q8_0" ? QuantType::q8_0 : QuantType::q4_0;
    for (const std::string& shape : split(argv[3], ',')) {
      const std::vector<std::string> dims = split(shape, 'x');
      const int M = std::stoi(dims[0]), K = std::stoi(dims[1]), N = std::stoi(dims[2]);
      const size_t blockBytes = flexhelm::quantBlockBytes(t), blocks = K / 32;
      // Random blocks with scales around 2^-7 (f16 0x2000 + mantissa), in GGUF's row order, then interleaved.
      std::vector<uint8_t> rows(N * blocks * blockBytes), packed(rows.size());
      std::mt19937 rng(1);
      for (auto& b : rows) b = static_cast<uint8_t>(rng());
      for (size_t i = 0; i < static_cast<size_t>(N) * blocks; i++) {
        const uint16_t h = static_cast<uint16_t>(0x2000 + (rng() & 0x3ff));
        std::memcpy(&rows[i * blockBytes], &h, 2);
      }
      flexhelm::quantInterleave(t, rows.data(), K, N, packed.data());
      std::vector<float> x(static_cast<size_t>(M) * K);
      std::normal_distribution<float> normal;
      for (auto& v : x) v = normal(rng);
      std::vector<int8_t> xq(x.size());
      std::vector<float> xd(M * blocks);
      std::vector<int32_t> xs(M * blocks);
      flexhelm::quantizeRowsQ8Vnni(x.data(), M, K, xq.data(), xd.data(), xs.data());
      std::vector<float> yBase(static_cast<size_t>(M) * N), yNew(yBase.size());
      double base = 1e30, candidate = 1e30;
      for (int r = 0; r < rounds; r++) {
        double t0 = seconds();
        flexhelm_base::quantGemmVnni(static_cast<flexhelm_base::QuantType>(t), packed.data(), K, N, xq.data(), xd.data(), xs.data(), M, yBase.data(), false);
        base = std::min(base, seconds() - t0);
        t0 = seconds();
        flexhelm::quantGemmVnni(t, packed.data(), K, N, xq.data(), xd.data(), xs.data(), M, yNew.data(), false);
        candidate = std::min(candidate, seconds() - t0);
      }
      size_t differ = 0;
      for (size_t i = 0; i < yBase.size(); i++) differ += std::memcmp(&yBase[i], &yNew[i], 4) != 0;
      const double ops = 2.0 * M * K * N;
      std::printf("{\"type\":\"%s\",\"M\":%d,\"K\":%d,\"N\":%d,\"threads\":%d,\"base_ms\":%.3f,\"candidate_ms\":%.3f,\"base_gops\":%.0f,\"candidate_gops\":%.0f,\"speedup\":%.3f,\"outputs_differ\":%zu}\n",
                  name.c_str(), M, K, N, omp_get_max_threads(), base * 1e3, candidate * 1e3, ops / base / 1e9, ops / candidate / 1e9, base / candidate, differ);
      std::fflush(stdout);
    }
  }
}
