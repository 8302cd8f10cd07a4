#version 330 core
// The face warp (render/rigs/photo_face.py): a grid in canvas pixels, drawn through the
// same letterbox and breathing as the eye meshes. Each vertex shows what the finished
// frame held where it lay at rest, read from the copy of that part of the frame.
layout(location = 0) in vec2 a_pos;
// Where the vertex lies at rest: the frame is sampled there.
layout(location = 1) in vec2 a_src;

uniform vec2 u_scale;          // canvas px → clip space
uniform vec2 u_offset;
uniform vec2 u_viewport;       // px
uniform vec4 u_copy;           // the copy's window origin (px) and its texture's size (px)

out vec2 v_src;

void main() {
    vec2 src = a_src * u_scale + u_offset;
    v_src = ((src * 0.5 + 0.5) * u_viewport - u_copy.xy) / u_copy.zw;
    gl_Position = vec4(a_pos * u_scale + u_offset, 0.0, 1.0);
}
