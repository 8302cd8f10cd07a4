// shaders/photo_mouth.cu built for the CPU (tests/harness/kernel_on_cpu.py). A block's
// threads run one after another, all through the load phase and then all through the
// shade phase: what __syncthreads() between the two orders on the GPU.
#include "cuda_on_cpu.h"

#include "photo_mouth.cu"

extern "C" int params_size() { return static_cast<int>(sizeof(Params)); }

extern "C" void mouth_triangles_on_cpu(const Params* p, int triangles, int threads) {
    float record[3][RECORD + STATIC];
    for (int block = 0; block < triangles; block++) {
        for (int t = 0; t < threads; t++) load_records(*p, record, block, t);
        for (int t = 0; t < threads; t++) shade_triangle(*p, record, block, t, threads);
    }
}

extern "C" void mouth_resolve_on_cpu(const Params* p, int threads) {
    blockDim.x = threads;
    for (blockIdx.x = 0; blockIdx.x * threads < p->width * p->height; blockIdx.x++)
        for (threadIdx.x = 0; threadIdx.x < threads; threadIdx.x++) mouth_resolve(*p);
}
