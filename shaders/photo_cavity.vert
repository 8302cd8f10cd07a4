#version 330 core
// The mouth opening: quads between facing upper and lower inner-lip points, in canvas
// pixels, mapped into the mouth frame like photo_skin.vert.
layout(location = 0) in vec2 a_pos;
// The picture positions of the teeth seen at rest, moving with the upper (a_src_up)
// and lower (a_src_lo) lip.
layout(location = 1) in vec2 a_src_up;
layout(location = 2) in vec2 a_src_lo;
// Pixels below the upper lip and above the lower lip.
layout(location = 3) in vec2 a_depth;
// How much of the teeth the lips leave visible (rounded lips hide them).
layout(location = 4) in float a_teeth;
// Half the lips' rest gap (px); |x| across the mouth (0 centre, 1 corner).
layout(location = 5) in vec2 a_static;

uniform vec2 u_canvas;
uniform vec2 u_scale;
uniform vec2 u_offset;

out vec2 v_src_up;
out vec2 v_src_lo;
out vec2 v_depth;
out float v_teeth;
out vec2 v_static;

void main() {
    v_src_up = a_src_up / u_canvas;
    v_src_lo = a_src_lo / u_canvas;
    v_depth = a_depth;
    v_teeth = a_teeth;
    v_static = a_static;
    gl_Position = vec4(a_pos * u_scale + u_offset, 0.0, 1.0);
}
