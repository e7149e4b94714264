// Probe program, forty-first pass (not part of the build; nvcc -O2 -arch=sm_90 -o cta_ends
// session41_cta_ends.cu): do CTAs that stream equal shares end at unequal times because of their
// SM (static) or at random? 264 CTAs (2 per SM) read equal contiguous shares of a 32K-position
// float32 layer (K then V, 2 KV heads, 134 MB) with 16-byte loads, 4 in flight per thread, and
// record their SM and end time (globaltimer) per launch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>
__device__ __forceinline__ uint64_t gtime() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %smid;" : "=r"(s));
  return s;
}
__global__ void __launch_bounds__(256, 2)
    stream(const float4* kv, int rows_per_cta, uint64_t* rec, float* sink) {
  const int cta = blockIdx.y * gridDim.x + blockIdx.x;
  const float4* k = kv + ((size_t)blockIdx.x * gridDim.y + blockIdx.y) * rows_per_cta * 64;
  const float4* v = kv + (size_t)gridDim.x * gridDim.y * rows_per_cta * 64 +
                    ((size_t)blockIdx.x * gridDim.y + blockIdx.y) * rows_per_cta * 64;
  __syncthreads();
  const uint64_t t0 = gtime();
  float acc = 0.f;
  const int n = rows_per_cta * 64;  // float4s per stream
  for (int pass = 0; pass < 2; ++pass) {
    const float4* p = pass ? v : k;
    for (int i = threadIdx.x; i < n; i += 4 * 256) {
      float4 x[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        x[u] = i + u * 256 < n ? __ldg(p + i + u * 256) : make_float4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < 4; ++u) acc += x[u].x + x[u].y + x[u].z + x[u].w;
    }
    __syncthreads();
  }
  const uint64_t t1 = gtime();
  if (acc == 1234.5f) sink[0] = acc;
  if (threadIdx.x == 0) rec[3 * cta] = smid(), rec[3 * cta + 1] = t0, rec[3 * cta + 2] = t1;
}
int main() {
  const int heads = 2, ny = 132, rows = 248, ctas = heads * ny, launches = 40, nbuf = 4;
  const size_t per = (size_t)2 * ctas * rows * 64;  // float4s per buffer (K and V)
  std::vector<float4*> buf(nbuf);
  for (auto& b : buf) {
    cudaMalloc(&b, per * 16);
    cudaMemset(b, 1, per * 16);
  }
  uint64_t* rec;
  cudaMalloc(&rec, (size_t)launches * ctas * 3 * 8);
  float* sink;
  cudaMalloc(&sink, 4);
  for (int l = 0; l < launches; ++l)
    stream<<<dim3(heads, ny), 256>>>(buf[l % nbuf], rows, rec + (size_t)l * ctas * 3, sink);
  cudaDeviceSynchronize();
  std::vector<uint64_t> h((size_t)launches * ctas * 3);
  cudaMemcpy(h.data(), rec, h.size() * 8, cudaMemcpyDeviceToHost);
  printf("%s; %.1f MB per launch\n", cudaGetErrorString(cudaGetLastError()), per * 16 / 1e6);
  // Per launch: end - earliest start, per CTA; per SM the mean over its CTAs.
  std::vector<std::vector<double>> sm_end(launches, std::vector<double>(200, NAN));
  std::vector<double> spreads, totals;
  for (int l = 8; l < launches; ++l) {  // skip warm-up
    const uint64_t* r = &h[(size_t)l * ctas * 3];
    uint64_t s0 = ~0ull, e1 = 0;
    for (int c = 0; c < ctas; ++c) s0 = std::min(s0, r[3 * c + 1]), e1 = std::max(e1, r[3 * c + 2]);
    std::vector<double> ends;
    std::vector<int> cnt(200, 0);
    std::vector<double> sum(200, 0);
    for (int c = 0; c < ctas; ++c) {
      double e = (r[3 * c + 2] - s0) / 1e3;
      ends.push_back(e);
      sum[r[3 * c]] += e;
      cnt[r[3 * c]]++;
    }
    std::sort(ends.begin(), ends.end());
    spreads.push_back(ends.back() - ends[ctas / 2]);
    totals.push_back((e1 - s0) / 1e3);
    for (int s = 0; s < 200; ++s)
      if (cnt[s]) sm_end[l][s] = sum[s] / cnt[s];
    if (l < 12)
      printf("launch %d: ends min %.2f median %.2f max %.2f us (%.0f GB/s over the launch)\n", l,
             ends[0], ends[ctas / 2], ends.back(), per * 16 / ((e1 - s0) / 1e9) / 1e9);
  }
  std::sort(spreads.begin(), spreads.end());
  std::sort(totals.begin(), totals.end());
  printf("median over launches: max - median end %.2f us, launch %.2f us\n",
         spreads[spreads.size() / 2], totals[totals.size() / 2]);
  // Static or random: correlation across SMs between the mean ends of even and odd launches.
  std::vector<double> a(200, 0), b(200, 0);
  std::vector<int> na(200, 0), nb(200, 0);
  for (int l = 8; l < launches; ++l)
    for (int s = 0; s < 200; ++s)
      if (!std::isnan(sm_end[l][s])) {
        if (l & 1)
          b[s] += sm_end[l][s], nb[s]++;
        else
          a[s] += sm_end[l][s], na[s]++;
      }
  std::vector<double> xa, xb;
  std::vector<std::pair<double, int>> order;
  for (int s = 0; s < 200; ++s)
    if (na[s] && nb[s]) {
      xa.push_back(a[s] / na[s]);
      xb.push_back(b[s] / nb[s]);
      order.push_back({(a[s] / na[s] + b[s] / nb[s]) / 2, s});
    }
  double ma = 0, mb = 0;
  for (size_t i = 0; i < xa.size(); ++i) ma += xa[i], mb += xb[i];
  ma /= xa.size();
  mb /= xb.size();
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < xa.size(); ++i)
    sab += (xa[i] - ma) * (xb[i] - mb), saa += (xa[i] - ma) * (xa[i] - ma),
        sbb += (xb[i] - mb) * (xb[i] - mb);
  printf("SMs seen: %zu; correlation of per-SM mean end, even vs odd launches: %.3f\n", xa.size(),
         sab / std::sqrt(saa * sbb));
  std::sort(order.begin(), order.end());
  printf("fastest SMs (mean end us):");
  for (int i = 0; i < 8; ++i) printf(" %d:%.2f", order[i].second, order[i].first);
  printf("\nslowest SMs (mean end us):");
  for (size_t i = order.size() - 8; i < order.size(); ++i)
    printf(" %d:%.2f", order[i].second, order[i].first);
  printf("\n");
}
