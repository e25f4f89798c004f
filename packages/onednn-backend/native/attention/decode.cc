#include "attention-internal.h"

namespace flexhelm {
namespace attn {

// ---- decode: one query row per head, every query head of a kv head at once ----
//
// A decode step reads each (batch, kv head)'s K and V once from memory (the cache is far larger than the CPU's caches),
// so this path is about streaming them at memory speed: K key by key (16 keys' dots summed by one shuffle tree, not a
// horizontal sum per key), the softmax over the scores, then V key by key. The K pass prefetches 4 KiB ahead (its
// loads come in bursts of 16 keys between the shuffle trees; without it the batch-8 step was 17-36% slower); the V
// pass, one plain stream, is left to the hardware prefetcher (prefetching it too, or K 8 KiB ahead, was no faster).
// Query heads that share a kv head (grouped-query attention) take their dots and sums from the same K and V lines
// while they are in L1.
// Sums run in fp32 on the stored values: a 64-byte load of a bf16 row holds 32 values as 16 (even, odd) pairs; the odd
// ones are the pairs with the low half cleared, the even ones the pairs shifted left by 16, both exact floats. So q
// and the sums are split into even and odd elements instead of widening in order; a float cache is read in the same
// split (a permute), which keeps a bf16 layer's results identical with either cache.

#define DECODE_TARGET __attribute__((target("avx512f,avx512bw")))

constexpr int kDecodeKeys = 16;     // keys whose dots one shuffle tree sums
constexpr int kDecodeChunk = 64;    // keys of V each query head of a group takes from L1 in turn
constexpr int kDecodeMaxGroup = 8;  // query heads per kv head read together (more: done in turns)
constexpr size_t kDecodePrefetch = 4096;  // bytes of K prefetched ahead of the 16 keys being read

// Elements 2i and 2i + 1 of 32 consecutive values as floats.
DECODE_TARGET inline void evenOdd(const uint16_t* p, __m512& even, __m512& odd) {
  const __m512i x = _mm512_loadu_si512(p);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
DECODE_TARGET inline void evenOdd(const float* p, __m512& even, __m512& odd) {
  const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
  const __m512i e = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  even = _mm512_permutex2var_ps(lo, e, hi);
  odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(e, _mm512_set1_epi32(1)), hi);
}

// Lane j = the sum of x[j]'s 16 lanes. Halves are added pairwise in four rounds, each round putting two vectors'
// partial sums side by side; the last permute puts key j in lane j.
DECODE_TARGET inline __m512 sum16(const __m512* x) {
  __m512 a[8], b[4], c[2];
  // a[i]: lanes 0-7 partial sums of x[i], 8-15 of x[i + 8].
  for (int i = 0; i < 8; i++)
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[i], x[i + 8], 0x44), _mm512_shuffle_f32x4(x[i], x[i + 8], 0xee));
  // b[i]: 128-bit lanes hold x[i], x[i + 8], x[i + 4], x[i + 12] (4 partial sums each).
  for (int i = 0; i < 4; i++)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 4], 0x88), _mm512_shuffle_f32x4(a[i], a[i + 4], 0xdd));
  // c[i]: in each 128-bit lane, 2 partial sums of b[i]'s key, then 2 of b[i + 2]'s.
  for (int i = 0; i < 2; i++)
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[i], b[i + 2], 0x44), _mm512_shuffle_ps(b[i], b[i + 2], 0xee));
  // Lane 4l + e: b[0], b[2], b[1], b[3]'s key (e = 0..3) of 128-bit lane l (x offset 0, 8, 4, 12).
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
  // So s holds keys 0 2 1 3 | 8 10 9 11 | 4 6 5 7 | 12 14 13 15; lane[j] is where key j is.
  const __m512i lane = _mm512_set_epi32(15, 13, 14, 12, 7, 5, 6, 4, 11, 9, 10, 8, 3, 1, 2, 0);
  return _mm512_permutexvar_ps(lane, s);
}

DECODE_TARGET inline void prefetchBytes(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t at = 0; at < bytes; at += 64) _mm_prefetch(c + at, _MM_HINT_T0);
}

