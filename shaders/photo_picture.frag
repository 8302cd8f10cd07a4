#version 330 core
// A photo avatar's picture over a rectangle (photo_picture.vert): into PhotoRenderer's
// phase stills once per view, or onto the frame itself when it is faded. Composed over
// u_clear here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_picture;
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec4 c = texture(u_picture, v_uv) * u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
