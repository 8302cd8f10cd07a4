// The photo rig's mouth frame on the GPU through CUDA (render/gpu/cuda_photo_renderer.py):
// photo_skin.vert + photo_warp.frag (the mouth/jaw skin) and photo_cavity.vert +
// photo_cavity.frag (the mouth opening), rasterised the way GL rasterises them.
//
// One block per triangle. The block computes its three vertex records from the rig's
// rest records and pose basis (PhotoRig.vertices_at), places them in the frame's
// pixels as the vertex shader and viewport do, and snaps them to GL's sub-pixel grid.
// Its threads then walk the triangle's bounding box and shade each pixel centre it
// covers: edge functions on the snapped integers, a centre on an edge going to one of
// the two triangles that share it, attributes interpolated there. Pictures are
// sampled through the texture unit, with the derivatives GL's 2×2 quads would see,
// so filtering and mipmap choice are the sampler's own. Colours are 8-bit rounded as
// in an RGBA8 framebuffer; row 0 is the rectangle's top row, as in the GL frame. GL
// draws the cavity over the skin: the skin launch's triangles come first in drawing
// order (`first`), and the launches run on one stream.
//
// Triangles overlap where the opening mouth folds the mesh, and GL draws them one after
// another, the later over the earlier; here their blocks shade at once. So a covered
// pixel is not written at once: its colour goes into `owner` with the triangle's place
// in GL's drawing order above it, an atomic max keeps the latest triangle's, and
// mouth_resolve writes each pixel's winner to the frame's surface after the last launch
// (on the H200, writing at once left pixels up to 113/255 from GL's where blocks raced:
// bench/results/gpu_h200_before_resolve.json).

#define RECORD 9   // x, y, u_up, v_up, u_lo, v_lo, depth_up, depth_lo, teeth (render/rigs/photo.py)
#define STATIC 2   // half the lips' rest gap (px), |x| across the mouth
#define TERMS 5    // basis rows a pose uses: lip a, lip b, jaw a, jaw b, blink

struct Params {
    unsigned long long frame;        // cudaSurfaceObject_t of the mouth frame (RGBA8)
    unsigned long long picture;      // cudaTextureObject_t of the picture and its mipmaps
    const float* rest;               // V×RECORD
    const float* basis;              // rows×V×RECORD
    const float* statics;            // V×STATIC
    const unsigned int* triangles;   // T×3
    unsigned long long* owner;       // width×height: (place + 1) << 32 | RGBA8 of the latest triangle, 0 none
    int vertices, width, height, cavity;  // cavity: 0 skin (photo_warp.frag), 1 photo_cavity.frag
    int first;                       // the place of the launch's first triangle in GL's drawing order
    int rows[TERMS];
    int mipmaps;                     // 0: level 0 only (GL_LINEAR), 1: the nearest level
    float weights[TERMS];
    float scale_x, scale_y, offset_x, offset_y;  // canvas px → clip space (u_scale, u_offset)
    float canvas_w, canvas_h;        // u_canvas
    float mouth_width, teeth, down_x, down_y;     // u_mouth_width, u_teeth, u_down
    float snap;                      // sub-pixel steps per pixel (GL_SUBPIXEL_BITS)
    // u_edge, u_throat, u_tongue, u_teeth_colour (rgb each), u_shading: the portrait's
    // mouth colours (render/rigs/mouth_colours.py, MouthColours.as_array's order).
    float colours[13];
};
// render/gpu/cuda_photo_renderer.py's PARAMS lays out these bytes.
static_assert(sizeof(Params) == 216, "Params changed: change PARAMS too");

__device__ float smooth(float e0, float e1, float x) {  // GLSL smoothstep
    float t = fminf(fmaxf((x - e0) / (e1 - e0), 0.0f), 1.0f);
    return t * t * (3.0f - 2.0f * t);
}

__device__ float mixf(float a, float b, float t) { return a * (1.0f - t) + b * t; }

// photo_cavity.frag's shaded_step: smooth narrowed about its middle as shading goes to 0.
__device__ float shaded_step(float shading, float e0, float e1, float x) {
    float mid = 0.5f * (e0 + e1), half_flat = (e1 - e0) / 30.0f;
    return smooth(mixf(mid - half_flat, e0, shading), mixf(mid + half_flat, e1, shading), x);
}

