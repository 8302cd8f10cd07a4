#version 330 core
// One layer of a photo avatar's composite, drawn with sprite.vert: the still picture
// over the whole canvas, then the current mouth frame over its rectangle (one pixel in,
// where its bilinear samples hold no pixel from outside it). The mouth frame is a
// complete picture of its rectangle, still at the edges, so it lies in without a seam.
//
// The picture's quad stays put while breathing moves the picture inside it, so an
// opaque photo never uncovers the background at its edge: each fragment samples the
// canvas point that breathing brought there (clamped at the picture's edge). The mouth
// quad moves with breathing instead (sprite.vert) and passes u_breath = (0, 1).
// Composed over u_clear here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_image;
uniform vec4 u_image_rect;     // the canvas rectangle the texture shows, canvas units
uniform vec2 u_breath;         // vertical offset and scale, as sprite.vert applies them
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec2 uv = vec2(v_uv.x, 1.0 - (1.0 - v_uv.y - u_breath.x) / u_breath.y);
    vec4 c = texture(u_image, (uv - u_image_rect.xy) / (u_image_rect.zw - u_image_rect.xy)) * u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
