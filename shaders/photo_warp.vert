#version 330 core
// A photo rig's warp mesh. Positions are canvas pixels; u_scale and u_offset take them
// to clip space: into the mouth frame's rectangle (its top row first, like every image
// texture here), or onto the letterboxed, breathing canvas.
layout(location = 0) in vec2 a_pos;
// Where the picture is sampled. Skin: the vertex's rest position. Mouth cavity: the
// teeth seen at rest, moving with the upper (a_src_up) or lower (a_src_lo) lip.
layout(location = 1) in vec2 a_src_up;
layout(location = 2) in vec2 a_src_lo;
// Cavity only: pixels below the upper lip and above the lower lip.
layout(location = 3) in vec2 a_depth;
// Cavity only: how much of the teeth the lips leave visible (rounded lips hide them).
layout(location = 4) in float a_teeth;
// feather, cavity flag, half the lips' rest gap (px), |x| across the mouth (0 centre, 1 corner)
layout(location = 5) in vec4 a_static;

uniform vec2 u_canvas;
uniform vec2 u_scale;
uniform vec2 u_offset;

out vec2 v_here;
out vec2 v_src_up;
out vec2 v_src_lo;
out vec2 v_depth;
out float v_teeth;
out vec4 v_static;

void main() {
    v_here = a_pos / u_canvas;
    v_src_up = a_src_up / u_canvas;
    v_src_lo = a_src_lo / u_canvas;
    v_depth = a_depth;
    v_teeth = a_teeth;
    v_static = a_static;
    gl_Position = vec4(a_pos * u_scale + u_offset, 0.0, 1.0);
}
