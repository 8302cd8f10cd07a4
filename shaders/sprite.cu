// The sprite rig's frame on the GPU through CUDA: shaders/sprite.vert + sprite.frag and
// GL's blending, computed per output pixel (render/gpu/cuda_sprite_renderer.py).
//
// For each pixel centre the vertex shader's placement is inverted (letterbox fit, then
// the avatar's placement — bounce, squash, tilt, shake, sway: a 2x3 affine map given
// inverted — then breathing), giving canvas coordinates p (0..1, y down) which are also
// the texture coordinates; a pixel below the canvas's bottom edge gets the clear colour
// alone (sprite.vert clips there). Each layer covers its rect (x0, y0, x1, y1); inside it, its
// four premultiplied RGBA8 images are sampled bilinearly with clamped edges (GL_LINEAR,
// CLAMP_TO_EDGE) and mixed as sprite.frag mixes them (mix(mix(a, b, inner),
// mix(c, d, inner), outer), the second pair only where outer > 0), scaled by the
// layer's alpha, and blended ONE, ONE_MINUS_SRC_ALPHA over what is below. As in an
// RGBA8 framebuffer, the result is rounded to 8 bits after the clear and after each
// layer. The layers are SpriteGLRenderer's, in its order (SpriteLayout.layers).
//
// Rows are written bottom first, as GL's framebuffer holds them, so the texture is
// blitted into a GL framebuffer as is.

// Base, eyes, the overlays of the two expressions a fade shows (render/rigs/sprite.py
// MAX_OVERLAYS each), mouth.
#define MAX_LAYERS 11

struct Layer {
    const uchar4* images[4];
    float rect[4];  // x0, y0, x1, y1 (canvas units)
    float inner, outer, alpha, unused;
};

struct Params {
    unsigned long long out;  // cudaSurfaceObject_t of the frame's RGBA8 texture
    int width, height, canvas_w, canvas_h;
    int layer_count, unused;
    float fit_x, fit_y, offset_y, scale_y;
    float unplace[6];  // the placement's inverse: rows of a 2x3 affine map
    float clear[4];  // premultiplied
    Layer layers[MAX_LAYERS];
};

__device__ float4 texel(const uchar4* image, int w, int h, int x, int y) {
    x = min(max(x, 0), w - 1);
    y = min(max(y, 0), h - 1);
    uchar4 v = image[y * w + x];
    return make_float4(v.x, v.y, v.z, v.w);
}

__device__ float4 bilinear(const uchar4* image, int w, int h, float u, float v) {
    float x = u * w - 0.5f, y = v * h - 0.5f;
    float fx = floorf(x), fy = floorf(y);
    float ax = x - fx, ay = y - fy;
    int ix = (int)fx, iy = (int)fy;
    float4 a = texel(image, w, h, ix, iy), b = texel(image, w, h, ix + 1, iy);
    float4 c = texel(image, w, h, ix, iy + 1), d = texel(image, w, h, ix + 1, iy + 1);
    float4 top = make_float4(a.x + (b.x - a.x) * ax, a.y + (b.y - a.y) * ax,
                             a.z + (b.z - a.z) * ax, a.w + (b.w - a.w) * ax);
    float4 bottom = make_float4(c.x + (d.x - c.x) * ax, c.y + (d.y - c.y) * ax,
                                c.z + (d.z - c.z) * ax, c.w + (d.w - c.w) * ax);
    return make_float4((top.x + (bottom.x - top.x) * ay) / 255.0f,
                       (top.y + (bottom.y - top.y) * ay) / 255.0f,
                       (top.z + (bottom.z - top.z) * ay) / 255.0f,
                       (top.w + (bottom.w - top.w) * ay) / 255.0f);
}

__device__ float unorm8(float v) {
    return rintf(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f) / 255.0f;
}

__device__ float4 mix4(float4 a, float4 b, float t) {
    return make_float4(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t, a.z + (b.z - a.z) * t,
                       a.w + (b.w - a.w) * t);
}

__device__ void blend(float4& dst, const Params& p, const Layer& layer, float u, float v) {
    const float* r = layer.rect;
    if (u < r[0] || u >= r[2] || v < r[1] || v >= r[3]) return;
    float4 c = mix4(bilinear(layer.images[0], p.canvas_w, p.canvas_h, u, v),
                    bilinear(layer.images[1], p.canvas_w, p.canvas_h, u, v), layer.inner);
    if (layer.outer > 0.0f) {
        float4 other = mix4(bilinear(layer.images[2], p.canvas_w, p.canvas_h, u, v),
                            bilinear(layer.images[3], p.canvas_w, p.canvas_h, u, v), layer.inner);
        c = mix4(c, other, layer.outer);
    }
    float4 s = make_float4(c.x * layer.alpha, c.y * layer.alpha, c.z * layer.alpha, c.w * layer.alpha);
    float keep = 1.0f - s.w;
    dst = make_float4(unorm8(s.x + dst.x * keep), unorm8(s.y + dst.y * keep),
                      unorm8(s.z + dst.z * keep), unorm8(s.w + dst.w * keep));
}

extern "C" __global__ void sprite_frame(const Params p) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;  // 0: the top row
    if (col >= p.width || row >= p.height) return;
    float ndc_x = 2.0f * (col + 0.5f) / p.width - 1.0f;
    float ndc_y = 1.0f - 2.0f * (row + 0.5f) / p.height;
    float px = (ndc_x / p.fit_x + 1.0f) * 0.5f;
    float py = (1.0f - ndc_y / p.fit_y) * 0.5f;
    const float* m = p.unplace;
    float u = m[0] * px + m[1] * py + m[2];
    float y = m[3] * px + m[4] * py + m[5];
    float v = 1.0f - (1.0f - y - p.offset_y) / p.scale_y;
    float4 dst = make_float4(unorm8(p.clear[0]), unorm8(p.clear[1]), unorm8(p.clear[2]),
                             unorm8(p.clear[3]));
    // Nothing below the canvas's bottom edge (sprite.vert's clip distance).
    int layers = py < 1.0f ? p.layer_count : 0;
    for (int i = 0; i < layers && i < MAX_LAYERS; i++) blend(dst, p, p.layers[i], u, v);
    uchar4 out = make_uchar4((unsigned char)rintf(dst.x * 255.0f), (unsigned char)rintf(dst.y * 255.0f),
                             (unsigned char)rintf(dst.z * 255.0f), (unsigned char)rintf(dst.w * 255.0f));
    surf2Dwrite(out, p.out, col * 4, p.height - 1 - row);
}
