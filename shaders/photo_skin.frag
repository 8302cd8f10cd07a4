#version 330 core
// The picture drawn onto the frame, with the eye mesh (photo_skin.vert) or over a
// rectangle (photo_picture.vert: into PhotoRenderer's phase stills once per view, or
// the whole picture when the avatar is faded). One sample per fragment (premultiplied
// alpha), composed over u_clear here rather than by GL blending, so a faded avatar
// never shows the still picture through its warp.
in vec2 v_src;

uniform sampler2D u_picture;
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec4 c = texture(u_picture, v_src) * u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
