#version 330 core
// Textures hold premultiplied alpha (converted once at upload): a cross-fade of
// premultiplied colours is the correct blend of two drawings, with no dark fringes
// where one is transparent; blending is ONE, ONE_MINUS_SRC_ALPHA.
in vec2 v_uv;

// Four drawings of a layer: a, b of the expression faded from, c, d of the one faded
// to (the eyes: open and shut of each). u_mix.x weighs b against a and d against c
// (the eyelids' closure), u_mix.y the second pair against the first (the expression
// fade); a layer with one drawing binds it four times at u_mix (0, 0).
uniform sampler2D u_tex_a;
uniform sampler2D u_tex_b;
uniform sampler2D u_tex_c;
uniform sampler2D u_tex_d;
uniform vec2 u_mix;
uniform float u_alpha;

out vec4 frag_color;

void main() {
    vec4 colour = mix(texture(u_tex_a, v_uv), texture(u_tex_b, v_uv), u_mix.x);
    // A uniform branch: no expression fade, no second pair sampled.
    if (u_mix.y > 0.0) {
        vec4 other = mix(texture(u_tex_c, v_uv), texture(u_tex_d, v_uv), u_mix.x);
        colour = mix(colour, other, u_mix.y);
    }
    frag_color = colour * u_alpha;
}
