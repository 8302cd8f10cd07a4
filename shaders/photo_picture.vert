#version 330 core
// A rectangle (u_quad: clip-space x0, y0, x1, y1) showing a rectangle of a texture
// (u_tex: s0, t0, s1, t1 at the same corners). Breathing and letterboxing are affine
// along each axis, so they are all in these corners and the fragment shader
// (photo_skin.frag, as for the eye mesh) only samples.
layout(location = 0) in vec2 a_pos;

uniform vec4 u_quad;
uniform vec4 u_tex;

out vec2 v_src;

void main() {
    v_src = mix(u_tex.xy, u_tex.zw, a_pos);
    gl_Position = vec4(mix(u_quad.xy, u_quad.zw, a_pos), 0.0, 1.0);
}
