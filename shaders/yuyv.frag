#version 330 core
// A premultiplied RGBA frame over an opaque colour, packed as YUYV 4:2:2: the output
// texel (i, j) holds source pixels (2i, j) and (2i + 1, j) as (Y0, U, Y1, V), BT.601
// limited range (render/gl/yuv_pack.py states the matrix and why).
uniform sampler2D u_frame;      // width×height, premultiplied, rows as GL's (bottom first)
uniform vec3 u_background;      // opaque, 0..1
out vec4 frag;

// Rows: Y, Cb, Cr in 8-bit levels from R'G'B' in 0..1, before their offsets.
const vec3 Y_ROW = vec3(65.481, 128.553, 24.966);
const vec3 CB_ROW = vec3(-37.797, -74.203, 112.0);
const vec3 CR_ROW = vec3(112.0, -93.786, -18.214);

vec3 opaque(ivec2 at) {
    // texelFetch: exact texels, no filtering between the pair or across rows.
    vec4 p = texelFetch(u_frame, at, 0);
    return p.rgb + (1.0 - p.a) * u_background;
}

void main() {
    ivec2 pair = ivec2(gl_FragCoord.xy);
    vec3 left = opaque(ivec2(2 * pair.x, pair.y));
    vec3 right = opaque(ivec2(2 * pair.x + 1, pair.y));
    // One chroma for both: that of their mean colour (a box filter, as libyuv's ARGB to
    // YUY2 does); the matrix is linear, so it is the mean of their chromas too.
    vec3 mean = 0.5 * (left + right);
    frag = vec4(16.0 + dot(Y_ROW, left), 128.0 + dot(CB_ROW, mean),
                16.0 + dot(Y_ROW, right), 128.0 + dot(CR_ROW, mean)) / 255.0;
}