__device__ float4 mix4(float4 a, float4 b, float t) {
    return make_float4(mixf(a.x, b.x, t), mixf(a.y, b.y, t), mixf(a.z, b.z, t), mixf(a.w, b.w, t));
}

// An attribute over the triangle: its value at a pixel centre plus its change per pixel.
struct Plane {
    float value, dx, dy;
    __device__ float at(float ox, float oy) const { return value + dx * ox + dy * oy; }
};

__device__ float4 sample(const Params& p, float u, float v, float2 ddx, float2 ddy) {
    if (!p.mipmaps) return tex2DLod<float4>(p.picture, u, v, 0.0f);
    return tex2DGrad<float4>(p.picture, u, v, ddx, ddy);
}

__device__ float4 skin(const Params& p, const Plane* a) {
    // a: u_up, v_up in canvas px (photo_skin.vert divides by u_canvas).
    float iw = 1.0f / p.canvas_w, ih = 1.0f / p.canvas_h;
    return sample(p, a[0].value * iw, a[1].value * ih, make_float2(a[0].dx * iw, a[1].dx * ih),
                  make_float2(a[0].dy * iw, a[1].dy * ih));
}

// photo_cavity.frag's upper-teeth texture position at offset (ox, oy) from the pixel,
// for the quad's finite differences.
__device__ float2 teeth_at(const Params& p, const Plane* a, float ox, float oy) {
    float d_up = fmaxf(a[6].at(ox, oy), 0.0f);
    float rest_half_gap = a[9].at(ox, oy);
    float half_gap = rest_half_gap * a[8].at(ox, oy);
    float across = a[10].at(ox, oy);
    float extent = fmaxf(half_gap, p.teeth * a[8].at(ox, oy) * (1.0f - smooth(0.55f, 0.85f, across)));
    float k = d_up * (1.0f - rest_half_gap / fmaxf(extent, 1e-3f));
    return make_float2(a[2].at(ox, oy) / p.canvas_w - p.down_x * k, a[3].at(ox, oy) / p.canvas_h - p.down_y * k);
}

// photo_cavity.frag. a: the record's attributes 2..8 (u_up, v_up, u_lo, v_lo, depths,
// teeth) at indices 2..8, the static record at 9..10. (qx, qy): the pixel's place in
// its 2×2 quad (0 or 1), for GL's fine derivatives.
__device__ float4 cavity(const Params& p, const Plane* a, int qx, int qy) {
    float d_up = fmaxf(a[6].value, 0.0f);
    float d_lo = fmaxf(a[7].value, 0.0f);
    float gap = d_up + d_lo;
    float rest_half_gap = a[9].value;
    float half_gap = rest_half_gap * a[8].value;
    float across = a[10].value;
    // fwidth(d_up) as a quad sees it: d_up at the quad's other column and row.
    float fx = fmaxf(a[6].at(qx ? -1.0f : 1.0f, 0.0f), 0.0f) - d_up;
    float fy = fmaxf(a[6].at(0.0f, qy ? -1.0f : 1.0f), 0.0f) - d_up;
    float aa = fmaxf(fabsf(fx) + fabsf(fy), 1e-3f);
    float inside = fminf(d_up, d_lo);
    float deep = smooth(0.0f, 0.12f * p.mouth_width, inside);
    const float* edge_c = p.colours;
    const float* throat = p.colours + 3;
    const float* tongue_c = p.colours + 6;
    const float* teeth_c = p.colours + 9;
    float shading = p.colours[12];
    float3 mouth = make_float3(mixf(edge_c[0], throat[0], deep), mixf(edge_c[1], throat[1], deep),
                               mixf(edge_c[2], throat[2], deep));
    float t = d_up / fmaxf(gap, 1e-3f);
    float tongue = shaded_step(shading, 0.55f, 0.85f, t)
                 * shaded_step(shading, 0.12f * p.mouth_width, 0.3f * p.mouth_width, gap)
                 * (1.0f - shaded_step(shading, 0.4f, 0.75f, across));
    float tip = mixf(1.0f, 0.8f, shading * smooth(0.85f, 1.0f, t));
    mouth = make_float3(mixf(mouth.x, tongue_c[0] * tip, tongue), mixf(mouth.y, tongue_c[1] * tip, tongue),
                        mixf(mouth.z, tongue_c[2] * tip, tongue));
    float4 c = make_float4(mouth.x, mouth.y, mouth.z, 1.0f);

    float iw = 1.0f / p.canvas_w, ih = 1.0f / p.canvas_h;
    float lower = 1.0f - smooth(half_gap - aa, half_gap + aa, d_lo);
    c = mix4(c, sample(p, a[4].value * iw, a[5].value * ih, make_float2(a[4].dx * iw, a[5].dx * ih),
                       make_float2(a[4].dy * iw, a[5].dy * ih)), lower);
    float extent = fmaxf(half_gap, p.teeth * a[8].value * (1.0f - smooth(0.55f, 0.85f, across)));
    float upper = 1.0f - smooth(extent - aa, extent + aa, d_up);
    float4 teeth;
    if (rest_half_gap > 0.5f) {
        float2 here = teeth_at(p, a, 0.0f, 0.0f);
        float2 side = teeth_at(p, a, qx ? -1.0f : 1.0f, 0.0f);
        float2 row = teeth_at(p, a, 0.0f, qy ? -1.0f : 1.0f);
        float sx = qx ? -1.0f : 1.0f, sy = qy ? -1.0f : 1.0f;
        teeth = sample(p, here.x, here.y, make_float2((side.x - here.x) * sx, (side.y - here.y) * sx),
                       make_float2((row.x - here.x) * sy, (row.y - here.y) * sy));
    } else {
        float f = across * 3.5f;
        float edge = fabsf(f - floorf(f) - 0.5f) * 2.0f;
        float shade = mixf(1.0f, 0.78f, smooth(0.0f, extent, d_up)) * mixf(1.0f, 0.6f, smooth(0.3f, 0.8f, across))
                    * mixf(0.8f, 1.0f, smooth(0.0f, 0.25f, 1.0f - edge));
        shade = mixf(1.0f, shade, shading);
        teeth = make_float4(teeth_c[0] * shade, teeth_c[1] * shade, teeth_c[2] * shade, 1.0f);
    }
    return mix4(c, teeth, upper);
}