// Before the scores of keys t0 … t0 + 15: K kDecodePrefetch bytes ahead, and these keys' V rows, so they come from
// memory beside K rather than when the P·V pass reaches them (decode attention 1.63–1.80 → 1.46–1.53 ms a token at
// 512 keys, Llama-3.2-1B, bf16 cache, Intel Xeon with AMX).
template <class KV>
DECODE_TARGET inline void prefetchKeyBlock(const KV* k, const KV* v, int t0, int L, int D) {
  const size_t row = sizeof(KV) * D;
  prefetchBytes(reinterpret_cast<const char*>(k + static_cast<size_t>(t0) * D) + kDecodePrefetch, kDecodeKeys * row);
  if (t0 + kDecodeKeys <= L) prefetchBytes(reinterpret_cast<const char*>(v + static_cast<size_t>(t0) * D), kDecodeKeys * row);
}

// This thread's scratch for one decode group: scores [kDecodeMaxGroup, Lpad] (L rounded up to whole blocks of
// kDecodeKeys keys) and sums [kDecodeMaxGroup, D].
struct DecodeScratch {
  AttentionScratch& w;
  size_t Lpad;
  float* scores;
  float* acc;
  DecodeScratch(int L, int D)
      : w(threadScratch()),
        Lpad((static_cast<size_t>(L) + kDecodeKeys - 1) / kDecodeKeys * kDecodeKeys),
        scores(sized(w.scores, kDecodeMaxGroup * Lpad)),
        acc(sized(w.acc, kDecodeMaxGroup * static_cast<size_t>(D))) {}
};

// Query heads h0 .. h0 + G of batch b against kv head (b, kh)'s K and V ([T, D] rows, the first L visible), NV = D/32.
template <int NV, class KV>
DECODE_TARGET void decodeGroup(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int h0, int G) {
  constexpr int D = 32 * NV;
  const size_t E = static_cast<size_t>(s.heads) * D;
  const DecodeScratch ds(L, D);
  const size_t Lpad = ds.Lpad;
  float* sc = ds.scores;
  float* acc = ds.acc;
  // Each query head's q, scaled, split into even and odd elements.
  __m512 qs[kDecodeMaxGroup][2 * NV];
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  for (int g = 0; g < G; g++) {
    const float* qr = q + static_cast<size_t>(b) * s.qStride + static_cast<size_t>(h0 + g) * D;
    for (int j = 0; j < NV; j++) {
      const __m512 lo = _mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j), _mm512_set1_ps(s.qScale));
      const __m512 hi = _mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j + 16), _mm512_set1_ps(s.qScale));
      qs[g][2 * j] = _mm512_permutex2var_ps(lo, evens, hi);
      qs[g][2 * j + 1] = _mm512_permutex2var_ps(lo, odds, hi);
    }
  }
  // Scores, 16 keys at a time; the keys past L in the last 16 repeat key L - 1 (in bounds) and are not stored.
  for (int t0 = 0; t0 < L; t0 += kDecodeKeys) {
    prefetchKeyBlock(k, v, t0, L, D);
    const int n = std::min(kDecodeKeys, L - t0);
    for (int g = 0; g < G; g++) {
      __m512 dots[kDecodeKeys];
      for (int i = 0; i < kDecodeKeys; i++) {
        const KV* kt = k + static_cast<size_t>(t0 + std::min(i, n - 1)) * D;
        __m512 e, o;
        evenOdd(kt, e, o);
        __m512 a = _mm512_mul_ps(qs[g][0], e);
        a = _mm512_fmadd_ps(qs[g][1], o, a);
        for (int j = 1; j < NV; j++) {
          evenOdd(kt + 32 * j, e, o);
          a = _mm512_fmadd_ps(qs[g][2 * j], e, a);
          a = _mm512_fmadd_ps(qs[g][2 * j + 1], o, a);
        }
        dots[i] = a;
      }
      _mm512_mask_storeu_ps(sc + g * Lpad + t0, tailMask(n), sum16(dots));
    }
  }
  float inv[kDecodeMaxGroup];
  for (int g = 0; g < G; g++) inv[g] = static_cast<float>(1.0 / softmaxRow(sc + g * Lpad, mask, L, s.logitSoftcap));
  // Σ p_t v_t in chunks of keys: the first query head brings a chunk of V into L1, the others read it there.
  for (int t0 = 0; t0 < L; t0 += kDecodeChunk) {
    const int t1 = std::min(L, t0 + kDecodeChunk);
    for (int g = 0; g < G; g++) {
      __m512 a[2 * NV];
      for (int j = 0; j < 2 * NV; j++) a[j] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + g * D + 16 * j);
      const float* p = sc + g * Lpad;
      for (int t = t0; t < t1; t++) {
        const KV* vt = v + static_cast<size_t>(t) * D;
        const __m512 pt = _mm512_set1_ps(p[t]);
        for (int j = 0; j < NV; j++) {
          __m512 e, o;
          evenOdd(vt + 32 * j, e, o);
          a[2 * j] = _mm512_fmadd_ps(pt, e, a[2 * j]);
          a[2 * j + 1] = _mm512_fmadd_ps(pt, o, a[2 * j + 1]);
        }
      }
      for (int j = 0; j < 2 * NV; j++) _mm512_storeu_ps(acc + g * D + 16 * j, a[j]);
    }
  }
  // Even and odd sums back into order, times 1 / Σ exp.
  const __m512i lower = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i upper = _mm512_add_epi32(lower, _mm512_set1_epi32(8));
  for (int g = 0; g < G; g++) {
    float* o = out + static_cast<size_t>(b) * E + static_cast<size_t>(h0 + g) * D;
    const __m512 scale = _mm512_set1_ps(inv[g]);
    for (int j = 0; j < NV; j++) {
      const __m512 e = _mm512_loadu_ps(acc + g * D + 32 * j), od = _mm512_loadu_ps(acc + g * D + 32 * j + 16);
      _mm512_storeu_ps(o + 32 * j, _mm512_mul_ps(_mm512_permutex2var_ps(e, lower, od), scale));
      _mm512_storeu_ps(o + 32 * j + 16, _mm512_mul_ps(_mm512_permutex2var_ps(e, upper, od), scale));
    }
  }
}

