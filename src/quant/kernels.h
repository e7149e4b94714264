// Internal to quant (and its tests): the per-block reference decoders and the two kernel sets
// (scalar, AVX2+FMA) behind the dispatching functions of quant.h. The kernels assume checked
// arguments: a supported type and n a whole number of blocks.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace rl::quant {

// Decodes one block (block_shape(t).block_size values) of a supported type.
using BlockDecoder = void (*)(const uint8_t* block, float* out);
BlockDecoder block_decoder(TensorType t);  // nullptr when unsupported

// The block shape of t; throws rl::Error naming `what` and the type when t is unsupported or n
// is not a whole number of blocks.
BlockShape checked_shape(TensorType t, int64_t n, const char* what);

namespace scalar {
float dot_row(TensorType t, const void* row, const float* x, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float alpha, const float* x, float* y, int64_t n);
// out[v] += dot(w, x + v * x_stride) over n floats, for v < n_vecs.
void dot_f32_multi_add(const float* w, int64_t n, const float* x, int64_t x_stride, int64_t n_vecs,
                       float* out);
}  // namespace scalar

// Only call these when cpu_has_avx2() is true.
namespace avx2 {
float dot_row(TensorType t, const void* row, const float* x, int64_t n);
// Bit-exact with dequantize_row; used to decode a row once for several activation vectors.
void decode_row(TensorType t, const void* row, float* dst, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float alpha, const float* x, float* y, int64_t n);
void dot_f32_multi_add(const float* w, int64_t n, const float* x, int64_t x_stride, int64_t n_vecs,
                       float* out);
}  // namespace avx2

}  // namespace rl::quant
