#version 330 core
// A photo avatar's still picture over the whole canvas (drawn with sprite.vert); the
// mouth frame and the eyes go on top of it.
//
// The quad stays put while breathing moves the picture inside it, so an opaque photo
// never uncovers the background at its edge: each fragment samples the canvas point
// that breathing brought there (clamped at the picture's edge). Composed over u_clear
// here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_picture;
uniform vec2 u_breath;         // vertical offset and scale, as sprite.vert applies them
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec2 uv = vec2(v_uv.x, 1.0 - (1.0 - v_uv.y - u_breath.x) / u_breath.y);
    vec4 c = texture(u_picture, uv) * u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