__device__ unsigned char unorm8(float v) {
    return (unsigned char)rintf(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f);
}

// Thread t's share of loading triangle `triangle`'s records (every thread of the block
// takes part; the records are complete once all have).
__device__ void load_records(const Params& p, float record[3][RECORD + STATIC], int triangle, int t) {
    const unsigned int* corners = p.triangles + 3 * triangle;
    if (t < 3 * RECORD) {
        int corner = t / RECORD, k = t % RECORD;
        size_t at = (size_t)corners[corner] * RECORD + k;
        float value = p.rest[at];
        for (int j = 0; j < TERMS; j++)
            value += p.weights[j] * p.basis[(size_t)p.rows[j] * p.vertices * RECORD + at];
        record[corner][k] = value;
    } else if (t < 3 * (RECORD + STATIC)) {
        int corner = (t - 3 * RECORD) / STATIC, k = (t - 3 * RECORD) % STATIC;
        record[corner][RECORD + k] = p.statics[(size_t)corners[corner] * STATIC + k];
    }
}

// Pixel (px, py) covered by `triangle` of the launch with colour c: kept if no later
// triangle in GL's drawing order covers it.
__device__ void keep(const Params& p, int triangle, int px, int py, float4 c) {
    unsigned long long colour = unorm8(c.x) | unorm8(c.y) << 8 | unorm8(c.z) << 16 | (unsigned int)unorm8(c.w) << 24;
    unsigned long long place = (unsigned long long)(p.first + triangle + 1) << 32;
    atomicMax(p.owner + (size_t)py * p.width + px, place | colour);
}

