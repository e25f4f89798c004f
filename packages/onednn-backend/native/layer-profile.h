// Wall time spent in each part of DecoderLayer::run (every family's decoder layer), summed over calls while enabled (layerProfile() in the addon): the
// benchmark reads it to see what besides the GEMMs costs time in a decoder layer.
#pragma once

#include <chrono>

namespace flexhelm {

// Llama-family layers: RMSNorm counts as layerNorm, gate/up as fc1, down as fc2, plus rope and the SwiGLU activation.
enum ProfilePart { kProfLayerNorm, kProfQkv, kProfKvWrite, kProfAttention, kProfResidualCopy, kProfOutProj, kProfFc1, kProfFc2, kProfRope, kProfActivation, kProfParts };

inline const char* const kProfileNames[kProfParts] = {"layerNorm", "qkv", "kvWrite", "attention", "residualCopy", "outProj", "fc1", "fc2", "rope", "activation"};

struct LayerProfile {
  bool enabled = false;
  double ms[kProfParts] = {};
  long calls = 0;
};

LayerProfile& layerProfile();

// Adds the time since the previous mark to `part` (no-op unless profiling is enabled).
class ProfileClock {
 public:
  ProfileClock() : on_(layerProfile().enabled), last_(on_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
  void mark(ProfilePart part) {
    if (!on_) return;
    auto now = std::chrono::steady_clock::now();
    layerProfile().ms[part] += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace flexhelm