// The same on bf16 operands for a bf16 layer (with AVX512_BF16), as its prompt blocks compute: q (scaled) and the
// probabilities rounded to bf16, dots and sums in fp32 by vdpbf16ps, which multiplies and adds two bf16 pairs per
// lane. Half the instructions of the fp32 split per key: q·k takes one vdpbf16ps per 32 values of a row; P·V takes
// two keys at once, their rows interleaved into (key t, key t + 1) pairs by unpacklo/hi. A float cache (bf16 values
// in a bf16 layer) is rounded to bf16 as it is read, exactly, so either cache gives the same bits.

// 32 values of a row as bf16 bits, in order.
BF16_TARGET inline __m512i bf16Row(const uint16_t* p) { return _mm512_loadu_si512(p); }
BF16_TARGET inline __m512i bf16Row(const float* p) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p)));
}

template <int NV, class KV>
BF16_TARGET void decodeGroupBf16(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int h0, int G) {
  constexpr int D = 32 * NV;
  const size_t E = static_cast<size_t>(s.heads) * D;
  const DecodeScratch ds(L, D);
  const size_t Lpad = ds.Lpad;
  float* sc = ds.scores;
  float* acc = ds.acc;
  uint16_t* pr = sized(ds.w.probs, kDecodeMaxGroup * Lpad);
  // Each query head's q, scaled, as 16 bf16 pairs per 32 values.
  __m512bh qs[kDecodeMaxGroup][NV];
  for (int g = 0; g < G; g++) {
    const float* qr = q + static_cast<size_t>(b) * s.qStride + static_cast<size_t>(h0 + g) * D;
    for (int j = 0; j < NV; j++)
      qs[g][j] = _mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j + 16), _mm512_set1_ps(s.qScale)), _mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j), _mm512_set1_ps(s.qScale)));
  }
  // Scores, 16 keys at a time (keys past L repeat key L - 1 and are not stored), as decodeGroup.
  for (int t0 = 0; t0 < L; t0 += kDecodeKeys) {
    prefetchKeyBlock(k, v, t0, L, D);
    const int n = std::min(kDecodeKeys, L - t0);
    for (int g = 0; g < G; g++) {
      __m512 dots[kDecodeKeys];
      for (int i = 0; i < kDecodeKeys; i++) {
        const KV* kt = k + static_cast<size_t>(t0 + std::min(i, n - 1)) * D;
        __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), qs[g][0], asPairs(bf16Row(kt)));
        for (int j = 1; j < NV; j++) a = _mm512_dpbf16_ps(a, qs[g][j], asPairs(bf16Row(kt + 32 * j)));
        dots[i] = a;
      }
      _mm512_mask_storeu_ps(sc + g * Lpad + t0, tailMask(n), sum16(dots));
    }
  }
  // Probabilities as bf16, zero from L to Lpad (so a last odd key pairs with a zero).
  float inv[kDecodeMaxGroup];
  for (int g = 0; g < G; g++) inv[g] = static_cast<float>(1.0 / softmaxRowBf16(sc + g * Lpad, mask, L, pr + g * Lpad, static_cast<int>(Lpad), s.logitSoftcap));
  // Σ p_t v_t, keys t and t + 1 together: lane 4l + m of unpacklo(v_t, v_t+1) holds column 8l + m's pair, of
  // unpackhi column 8l + 4 + m's (l the 128-bit lane); the sums are put back in order at the end.
  for (int t0 = 0; t0 < L; t0 += kDecodeChunk) {
    const int t1 = std::min(L, t0 + kDecodeChunk);
    for (int g = 0; g < G; g++) {
      __m512 lo[NV], hi[NV];
      for (int j = 0; j < NV; j++) {
        lo[j] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + g * D + 32 * j);
        hi[j] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + g * D + 32 * j + 16);
      }
      const uint16_t* p = pr + g * Lpad;
      for (int t = t0; t < t1; t += 2) {
        const KV* v0 = v + static_cast<size_t>(t) * D;
        uint32_t pair;
        std::memcpy(&pair, p + t, sizeof pair);
        const __m512bh pp = asPairs(_mm512_set1_epi32(static_cast<int>(pair)));
        const bool second = t + 1 < L;  // else the row past the cache's last key is not read
        for (int j = 0; j < NV; j++) {
          const __m512i x0 = bf16Row(v0 + 32 * j);
          const __m512i x1 = second ? bf16Row(v0 + D + 32 * j) : _mm512_setzero_si512();
          lo[j] = _mm512_dpbf16_ps(lo[j], asPairs(_mm512_unpacklo_epi16(x0, x1)), pp);
          hi[j] = _mm512_dpbf16_ps(hi[j], asPairs(_mm512_unpackhi_epi16(x0, x1)), pp);
        }
      }
      for (int j = 0; j < NV; j++) {
        _mm512_storeu_ps(acc + g * D + 32 * j, lo[j]);
        _mm512_storeu_ps(acc + g * D + 32 * j + 16, hi[j]);
      }
    }
  }
  // Columns 0-15 and 16-31 of each 32 from the lo (index < 16) and hi (index ≥ 16) sums, times 1 / Σ exp.
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
  for (int g = 0; g < G; g++) {
    float* o = out + static_cast<size_t>(b) * E + static_cast<size_t>(h0 + g) * D;
    const __m512 scale = _mm512_set1_ps(inv[g]);
    for (int j = 0; j < NV; j++) {
      const __m512 l = _mm512_loadu_ps(acc + g * D + 32 * j), h = _mm512_loadu_ps(acc + g * D + 32 * j + 16);
      _mm512_storeu_ps(o + 32 * j, _mm512_mul_ps(_mm512_permutex2var_ps(l, first, h), scale));
      _mm512_storeu_ps(o + 32 * j + 16, _mm512_mul_ps(_mm512_permutex2var_ps(l, second, h), scale));
    }
  }
}

