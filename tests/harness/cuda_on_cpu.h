// Stand-ins for the few CUDA features shaders/*.cu use, over host memory, so that g++
// builds the kernels for the CPU (tests/harness/kernel_on_cpu.py) and CI, which has no
// GPU, compares what they draw with GL's. Texture and surface handles point to
// HostTexture (textures) and HostImage (surfaces) records here.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#define __device__ inline
#define __global__
#define __shared__ static
using std::max;
using std::min;

struct float2 { float x, y; };
struct float3 { float x, y, z; };
struct float4 { float x, y, z, w; };
struct uchar4 { unsigned char x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) {
    return {x, y, z, w};
}

// What the handles in Params point to here: RGBA8 pixels, row 0 first; a texture is its
// mipmap levels, level 0 first (GL's own, read back, so both sample the same texels).
struct HostImage { uint8_t* texels; int width, height; };
struct HostTexture { int levels; HostImage level[16]; };

inline float4 bilinear(const HostImage& image, float u, float v) {
    float x = u * image.width - 0.5f, y = v * image.height - 0.5f;
    float fx = std::floor(x), fy = std::floor(y);
    float ax = x - fx, ay = y - fy;
    float out[4];
    for (int c = 0; c < 4; c++) {
        auto at = [&](int i, int j) {
            i = std::min(std::max(i, 0), image.width - 1);
            j = std::min(std::max(j, 0), image.height - 1);
            return image.texels[(static_cast<size_t>(j) * image.width + i) * 4 + c] / 255.0f;
        };
        int ix = static_cast<int>(fx), iy = static_cast<int>(fy);
        float top = at(ix, iy) + (at(ix + 1, iy) - at(ix, iy)) * ax;
        float bottom = at(ix, iy + 1) + (at(ix + 1, iy + 1) - at(ix, iy + 1)) * ax;
        out[c] = top + (bottom - top) * ay;
    }
    return {out[0], out[1], out[2], out[3]};
}

template <typename T> T tex2DLod(unsigned long long texture, float u, float v, float level);
template <> float4 tex2DLod<float4>(unsigned long long texture, float u, float v, float level) {
    const HostTexture& t = *reinterpret_cast<const HostTexture*>(texture);
    return bilinear(t.level[std::min(static_cast<int>(level), t.levels - 1)], u, v);
}

// GL's level choice for LINEAR_MIPMAP_NEAREST (the GL 4.6 spec, 8.14): the scale factor
// from the larger gradient in texels, level 0 up to λ = ½, then the nearest level.
template <typename T> T tex2DGrad(unsigned long long texture, float u, float v, float2 ddx, float2 ddy);
template <> float4 tex2DGrad<float4>(unsigned long long texture, float u, float v, float2 ddx, float2 ddy) {
    const HostTexture& t = *reinterpret_cast<const HostTexture*>(texture);
    float w = t.level[0].width, h = t.level[0].height;
    float rho = std::max(std::hypot(ddx.x * w, ddx.y * h), std::hypot(ddy.x * w, ddy.y * h));
    float lambda = std::log2(rho);
    int level = lambda <= 0.5f ? 0 : static_cast<int>(std::ceil(lambda + 0.5f)) - 1;
    return tex2DLod<float4>(texture, u, v, static_cast<float>(std::min(level, t.levels - 1)));
}

inline void surf2Dwrite(uchar4 value, unsigned long long surface, int x_bytes, int y) {
    const HostImage& image = *reinterpret_cast<const HostImage*>(surface);
    std::memcpy(image.texels + (static_cast<size_t>(y) * image.width) * 4 + x_bytes, &value, 4);
}

inline unsigned long long atomicMax(unsigned long long* address, unsigned long long value) {
    unsigned long long old = *address;
    *address = std::max(old, value);
    return old;
}

// The launch's indices, set by the drivers' loops (sprite_cpu.cpp, and mouth_resolve's in
// photo_mouth_cpu.cpp); the triangle driver calls its two phases with the block itself.
struct Index { int x, y, z; };
static Index blockIdx, threadIdx, blockDim;
inline void __syncthreads() {}

