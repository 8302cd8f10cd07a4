#version 330 core
// Textures hold premultiplied alpha (converted once at upload): a cross-fade of
// premultiplied colours is the correct blend of two drawings, with no dark fringes
// where one is transparent; blending is ONE, ONE_MINUS_SRC_ALPHA.
in vec2 v_uv;

uniform sampler2D u_tex_a;
uniform sampler2D u_tex_b;
// Weight of u_tex_b: mouth blend between two drawings, or eyelid closure.
uniform float u_mix;
uniform float u_alpha;

out vec4 frag_color;

void main() {
    vec4 a = texture(u_tex_a, v_uv);
    vec4 b = texture(u_tex_b, v_uv);
    frag_color = mix(a, b, u_mix) * u_alpha;
}