// The query heads of kv head (b, kh), in groups of up to kDecodeMaxGroup.
template <class KV>
void decodeKvHead(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int kh) {
  const int group = s.heads / s.kvHeadCount();
  for (int g0 = 0; g0 < group; g0 += kDecodeMaxGroup) {
    const int h0 = kh * group + g0, G = std::min(kDecodeMaxGroup, group - g0);
    if (s.bf16 && bf16Path()) {
      switch (s.headDim / 32) {
        case 1: decodeGroupBf16<1>(s, q, k, v, mask, L, out, b, h0, G); break;
        case 2: decodeGroupBf16<2>(s, q, k, v, mask, L, out, b, h0, G); break;
        case 3: decodeGroupBf16<3>(s, q, k, v, mask, L, out, b, h0, G); break;
        default: decodeGroupBf16<4>(s, q, k, v, mask, L, out, b, h0, G); break;
      }
      continue;
    }
    switch (s.headDim / 32) {
      case 1: decodeGroup<1>(s, q, k, v, mask, L, out, b, h0, G); break;
      case 2: decodeGroup<2>(s, q, k, v, mask, L, out, b, h0, G); break;
      case 3: decodeGroup<3>(s, q, k, v, mask, L, out, b, h0, G); break;
      default: decodeGroup<4>(s, q, k, v, mask, L, out, b, h0, G); break;
    }
  }
}

template void decodeKvHead<float>(const AttentionShape&, const float*, const float*, const float*, const float*, int, float*, int, int);
template void decodeKvHead<uint16_t>(const AttentionShape&, const float*, const uint16_t*, const uint16_t*, const float*, int, float*, int, int);

}  // namespace attn
}  // namespace flexhelm
