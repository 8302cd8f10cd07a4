#version 330 core
// The still picture with the current mouth frame in its rectangle (drawn with
// sprite.vert over the whole canvas). The frame is a complete picture of its
// rectangle, still at the edges, so swapping it in leaves no seam; it is used only
// where its own texels cover a bilinear sample (u_mouth_inner, one pixel in).
// Composed over u_clear here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_picture;
uniform sampler2D u_mouth;
uniform vec4 u_mouth_rect;     // canvas units: x0, y0, x1, y1
uniform vec4 u_mouth_inner;
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec4 c;
    if (all(greaterThanEqual(v_uv, u_mouth_inner.xy)) && all(lessThanEqual(v_uv, u_mouth_inner.zw))) {
        c = texture(u_mouth, (v_uv - u_mouth_rect.xy) / (u_mouth_rect.zw - u_mouth_rect.xy));
    } else {
        c = texture(u_picture, v_uv);
    }
    c *= u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
