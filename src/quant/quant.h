// Block formats of the tensors Red Lite reads: reference dequantisation (bit-exact with ggml)
// and CPU dot products of a quantised row with float32 activations.
#pragma once
#include <cstdint>
#include <span>

#include "gguf/types.h"

namespace rl::quant {

using gguf::TensorType;

// The types this module decodes: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K Q2_K Q3_K IQ2_XXS IQ2_XS
// IQ3_XXS IQ4_XS IQ4_NL.
bool is_supported(TensorType t);

// Decodes n values (a multiple of the type's block size) starting at src. Bit-exact with ggml's
// CPU dequantisers.
void dequantize_row(TensorType t, const void* src, float* dst, int64_t n);

// The same values as dequantize_row (bit-exact, tested), through the AVX2 decoders when the
// CPU has them: for decoding a row once and using it against many activation vectors.
void decode_row(TensorType t, const void* src, float* dst, int64_t n);

// sum_i w[i] * x[i] over one quantised row of n values, accumulated in float32. Uses the AVX2+FMA
// path when the CPU has it, else the scalar one; both are checked against float64.
float dot_row(TensorType t, const void* row, const float* x, int64_t n);
float dot_row_scalar(TensorType t, const void* row, const float* x, int64_t n);

// out[v] = dot_row(t, row, x + v * x_stride, n) for v < n_vecs, decoding the row only once:
// the building block of matrix-matrix products (prefill). Same accuracy as dot_row.
void dot_rows_batch(TensorType t, const void* row, int64_t n, const float* x, int64_t x_stride,
                    int64_t n_vecs, float* out);

// Plain float32 helpers on the same dispatch, for the CPU engine's inner loops.
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float alpha, const float* x, float* y, int64_t n);  // y += alpha * x

bool cpu_has_avx2();

}  // namespace rl::quant

namespace rl::quant {

// Fills one row of n values (a multiple of the block size) with random but valid blocks whose
// decoded values have a standard deviation of about `stddev` and are all finite. Used by
// `redlite mkmodel` for synthetic models and by tests. Deterministic for a given seed.
void fill_random_row(TensorType t, uint64_t seed, float stddev, void* dst, int64_t n);

}  // namespace rl::quant
