// Probe program, forty-first pass (not part of the build; nvcc -O2 -arch=sm_90 -o align
// session41_shared_alignment.cu): the shared addresses of static arrays declared with large
// alignments, and of the dynamic shared memory.
#include <cstdint>
#include <cstdio>
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
static __shared__ __align__(16) uint32_t small[4];
static __shared__ __align__(1024) uint32_t a1k[256];
static __shared__ __align__(2048) uint32_t a2k[512];
static __shared__ __align__(8192) uint32_t a8k[2048];
static __shared__ __align__(16384) uint32_t a16k[4096];
__global__ void k(uint32_t* out) {
  extern __shared__ uint8_t dyn[];
  small[threadIdx.x & 3] = 1;
  a1k[threadIdx.x] = 1;
  a2k[threadIdx.x] = 1;
  a8k[threadIdx.x] = 1;
  a16k[threadIdx.x] = 1;
  dyn[threadIdx.x] = 1;
  __syncthreads();
  if (threadIdx.x == 0) {
    out[0] = smem_u32(small);
    out[1] = smem_u32(a1k);
    out[2] = smem_u32(a2k);
    out[3] = smem_u32(a8k);
    out[4] = smem_u32(a16k);
    out[5] = smem_u32(dyn);
    out[6] = small[0] + a1k[1] + a2k[2] + a8k[3] + a16k[4] + dyn[5];
  }
}
int main() {
  uint32_t* d;
  cudaMalloc(&d, 64);
  uint32_t h[8] = {};
  int reserved = 0;
  cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0);
  k<<<1, 256, 1024>>>(d);
  cudaMemcpy(h, d, 32, cudaMemcpyDeviceToHost);
  const char* names[] = {"align16", "align1024", "align2048", "align8192", "align16384", "dynamic"};
  const uint32_t al[] = {16, 1024, 2048, 8192, 16384, 16};
  printf("reserved shared per block: %d bytes\n", reserved);
  for (int i = 0; i < 6; ++i)
    printf("%-11s shared address 0x%05x  honoured: %s\n", names[i], h[i],
           h[i] % al[i] ? "no" : "yes");
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
