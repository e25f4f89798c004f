// The sum behind a row's log-sum-exp, with the bits of @flexhelm/contract's `logSumExp` (which HELM's logprobs come
// from): max = the largest logit, sum = Σ exp(logit − max) in index order, every exp fdlibm's `__ieee754_exp` (what
// V8's Math.exp computes) and every addition a double one. The caller finishes with max + Math.log(sum) in JavaScript,
// so the logarithm is V8's too. Vectorized on AVX-512 (8 exps at a time, then added one by one), a scalar loop
// elsewhere: ~10× faster than the JavaScript loop, which costs 1–4 ms a 128k vocabulary per generated token.
#pragma once

#include <cstddef>

namespace flexhelm {

// false (max / sum unset) when the row is empty, holds a non-finite value, or spans 700 or more (exp's arguments
// leave the range this computes exactly as fdlibm does): the caller then uses the JavaScript loop.
bool expSumBelowMax(const float* logits, size_t n, double* max, double* sum);

// The scalar loop, also on AVX-512 hosts (the tests compare both with the JavaScript).
bool expSumBelowMaxScalar(const float* logits, size_t n, double* max, double* sum);

}  // namespace flexhelm
