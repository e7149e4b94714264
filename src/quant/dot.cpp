// Scalar reference dot products and the run-time choice between them and the AVX2 kernels.
//
// Summation structure (the tests' error bound relies on it): the scalar kernels sum the
// products of each run of at most 256 values into a partial sum and add the partial sums in
// order, so each product passes through at most 256 + n/256 + 1 roundings.
#include <cpuid.h>
#include <algorithm>

#include "quant/kernels.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::quant {
namespace {

constexpr int64_t kRun = 256;  // a multiple of every block size

float dot_run(const float* w, const float* x, int64_t n) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

}  // namespace

namespace scalar {

float dot_row(TensorType t, const void* row, const float* x, int64_t n) {
  const BlockShape shape = block_shape(t);
  const BlockDecoder decode = block_decoder(t);
  const auto* bytes = static_cast<const uint8_t*>(row);
  float w[kRun];
  float total = 0.f;
  for (int64_t start = 0; start < n; start += kRun) {
    const int64_t count = std::min(kRun, n - start);
    const uint8_t* src = bytes + start / shape.block_size * shape.block_bytes;
    for (int64_t j = 0; j < count / shape.block_size; ++j) {
      decode(src + j * shape.block_bytes, w + j * shape.block_size);
    }
    total += dot_run(w, x + start, count);
  }
  return total;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float total = 0.f;
  for (int64_t start = 0; start < n; start += kRun) {
    total += dot_run(a + start, b + start, std::min(kRun, n - start));
  }
  return total;
}

void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void dot_f32_multi_add(const float* w, int64_t n, const float* x, int64_t x_stride, int64_t n_vecs,
                       float* out) {
  for (int64_t v = 0; v < n_vecs; ++v) out[v] += dot_f32(w, x + v * x_stride, n);
}

}  // namespace scalar

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    // The AVX2 file is compiled with -mavx2 -mfma -mf16c, so all three must be present.
    // F16C through cpuid (leaf 1, ECX bit 29): clang 14 has no __builtin_cpu_supports("f16c").
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return has;
}

void decode_row(TensorType t, const void* src, float* dst, int64_t n) {
  if (!cpu_has_avx2()) return dequantize_row(t, src, dst, n);
  checked_shape(t, n, "decode_row");
  avx2::decode_row(t, src, dst, n);
}

float dot_row_scalar(TensorType t, const void* row, const float* x, int64_t n) {
  checked_shape(t, n, "dot_row_scalar");
  return scalar::dot_row(t, row, x, n);
}

float dot_row(TensorType t, const void* row, const float* x, int64_t n) {
  checked_shape(t, n, "dot_row");
  return cpu_has_avx2() ? avx2::dot_row(t, row, x, n) : scalar::dot_row(t, row, x, n);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return cpu_has_avx2() ? avx2::dot_f32(a, b, n) : scalar::dot_f32(a, b, n);
}

void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
  if (cpu_has_avx2()) {
    avx2::axpy_f32(alpha, x, y, n);
  } else {
    scalar::axpy_f32(alpha, x, y, n);
  }
}

void dot_rows_batch(TensorType t, const void* row, int64_t n, const float* x, int64_t x_stride,
                    int64_t n_vecs, float* out) {
  const BlockShape shape = checked_shape(t, n, "dot_rows_batch");
  if (n_vecs < 0) fail("dot_rows_batch: negative vector count ", n_vecs);
  if (n_vecs <= 1) {  // nothing to share: decoding into registers is faster
    if (n_vecs == 1) out[0] = dot_row(t, row, x, n);
    return;
  }
  const bool avx2 = cpu_has_avx2();
  std::fill(out, out + n_vecs, 0.f);
  // Decoded a chunk at a time so the weights stay in L1 while every vector passes over them.
  constexpr int64_t kChunk = 1024;  // a multiple of every block size
  alignas(32) float w[kChunk];
  const auto* bytes = static_cast<const uint8_t*>(row);
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    const uint8_t* src = bytes + start / shape.block_size * shape.block_bytes;
    const float* weights = w;
    if (t == TensorType::F32) {
      weights = reinterpret_cast<const float*>(src);
    } else if (avx2) {
      avx2::decode_row(t, src, w, count);
    } else {
      dequantize_row(t, src, w, count);
    }
    if (avx2) {
      avx2::dot_f32_multi_add(weights, count, x + start, x_stride, n_vecs, out);
    } else {
      scalar::dot_f32_multi_add(weights, count, x + start, x_stride, n_vecs, out);
    }
  }
}

}  // namespace rl::quant
