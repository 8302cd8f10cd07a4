// shaders/sprite.cu built for the CPU (tests/harness/kernel_on_cpu.py): every thread of
// the launch's grid in turn; the kernel has no barriers.
#include "cuda_on_cpu.h"

#include "sprite.cu"

extern "C" int params_size() { return static_cast<int>(sizeof(Params)); }

extern "C" void sprite_frame_on_cpu(const Params* p, int block_x, int block_y) {
    blockDim = {block_x, block_y, 1};
    for (blockIdx.y = 0; blockIdx.y * block_y < p->height; blockIdx.y++)
        for (blockIdx.x = 0; blockIdx.x * block_x < p->width; blockIdx.x++)
            for (threadIdx.y = 0; threadIdx.y < block_y; threadIdx.y++)
                for (threadIdx.x = 0; threadIdx.x < block_x; threadIdx.x++)
                    sprite_frame(*p);
}
