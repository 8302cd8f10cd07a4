#version 330 core
// One layer of a canvas-sized image, drawn only over u_rect (x0, y0, x1, y1): the
// part of the canvas where the layer has any coverage, so mostly transparent layers
// (eyes, mouth) cost a few fragments instead of the whole canvas. Canvas units are
// 0..1 with y down (the rig's images are top row first). The layer's textures hold
// only the part of the canvas under u_stored (its coverage: u_rect itself, unless the
// base reaches below the canvas, where the clamped bottom row repeats).
layout(location = 0) in vec2 a_pos;

uniform vec4 u_rect;
uniform vec4 u_stored;

// Breathing: the figure stretches upward from its bottom edge and rises a little.
uniform float u_offset_y;
uniform float u_scale_y;
// The whole avatar's placement (bounce, squash, tilt, shake, sway: the rows of a 2x3
// affine map of canvas points, render/gl/sprite_renderer.py placement_matrix). Applied
// after breathing; the identity leaves every vertex exactly where it was.
uniform vec3 u_place_x;
uniform vec3 u_place_y;
// Letterboxing: fraction of the viewport the canvas covers on each axis, so the
// canvas keeps its aspect ratio in any widget size.
uniform vec2 u_fit;

out vec2 v_uv;

void main() {
    vec2 p = mix(u_rect.xy, u_rect.zw, a_pos);
    v_uv = (p - u_stored.xy) / (u_stored.zw - u_stored.xy);
    vec3 breathed = vec3(p.x, 1.0 - (1.0 - p.y) * u_scale_y - u_offset_y, 1.0);
    float x = dot(u_place_x, breathed);
    float y = dot(u_place_y, breathed);
    // The canvas's bottom edge is the floor: nothing is drawn below it (GL_CLIP_DISTANCE0),
    // so a figure standing on it, whose base reaches below the canvas when it moves,
    // ends there as it always did.
    gl_ClipDistance[0] = 1.0 - y;
    gl_Position = vec4((x * 2.0 - 1.0) * u_fit.x, (1.0 - 2.0 * y) * u_fit.y, 0.0, 1.0);
}
