#version 330 core
// The mouth frame over its rectangle (drawn with sprite.vert, moving with breathing),
// faded in from the still picture over u_feather canvas pixels at the rectangle's
// edges. There the frame holds the still picture too, but resampled once more when it
// is shown smaller than it is: without the fade its outline would show. Composed over
// u_clear here, without GL blending.
in vec2 v_uv;

uniform sampler2D u_picture;
uniform sampler2D u_mouth;
uniform vec4 u_mouth_rect;     // canvas units: x0, y0, x1, y1
uniform vec2 u_canvas;         // px
uniform float u_feather;       // px
uniform float u_opacity;
uniform vec4 u_clear;          // premultiplied

out vec4 frag_color;

void main() {
    vec2 in_rect = (v_uv - u_mouth_rect.xy) / (u_mouth_rect.zw - u_mouth_rect.xy);
    vec2 edge = min(v_uv - u_mouth_rect.xy, u_mouth_rect.zw - v_uv) * u_canvas;
    float w = smoothstep(0.0, u_feather, min(edge.x, edge.y));
    vec4 c = mix(texture(u_picture, v_uv), texture(u_mouth, in_rect), w) * u_opacity;
    frag_color = c + u_clear * (1.0 - c.a);
}
