#include "rope.h"

#include <cmath>
#include <vector>

namespace flexhelm {

namespace {
constexpr size_t kParallelMin = size_t{1} << 16;
}  // namespace

void ropeRows(float* x, int rows, size_t ld, int heads, int headDim, const int* positions, const float* invFreq, float scale) {
  const int half = headDim / 2;
#pragma omp parallel if (static_cast<size_t>(rows) * heads * headDim >= kParallelMin)
  {
    thread_local std::vector<float> cs;
    if (cs.size() < static_cast<size_t>(headDim)) cs.resize(headDim);
    float* cosv = cs.data();
    float* sinv = cs.data() + half;
#pragma omp for schedule(static)
    for (int r = 0; r < rows; r++) {
      // The angle is rounded to float32 first, as transformers computes it (position_ids.float() · inv_freq); the
      // scale multiplies the float32 cos and sin (Phi3LongRoPEScaledRotaryEmbedding's cos · scaling_factor).
      for (int i = 0; i < half; i++) {
        const float angle = static_cast<float>(static_cast<double>(positions[r]) * invFreq[i]);
        cosv[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale;
        sinv[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale;
      }
      float* row = x + static_cast<size_t>(r) * ld;
      for (int h = 0; h < heads; h++) {
        float* v = row + static_cast<size_t>(h) * headDim;
        for (int i = 0; i < half; i++) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cosv[i] - b * sinv[i];
          v[i + half] = b * cosv[i] + a * sinv[i];
        }
      }
    }
  }
}

}  // namespace flexhelm
