#version 330 core
// The finished frame, moved by the face warp: one sample of its copy, already faded and
// composed over the clear colour (premultiplied), so nothing is blended here.
in vec2 v_src;

uniform sampler2D u_frame;

out vec4 frag_color;

void main() {
    frag_color = texture(u_frame, v_src);
}
