// The per-row logits arithmetic of generation (@flexhelm/contract's `jsLogitsMath`), computed natively with exactly its
// results, for `OneDnnBackend.logitsMath`: over a 128k vocabulary each JavaScript loop costs 0.3–4 ms per generated or
// echoed token, these 0.02–0.3 ms. Each declines a row it cannot treat exactly as the JavaScript does (false / −1), and
// the caller then runs the JavaScript.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexhelm {

// logSumExp's parts: max = the largest logit, sum = Σ exp(logit − max) in index order, every exp fdlibm's
// `__ieee754_exp` (what V8's Math.exp computes) and every addition a double one; the caller finishes with
// max + Math.log(sum), so the logarithm is V8's too. Vectorized on AVX-512 (8 exps at a time, then added one by one).
// Declines an empty row, a non-finite value, or a span of 700 or more (exp's arguments leave the range computed here).
bool expSumBelowMax(const float* logits, size_t n, double* max, double* sum, bool scalar = false);

// argmax: the index of the largest value, the first on ties (−0 and +0 tie); −1 for an empty row or one with a NaN.
int64_t argmaxRow(const float* logits, size_t n, bool scalar = false);

// allFinite: whether no value is NaN or infinite (true for an empty row).
bool allFiniteRow(const float* logits, size_t n, bool scalar = false);

// topK: the k largest values, highest first, ties by lower index (ids[i], values[i]); returns how many (min(k, n)),
// or −1 for a row with a NaN or k above kTopKMax.
constexpr int kTopKMax = 64;
int topKRow(const float* logits, size_t n, int k, int32_t* ids, float* values, bool scalar = false);

}  // namespace flexhelm
