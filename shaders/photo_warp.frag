#version 330 core
// Skin warped into the mouth frame: one picture sample per fragment and nothing else.
// The frame is always opaque and unfaded (the composite fades it), and llvmpipe pays
// per instruction for every texel of a frame up to 1024² each tick.
in vec2 v_src;

uniform sampler2D u_picture;

out vec4 frag_color;

void main() {
    frag_color = texture(u_picture, v_src);
}
