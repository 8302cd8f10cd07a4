#version 330 core
// Textures hold premultiplied alpha (converted once at upload): a cross-fade of
// premultiplied colours is the correct blend of two drawings, with no dark fringes
// where one is transparent; blending is ONE, ONE_MINUS_SRC_ALPHA.
in vec2 v_uv;

// Two drawings of a layer, a and b, u_mix.x weighing b (the eyelids' closure; a layer
// of one drawing binds it twice at 0). Built with FADE, two more, c and d, of the
// expression faded to (the eyes: open and shut of each), weighed against the first
// pair by u_mix.y; a separate program, since llvmpipe samples both sides of a branch.
uniform sampler2D u_tex_a;
uniform sampler2D u_tex_b;
#ifdef FADE
uniform sampler2D u_tex_c;
uniform sampler2D u_tex_d;
#endif
uniform vec2 u_mix;
uniform float u_alpha;

out vec4 frag_color;

void main() {
    vec4 colour = mix(texture(u_tex_a, v_uv), texture(u_tex_b, v_uv), u_mix.x);
#ifdef FADE
    colour = mix(colour, mix(texture(u_tex_c, v_uv), texture(u_tex_d, v_uv), u_mix.x), u_mix.y);
#endif
    frag_color = colour * u_alpha;
}
