// The gated MLP activations of the rotary decoder layers: gate and up projections side by side in one row of 2I
// (one GEMM), out[r, i] = act(gateUp[r, i]) · gateUp[r, I + i]. Rows run in parallel with OpenMP.
#pragma once

#include <cstdint>

namespace flexhelm {

enum class GatedActivation { silu, geluTanh };

// act = silu (SwiGLU: Llama, Mistral, Qwen2, Phi-3, OLMo 2) or tanh-approximated GELU (GeGLU: Gemma 2's
// gelu_pytorch_tanh, 0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))), computed as z · sigmoid(2·sqrt(2/π)·(…)) in
// float32; AVX-512 where I is a multiple of 16).
void gatedRows(GatedActivation act, const float* gateUp, int rows, int I, float* out);
// The same written as bf16 bits (what the down projection's bf16 GEMM reads).
void gatedRowsBf16(GatedActivation act, const float* gateUp, int rows, int I, uint16_t* out);

}  // namespace flexhelm
