#version 330 core
// A photo rig's skin mesh (mouth/jaw or eyes). Positions are canvas pixels; u_scale
// and u_offset take them to clip space: into the mouth frame's rectangle (its top row
// first, like every image texture here), or onto the letterboxed, breathing canvas.
layout(location = 0) in vec2 a_pos;
// Where the vertex lay at rest: the picture is sampled there.
layout(location = 1) in vec2 a_src;

uniform vec2 u_canvas;
uniform vec2 u_scale;
uniform vec2 u_offset;

out vec2 v_src;

void main() {
    v_src = a_src / u_canvas;
    gl_Position = vec4(a_pos * u_scale + u_offset, 0.0, 1.0);
}
