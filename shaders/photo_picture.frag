#version 330 core
// A photo avatar's picture: the still layer made from it once per view size, and that
// layer drawn each frame with breathing (photo_picture.vert). Composed over u_clear
// here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_picture;
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec4 c = texture(u_picture, v_uv) * u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