// Thread t of `threads`'s share of triangle `triangle`'s pixels.
__device__ void shade_triangle(const Params& p, const float record[3][RECORD + STATIC], int triangle,
                               int t, int threads) {
    // Window positions as the vertex shader and the viewport make them, then snapped.
    float wx[3], wy[3];
    long long X[3], Y[3];
    for (int i = 0; i < 3; i++) {
        wx[i] = fmaf(fmaf(record[i][0], p.scale_x, p.offset_x), 0.5f * p.width, 0.5f * p.width);
        wy[i] = fmaf(fmaf(record[i][1], p.scale_y, p.offset_y), 0.5f * p.height, 0.5f * p.height);
        X[i] = (long long)rintf(wx[i] * p.snap);
        Y[i] = (long long)rintf(wy[i] * p.snap);
    }
    long long area = (X[1] - X[0]) * (Y[2] - Y[0]) - (Y[1] - Y[0]) * (X[2] - X[0]);
    if (area == 0) return;
    long long sign = area > 0 ? 1 : -1;
    area *= sign;
    // Edge i faces vertex i: e_i(P) = A_i Px + B_i Py + C_i, positive inside.
    long long A[3], B[3], C[3];
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3, k = (i + 2) % 3;
        A[i] = -sign * (Y[k] - Y[j]);
        B[i] = sign * (X[k] - X[j]);
        C[i] = -(A[i] * X[j] + B[i] * Y[j]);
    }
    // Attributes as planes: barycentric weights change by A_i·snap/area per pixel. The
    // skin reads u_up, v_up only (records 2, 3), the cavity all the rest.
    int count = p.cavity ? RECORD + STATIC : 4;
    float inv = 1.0f / (float)area;
    float lx[3], ly[3];
    for (int i = 0; i < 3; i++) {
        lx[i] = (float)A[i] * p.snap * inv;
        ly[i] = (float)B[i] * p.snap * inv;
    }
    int x0 = max(0, (int)floorf(fminf(wx[0], fminf(wx[1], wx[2])) - 0.5f));
    int x1 = min(p.width - 1, (int)ceilf(fmaxf(wx[0], fmaxf(wx[1], wx[2])) - 0.5f));
    int y0 = max(0, (int)floorf(fminf(wy[0], fminf(wy[1], wy[2])) - 0.5f));
    int y1 = min(p.height - 1, (int)ceilf(fmaxf(wy[0], fmaxf(wy[1], wy[2])) - 0.5f));
    if (x1 < x0 || y1 < y0) return;
    int columns = x1 - x0 + 1, pixels = columns * (y1 - y0 + 1);
    long long half = (long long)(p.snap * 0.5f), step = (long long)p.snap;
    for (int n = t; n < pixels; n += threads) {
        int px = x0 + n % columns, py = y0 + n / columns;
        long long cx = px * step + half, cy = py * step + half;
        long long e[3];
        bool covered = true;
        for (int i = 0; i < 3; i++) {
            e[i] = A[i] * cx + B[i] * cy + C[i];
            // A centre on a shared edge goes to the triangle whose inside lies to its
            // +x (or, on a horizontal edge, +y): the two sides' gradients are opposite.
            covered = covered && (e[i] > 0 || (e[i] == 0 && (A[i] > 0 || (A[i] == 0 && B[i] > 0))));
        }
        if (!covered) continue;
        float l[3] = {(float)e[0] * inv, (float)e[1] * inv, (float)e[2] * inv};
        Plane a[RECORD + STATIC];
        for (int k = 2; k < count; k++) {  // x, y are not needed past here
            a[k].value = l[0] * record[0][k] + l[1] * record[1][k] + l[2] * record[2][k];
            a[k].dx = lx[0] * record[0][k] + lx[1] * record[1][k] + lx[2] * record[2][k];
            a[k].dy = ly[0] * record[0][k] + ly[1] * record[1][k] + ly[2] * record[2][k];
        }
        float4 c = p.cavity ? cavity(p, a, px & 1, py & 1) : skin(p, a + 2);
        keep(p, triangle, px, py, c);
    }
}

extern "C" __global__ void mouth_triangles(const Params p) {
    __shared__ float record[3][RECORD + STATIC];
    load_records(p, record, blockIdx.x, threadIdx.x);
    __syncthreads();
    shade_triangle(p, record, blockIdx.x, threadIdx.x, blockDim.x);
}

// Each pixel a triangle covered gets its latest triangle's colour, and `owner` is
// cleared for the next frame; the others keep the still picture.
extern "C" __global__ void mouth_resolve(const Params p) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= p.width * p.height) return;
    unsigned long long kept = p.owner[n];
    if (kept == 0) return;
    unsigned int c = (unsigned int)kept;
    surf2Dwrite(make_uchar4(c & 255u, (c >> 8) & 255u, (c >> 16) & 255u, c >> 24), p.frame,
                (n % p.width) * 4, n / p.width);
    p.owner[n] = 0;
}
