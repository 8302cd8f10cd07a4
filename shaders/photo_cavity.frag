#version 330 core
// The mouth interior that opens between the lips: upper teeth (the photo's own where
// it showed them at rest, moving with the lip, else drawn), the photo's lower teeth,
// tongue and a dark throat, in the portrait's own colours (render/rigs/mouth_colours.py).
// Premultiplied alpha; always opaque.
in vec2 v_src_up;
in vec2 v_src_lo;
in vec2 v_depth;
in float v_teeth;
in vec2 v_static;

uniform sampler2D u_picture;
uniform float u_mouth_width;   // px
uniform float u_teeth;         // px of upper teeth shown below the upper lip
uniform vec2 u_down;           // the face's downward unit vector, in texture units per px
uniform vec3 u_edge;           // the mouth's colour just inside the lips
uniform vec3 u_throat;         // deep inside
uniform vec3 u_tongue;
uniform vec3 u_teeth_colour;   // drawn teeth
uniform float u_shading;       // 1 a photo's gradients, 0 a cartoon's flat colours

out vec4 frag_color;

// smoothstep, its transition narrowed about its middle to a fifteenth of its width as
// u_shading goes to 0: a cartoon's tongue has an outline, not a blur.
float shaded_step(float e0, float e1, float x) {
    float mid = 0.5 * (e0 + e1), half_flat = (e1 - e0) / 30.0;
    return smoothstep(mix(mid - half_flat, e0, u_shading), mix(mid + half_flat, e1, u_shading), x);
}

void main() {
    float d_up = max(v_depth.x, 0.0);
    float d_lo = max(v_depth.y, 0.0);
    float gap = d_up + d_lo;
    float rest_half_gap = v_static.x;
    float half_gap = rest_half_gap * v_teeth;
    float across = v_static.y;
    // One pixel's worth of depth: edges are smooth at any size, never aliased.
    float aa = max(fwidth(d_up), 1e-3);
    float inside = min(d_up, d_lo);
    vec3 mouth = mix(u_edge, u_throat, smoothstep(0.0, 0.12 * u_mouth_width, inside));
    // The tongue shows in the lower part once the mouth is open a fair way.
    float t = d_up / max(gap, 1e-3);
    float tongue = shaded_step(0.55, 0.85, t) * shaded_step(0.12 * u_mouth_width, 0.3 * u_mouth_width, gap)
                 * (1.0 - shaded_step(0.4, 0.75, across));
    mouth = mix(mouth, u_tongue * mix(1.0, 0.8, u_shading * smoothstep(0.85, 1.0, t)), tongue);
    vec4 c = vec4(mouth, 1.0);

    float lower = 1.0 - smoothstep(half_gap - aa, half_gap + aa, d_lo);
    c = mix(c, texture(u_picture, v_src_lo), lower);
    // Upper teeth hang u_teeth below the lip in the middle of the mouth: the photo's
    // own, stretched to that height, where it showed them at rest; else drawn ones.
    float extent = max(half_gap, u_teeth * v_teeth * (1.0 - smoothstep(0.55, 0.85, across)));
    float upper = 1.0 - smoothstep(extent - aa, extent + aa, d_up);
    vec4 teeth;
    if (rest_half_gap > 0.5) {
        teeth = texture(u_picture, v_src_up - u_down * d_up * (1.0 - rest_half_gap / max(extent, 1e-3)));
    } else {
        // Drawn teeth: incisors meeting at the centre line, darker towards their tips
        // and towards the corners, where they recede into the mouth.
        float edge = abs(fract(across * 3.5) - 0.5) * 2.0;
        float shade = mix(1.0, 0.78, smoothstep(0.0, extent, d_up)) * mix(1.0, 0.6, smoothstep(0.3, 0.8, across))
                    * mix(0.8, 1.0, smoothstep(0.0, 0.25, 1.0 - edge));
        teeth = vec4(u_teeth_colour * mix(1.0, shade, u_shading), 1.0);
    }
    frag_color = mix(c, teeth, upper);
}
