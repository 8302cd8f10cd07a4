#version 330 core
// The still picture with the current mouth frame in its rectangle (drawn with
// sprite.vert over the whole canvas, which stays put). Breathing moves the picture
// inside that frame, so an opaque photo never uncovers the background at its edge:
// each fragment samples the canvas point that breathing brought there, clamped at the
// picture's edge. The frame is a complete picture of its
// rectangle, still at the edges, so swapping it in leaves no seam; it is used only
// where its own texels cover a bilinear sample (u_mouth_inner, one pixel in).
// Composed over u_clear here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_picture;
uniform sampler2D u_mouth;
uniform vec4 u_mouth_rect;     // canvas units: x0, y0, x1, y1
uniform vec4 u_mouth_inner;
uniform vec2 u_breath;         // vertical offset and scale, as sprite.vert applies them
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec2 uv = vec2(v_uv.x, 1.0 - (1.0 - v_uv.y - u_breath.x) / u_breath.y);
    vec4 c;
    if (all(greaterThanEqual(uv, u_mouth_inner.xy)) && all(lessThanEqual(uv, u_mouth_inner.zw))) {
        c = texture(u_mouth, (uv - u_mouth_rect.xy) / (u_mouth_rect.zw - u_mouth_rect.xy));
    } else {
        c = texture(u_picture, uv);
    }
    c *= u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
